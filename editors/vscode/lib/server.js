// How the extension starts `policyc lsp`: the command, its arguments and its environment,
// worked out from the settings and the workspace. Nothing here needs VS Code, so the tests run
// it as it is.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');

const DEFAULT_COMMAND = 'policyc';
const DEFAULT_ARGS = ['lsp'];

// `~`, `${userHome}`, `${workspaceFolder}` and `${env:NAME}`, as in VS Code's own settings.
function expand(value, context) {
  let text = String(value);
  if (text === '~' || text.startsWith('~/') || text.startsWith('~\\')) {
    text = context.homedir + text.slice(1);
  }
  return text.replace(/\$\{(userHome|workspaceFolder|env:([^}]+))\}/g, (whole, name, variable) => {
    if (name === 'userHome') return context.homedir;
    if (name === 'workspaceFolder') {
      if (context.workspaceFolders.length === 0) {
        throw new Error(`${whole} is used in a setting, but no folder is open`);
      }
      return context.workspaceFolders[0];
    }
    return context.env[variable] ?? '';
  });
}

// The `policyc` of a virtual environment in one of the workspace folders, if there is one.
function findInVirtualEnvironment(context) {
  const windows = context.platform === 'win32';
  const relative = windows ? ['Scripts', 'policyc.exe'] : ['bin', 'policyc'];
  for (const folder of context.workspaceFolders) {
    for (const venv of ['.venv', 'venv']) {
      const candidate = path.join(folder, venv, ...relative);
      if (context.isFile(candidate)) return candidate;
    }
  }
  return undefined;
}

function isFile(file) {
  try {
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * The server to start, as a vscode-languageclient `Executable` plus where the command came from.
 *
 * settings: {path, args, env} as read from the `policyc.server` section (missing values take
 * their defaults). context: {workspaceFolders: string[], trusted: boolean, platform, env,
 * homedir, isFile} (missing values are those of this process).
 */
function serverExecutable(settings = {}, context = {}) {
  const ctx = {
    workspaceFolders: context.workspaceFolders ?? [],
    trusted: context.trusted ?? true,
    platform: context.platform ?? process.platform,
    env: context.env ?? process.env,
    homedir: context.homedir ?? os.homedir(),
    isFile: context.isFile ?? isFile,
  };
  const configured = typeof settings.path === 'string' && settings.path.trim() ? settings.path.trim() : DEFAULT_COMMAND;
  const rawArgs = Array.isArray(settings.args) ? settings.args : DEFAULT_ARGS;
  if (!rawArgs.every((a) => typeof a === 'string')) {
    throw new Error('the setting `policyc.server.args` must be a list of strings');
  }
  let command = expand(configured, ctx);
  let source = 'setting';
  if (configured === DEFAULT_COMMAND) {
    const found = ctx.trusted ? findInVirtualEnvironment(ctx) : undefined;
    if (found) {
      command = found;
      source = 'virtual environment';
    } else {
      source = 'PATH';
    }
  } else if (!path.isAbsolute(command) && /[\\/]/.test(command) && ctx.workspaceFolders.length > 0) {
    // `./.venv/bin/policyc`: relative to the (first) workspace folder
    command = path.resolve(ctx.workspaceFolders[0], command);
  }
  const extra = {};
  for (const [name, value] of Object.entries(settings.env ?? {})) {
    extra[name] = expand(value, ctx);
  }
  const options = { env: { ...ctx.env, ...extra } };
  if (ctx.workspaceFolders.length > 0) options.cwd = ctx.workspaceFolders[0];
  return {
    executable: { command, args: rawArgs.map((a) => expand(a, ctx)), options },
    source,
  };
}

// The settings of the server itself (docs/lsp.md, "Settings"), sent as `initializationOptions`
// and again whenever they change; `read(name)` gives the value of `policyc.<name>`.
const SERVER_SETTINGS = ['deep', 'deepBound', 'deepTimeout', 'debounceMs'];

function serverSettings(read) {
  const settings = {};
  for (const name of SERVER_SETTINGS) {
    const value = read(name);
    if (value !== undefined && value !== null) settings[name] = value;
  }
  return { policyc: settings };
}

// The command line for messages: `policyc lsp`, with arguments quoted when they need it.
function describe(executable) {
  const quote = (s) => (/^[\w@%+=:,./\\-]+$/.test(s) ? s : JSON.stringify(s));
  return [executable.command, ...executable.args].map(quote).join(' ');
}

module.exports = {
  serverExecutable,
  serverSettings,
  describe,
  expand,
  SERVER_SETTINGS,
  DEFAULT_COMMAND,
  DEFAULT_ARGS,
};
