// The VS Code client of `policyc lsp`: starts the server for policy files, shows what it says in
// the `policyc` output channel, and restarts it on demand or when what it runs changes.
'use strict';

const vscode = require('vscode');
const {
  LanguageClient,
  RevealOutputChannelOn,
  DidChangeConfigurationNotification,
} = require('vscode-languageclient/node');
const { serverExecutable, serverSettings, describe, SERVER_SETTINGS } = require('./lib/server');

const LANGUAGE = 'policyc';

let client;
let running; // the command line of the running server
let output;
let queue = Promise.resolve(); // starts and stops, one at a time, in the order asked

function readSettings() {
  const config = vscode.workspace.getConfiguration('policyc.server');
  return { path: config.get('path'), args: config.get('args'), env: config.get('env') };
}

function readServerSettings() {
  const config = vscode.workspace.getConfiguration('policyc');
  return serverSettings((name) => config.get(name));
}

function workspaceContext() {
  return {
    workspaceFolders: (vscode.workspace.workspaceFolders ?? [])
      .filter((folder) => folder.uri.scheme === 'file')
      .map((folder) => folder.uri.fsPath),
    trusted: vscode.workspace.isTrusted,
  };
}

async function start() {
  let server;
  try {
    server = serverExecutable(readSettings(), workspaceContext());
  } catch (error) {
    await reportFailure(`policyc: ${error.message}`);
    return;
  }
  const commandLine = describe(server.executable);
  output.appendLine(`Starting \`${commandLine}\` (from ${server.source}).`);
  const candidate = new LanguageClient(
    LANGUAGE,
    'policyc language server',
    { run: server.executable, debug: server.executable },
    {
      documentSelector: [
        { scheme: 'file', language: LANGUAGE },
        { scheme: 'untitled', language: LANGUAGE },
      ],
      initializationOptions: readServerSettings(),
      outputChannel: output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
    },
  );
  try {
    await candidate.start();
  } catch (error) {
    await candidate.dispose().catch(() => undefined);
    await reportFailure(
      `policyc: cannot start the language server \`${commandLine}\`: ${error.message ?? error}. ` +
        'Install policyc (`pip install policyc`) or set `policyc.server.path`.',
    );
    return;
  }
  client = candidate;
  running = commandLine;
}

async function stop() {
  if (!client) return;
  const stopping = client;
  client = undefined;
  running = undefined;
  try {
    await stopping.stop();
  } catch (error) {
    output.appendLine(`Stopping the language server: ${error.message ?? error}`);
  }
}

function schedule(step) {
  queue = queue.then(step).catch((error) => output.appendLine(`policyc: ${error.stack ?? error}`));
  return queue;
}

function restart() {
  return schedule(async () => {
    await stop();
    await start();
  });
}

// A change of workspace folders or of trust can change which `policyc` runs.
function restartIfAnotherServer() {
  return schedule(async () => {
    let next;
    try {
      next = describe(serverExecutable(readSettings(), workspaceContext()).executable);
    } catch {
      next = undefined;
    }
    if (next !== running) {
      await stop();
      await start();
    }
  });
}

async function reportFailure(message) {
  output.appendLine(message);
  const choice = await vscode.window.showErrorMessage(message, 'Open Settings', 'Show Output');
  if (choice === 'Open Settings') {
    await vscode.commands.executeCommand('workbench.action.openSettings', 'policyc.server');
  } else if (choice === 'Show Output') {
    output.show(true);
  }
}

function sendServerSettings() {
  if (!client) return;
  client
    .sendNotification(DidChangeConfigurationNotification.type, { settings: readServerSettings() })
    .catch((error) => output.appendLine(`Sending the settings: ${error.message ?? error}`));
}

function activate(context) {
  output = vscode.window.createOutputChannel('policyc');
  context.subscriptions.push(
    output,
    vscode.commands.registerCommand('policyc.restartServer', restart),
    vscode.commands.registerCommand('policyc.showOutput', () => output.show(true)),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('policyc.server')) {
        restart();
      } else if (SERVER_SETTINGS.some((name) => event.affectsConfiguration(`policyc.${name}`))) {
        sendServerSettings();
      }
    }),
    vscode.workspace.onDidChangeWorkspaceFolders(restartIfAnotherServer),
    vscode.workspace.onDidGrantWorkspaceTrust(restartIfAnotherServer),
  );
  restart();
}

function deactivate() {
  return schedule(stop);
}

module.exports = { activate, deactivate };
