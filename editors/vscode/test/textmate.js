// Tokenizes policy text with the extension's grammar, the way VS Code does (vscode-textmate on
// the Oniguruma WebAssembly build), for the tests. Offsets are in code points, as policyc's own
// spans are, so that tests can compare the two.
'use strict';

const fs = require('fs');
const path = require('path');
const textmate = require('vscode-textmate');
const oniguruma = require('vscode-oniguruma');

const ROOT = path.resolve(__dirname, '..');
const GRAMMAR = path.join(ROOT, 'syntaxes', 'policyc.tmLanguage.json');
const SCOPE = 'source.policyc';

async function loadGrammar() {
  const wasm = fs.readFileSync(path.join(path.dirname(require.resolve('vscode-oniguruma')), 'onig.wasm'));
  await oniguruma.loadWASM(wasm.buffer.slice(wasm.byteOffset, wasm.byteOffset + wasm.byteLength));
  const registry = new textmate.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (patterns) => new oniguruma.OnigScanner(patterns),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scopeName) =>
      scopeName === SCOPE ? textmate.parseRawGrammar(fs.readFileSync(GRAMMAR, 'utf8'), GRAMMAR) : null,
  });
  return registry.loadGrammar(SCOPE);
}

// The lines of a text as an editor sees them: without their line breaks, with the code-point
// offset where each starts.
function splitLines(text) {
  const lines = [];
  let offset = 0;
  const re = /\r\n|\r|\n/g;
  let start = 0;
  let m;
  const codePoints = (s) => Array.from(s).length;
  while ((m = re.exec(text)) !== null) {
    const line = text.slice(start, m.index);
    lines.push({ text: line, offset });
    offset += codePoints(line) + codePoints(m[0]);
    start = m.index + m[0].length;
  }
  lines.push({ text: text.slice(start), offset });
  return lines;
}

// Every token of the text: {start, end, scopes} with code-point offsets into the whole text,
// and `depth`, the depth of the grammar's rule stack at the end of the text (1 at the top level).
function tokenize(grammar, text) {
  const tokens = [];
  let stack = textmate.INITIAL;
  for (const line of splitLines(text)) {
    const result = grammar.tokenizeLine(line.text, stack);
    // UTF-16 index -> code-point index within the line
    const units = [];
    let cp = 0;
    for (const ch of line.text) {
      for (let i = 0; i < ch.length; i++) units.push(cp);
      cp++;
    }
    units.push(cp);
    const at = (i) => (i < units.length ? units[i] : cp);
    for (const token of result.tokens) {
      const start = at(token.startIndex);
      const end = at(Math.min(token.endIndex, line.text.length));
      if (end > start) tokens.push({ start: line.offset + start, end: line.offset + end, scopes: token.scopes });
    }
    stack = result.ruleStack;
  }
  return { tokens, depth: stack.depth };
}

module.exports = { loadGrammar, tokenize, splitLines, GRAMMAR, ROOT, SCOPE };
