// How the extension starts `policyc lsp`, and that what it starts is a language server that
// answers the way the extension relies on: the command it builds is run exactly as
// vscode-languageclient runs it (child_process.spawn, JSON-RPC over the child's standard
// streams, with vscode-jsonrpc, the library the client is built on).
'use strict';

const assert = require('node:assert/strict');
const cp = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test } = require('node:test');
const rpc = require('vscode-jsonrpc/node');
const {
  serverExecutable,
  serverSettings,
  describe: describeCommand,
  SERVER_SETTINGS,
} = require('../lib/server');
const { ROOT } = require('./textmate');

const REPO = path.resolve(ROOT, '..', '..');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));

function tempFolder(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'policyc-vscode-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function touch(file) {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, '');
}

const HOME = { homedir: '/home/ada', env: { HOME: '/home/ada', TOOLS: '/opt/tools' } };

test('by default the server is `policyc lsp` from PATH', () => {
  const { executable, source } = serverExecutable({}, { ...HOME });
  assert.equal(executable.command, 'policyc');
  assert.deepEqual(executable.args, ['lsp']);
  assert.equal(source, 'PATH');
  assert.equal(executable.options.cwd, undefined);
  assert.equal(executable.options.env.TOOLS, '/opt/tools');
  assert.equal(describeCommand(executable), 'policyc lsp');
});

test('a virtual environment of a trusted workspace provides policyc', (t) => {
  const folder = tempFolder(t);
  const other = tempFolder(t);
  const venv = path.join(folder, '.venv', 'bin', 'policyc');
  touch(venv);
  const found = serverExecutable({}, { ...HOME, workspaceFolders: [other, folder] });
  assert.equal(found.executable.command, venv);
  assert.equal(found.source, 'virtual environment');
  assert.equal(found.executable.options.cwd, other, 'the server runs in the first folder');
  // not in a workspace the user does not trust: it could be anyone's program
  const untrusted = serverExecutable({}, { ...HOME, workspaceFolders: [folder], trusted: false });
  assert.equal(untrusted.executable.command, 'policyc');
  assert.equal(untrusted.source, 'PATH');
  // nor when the user chose the command
  const chosen = serverExecutable({ path: '/usr/bin/policyc' }, { ...HOME, workspaceFolders: [folder] });
  assert.equal(chosen.executable.command, '/usr/bin/policyc');
  assert.equal(chosen.source, 'setting');
});

test('`venv` and the Windows layout of a virtual environment are found too', (t) => {
  const folder = tempFolder(t);
  touch(path.join(folder, 'venv', 'bin', 'policyc'));
  assert.equal(
    serverExecutable({}, { ...HOME, workspaceFolders: [folder] }).executable.command,
    path.join(folder, 'venv', 'bin', 'policyc'),
  );
  const windows = tempFolder(t);
  touch(path.join(windows, '.venv', 'Scripts', 'policyc.exe'));
  const found = serverExecutable({}, { ...HOME, workspaceFolders: [windows], platform: 'win32' });
  assert.equal(found.executable.command, path.join(windows, '.venv', 'Scripts', 'policyc.exe'));
  // a folder named like the program is not the program
  const decoy = tempFolder(t);
  fs.mkdirSync(path.join(decoy, '.venv', 'bin', 'policyc'), { recursive: true });
  assert.equal(serverExecutable({}, { ...HOME, workspaceFolders: [decoy] }).source, 'PATH');
});

test('the command, its arguments and its environment expand variables', () => {
  const context = { ...HOME, workspaceFolders: ['/work/policies'] };
  const run = (settings) => serverExecutable(settings, context).executable;
  assert.equal(run({ path: '~/bin/policyc' }).command, '/home/ada/bin/policyc');
  assert.equal(run({ path: '${userHome}/bin/policyc' }).command, '/home/ada/bin/policyc');
  assert.equal(run({ path: '${workspaceFolder}/.venv/bin/policyc' }).command, '/work/policies/.venv/bin/policyc');
  assert.equal(run({ path: '${env:TOOLS}/policyc' }).command, '/opt/tools/policyc');
  assert.equal(run({ path: './env/bin/policyc' }).command, '/work/policies/env/bin/policyc');
  assert.equal(run({ path: '  python3 ' }).command, 'python3');
  const python = run({ path: 'python3', args: ['-m', 'policyc', 'lsp', '--log=${workspaceFolder}/a b'] });
  assert.deepEqual(python.args, ['-m', 'policyc', 'lsp', '--log=/work/policies/a b']);
  assert.equal(describeCommand(python), 'python3 -m policyc lsp "--log=/work/policies/a b"');
  const env = run({ env: { POLICYC_DEBUG: '1', CACHE: '${userHome}/.cache' } }).options.env;
  assert.equal(env.POLICYC_DEBUG, '1');
  assert.equal(env.CACHE, '/home/ada/.cache');
  assert.equal(env.TOOLS, '/opt/tools', 'the rest of the environment is kept');
});

test('settings that cannot work are refused with a message', () => {
  assert.throws(
    () => serverExecutable({ path: '${workspaceFolder}/policyc' }, { ...HOME }),
    /\$\{workspaceFolder\} is used in a setting, but no folder is open/,
  );
  assert.throws(() => serverExecutable({ args: ['lsp', 3] }, { ...HOME }), /must be a list of strings/);
});

