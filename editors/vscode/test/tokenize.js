#!/usr/bin/env node
// Tokenizes policy text with the extension's grammar, for tests written in other languages
// (tests/test_vscode_grammar.py compares the result with policyc's own parser).
//
//   node test/tokenize.js FILE...   one JSON object per file
//   node test/tokenize.js --serve   reads one JSON string (a text) per line on standard input,
//                                   answers one JSON object per line
//
// The object: {"tokens": [[start, end, [scope, ...]], ...], "depth": N}, offsets in code
// points; `depth` is that of the grammar's rule stack after the last line (1: the top level).
'use strict';

const fs = require('fs');
const readline = require('readline');
const { loadGrammar, tokenize } = require('./textmate');

function answer(grammar, text) {
  const { tokens, depth } = tokenize(grammar, text);
  return JSON.stringify({ tokens: tokens.map((t) => [t.start, t.end, t.scopes]), depth });
}

async function main(args) {
  const grammar = await loadGrammar();
  if (args[0] !== '--serve') {
    for (const file of args) process.stdout.write(answer(grammar, fs.readFileSync(file, 'utf8')) + '\n');
    return;
  }
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    let reply;
    try {
      reply = answer(grammar, JSON.parse(line));
    } catch (error) {
      reply = JSON.stringify({ error: String(error && error.stack ? error.stack : error) });
    }
    process.stdout.write(reply + '\n');
  }
}

main(process.argv.slice(2)).catch((error) => {
  process.stderr.write(`tokenize.js: ${error.stack ?? error}\n`);
  process.exit(1);
});
