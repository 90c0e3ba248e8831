// The VS Code extension of the rubric language: starts `rubric lsp` (the language server of
// the `rubric` binary, over standard input and output) for `.rubric` files. Highlighting comes
// from syntaxes/rubric.tmLanguage.json and needs no server.
"use strict";

const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function serverOptions() {
  const config = vscode.workspace.getConfiguration("rubric");
  const command = config.get("server.path") || "rubric";
  const args = [...(config.get("server.extraArgs") || []), "lsp"];
  return { run: { command, args }, debug: { command, args } };
}

async function start(context) {
  client = new LanguageClient(
    "rubric",
    "Rubric language server",
    serverOptions(),
    { documentSelector: [{ scheme: "file", language: "rubric" }, { scheme: "untitled", language: "rubric" }] }
  );
  await client.start();
}

async function activate(context) {
  await start(context);
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (e.affectsConfiguration("rubric.server")) {
        await deactivate();
        await start(context);
      }
    }),
    vscode.commands.registerCommand("rubric.restartServer", async () => {
      await deactivate();
      await start(context);
    })
  );
}

async function deactivate() {
  if (client) {
    const c = client;
    client = undefined;
    await c.stop();
  }
}

module.exports = { activate, deactivate };