test('the manifest declares what the extension reads and registers', () => {
  const properties = manifest.contributes.configuration.properties;
  const declared = Object.keys(properties).sort();
  const used = [
    'policyc.server.path',
    'policyc.server.args',
    'policyc.server.env',
    'policyc.trace.server', // read by vscode-languageclient for the client named `policyc`
    ...SERVER_SETTINGS.map((name) => `policyc.${name}`),
  ].sort();
  assert.deepEqual(declared, used);
  assert.deepEqual(properties['policyc.server.args'].default, ['lsp']);
  assert.equal(properties['policyc.server.path'].default, 'policyc');
  const source = fs.readFileSync(path.join(ROOT, 'extension.js'), 'utf8');
  const registered = [...source.matchAll(/registerCommand\('([^']+)'/g)].map((m) => m[1]).sort();
  assert.deepEqual(registered, manifest.contributes.commands.map((c) => c.command).sort());
  assert.match(source, /new LanguageClient\(\s*LANGUAGE,/);
  assert.match(source, /const LANGUAGE = 'policyc';/);
  assert.equal(manifest.contributes.languages[0].id, 'policyc');
  assert.equal(manifest.contributes.grammars[0].language, 'policyc');
  // the manifest's settings are the server's (sent only when set: the server has the defaults)
  assert.deepEqual(serverSettings((name) => properties[`policyc.${name}`].default), {
    policyc: { deep: true, deepBound: 2, deepTimeout: 6, debounceMs: 300 },
  });
  assert.deepEqual(serverSettings(() => undefined), { policyc: {} });
});

// ---------------------------------------------------------------- the real server

const PLANTED = [
  '.decl Send(a: symbol)',
  '.decl Tainted(a: symbol)',
  '.input Send, Tainted',
  'Deny(a) :- Send(a), Taint(a).',
  'Deny(a) :- Send(a), Tainted(b).',
  '',
].join('\n');

function checkJson(text) {
  const { command, args, options } = serverExecutable({ args: ['check', '--format', 'json', '-'] }).executable;
  const done = cp.spawnSync(command, args, { ...options, input: text, encoding: 'utf8' });
  if (done.error) throw done.error;
  return JSON.parse(done.stdout).diagnostics;
}

test('the command the extension builds starts a language server that does what the extension says', async (t) => {
  const folder = tempFolder(t);
  const { executable } = serverExecutable({}, { workspaceFolders: [folder] });
  const child = cp.spawn(executable.command, executable.args, executable.options);
  const spawned = await new Promise((resolve) => {
    child.once('spawn', () => resolve(null));
    child.once('error', (error) => resolve(error));
  });
  assert.equal(
    spawned,
    null,
    `\`${describeCommand(executable)}\` does not start (${spawned?.message}): install policyc ` +
      "(`pip install -e '.[test]'` in the repository) and run the tests with it on PATH",
  );
  const exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  let stderr = '';
  child.stderr.on('data', (data) => (stderr += data));
  t.after(() => child.exitCode === null && child.kill());
  const connection = rpc.createMessageConnection(
    new rpc.StreamMessageReader(child.stdout),
    new rpc.StreamMessageWriter(child.stdin),
  );
  const logs = [];
  connection.onNotification('window/logMessage', (params) => logs.push(params));
  const published = new Promise((resolve) => {
    connection.onNotification('textDocument/publishDiagnostics', (params) => resolve(params));
  });
  connection.listen();

  const defaults = manifest.contributes.configuration.properties;
  const init = await connection.sendRequest('initialize', {
    processId: process.pid,
    rootUri: `file://${folder}`,
    capabilities: {},
    initializationOptions: serverSettings((name) => defaults[`policyc.${name}`].default),
  });
  const capabilities = init.capabilities;
  for (const feature of [
    'hoverProvider',
    'definitionProvider',
    'referencesProvider',
    'renameProvider',
    'documentSymbolProvider',
    'completionProvider',
    'documentFormattingProvider',
    'codeActionProvider',
  ]) {
    assert.ok(capabilities[feature], `the server provides ${feature}`);
  }
  // the documented "editor.codeActionsOnSave" setting names a kind the server offers
  assert.ok(capabilities.codeActionProvider.codeActionKinds.includes('source.fixAll.policyc'));
  await connection.sendNotification('initialized', {});

  const file = path.join(folder, 'policy.dl');
  fs.writeFileSync(file, PLANTED);
  const uri = `file://${file}`;
  await connection.sendNotification('textDocument/didOpen', {
    textDocument: { uri, languageId: 'policyc', version: 1, text: PLANTED },
  });
  const diagnostics = await published;
  assert.equal(diagnostics.uri, uri);
  const expected = checkJson(PLANTED);
  assert.ok(expected.length >= 2, JSON.stringify(expected));
  assert.deepEqual(
    diagnostics.diagnostics.map((d) => [d.code, d.range.start.line, d.range.start.character]),
    expected.map((d) => [d.code, d.line - 1, d.column - 1]),
  );

  // the settings the extension sends are all known to the server
  await connection.sendNotification('workspace/didChangeConfiguration', {
    settings: serverSettings((name) => ({ deep: false, deepBound: 3, deepTimeout: 2, debounceMs: 50 })[name]),
  });
  const hover = await connection.sendRequest('textDocument/hover', {
    textDocument: { uri },
    position: { line: 3, character: 12 },
  });
  assert.match(JSON.stringify(hover.contents), /Send/);
  assert.deepEqual(
    logs.filter((m) => /setting/i.test(m.message)),
    [],
    'the server complains about no setting the extension sends',
  );

  // what the client does to stop (the restart command): shutdown, then exit
  await connection.sendRequest('shutdown');
  await connection.sendNotification('exit');
  const code = await exited;
  connection.dispose();
  assert.equal(code, 0, stderr);
});
