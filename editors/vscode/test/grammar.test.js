// Checks of the grammar as a whole: it agrees with the language's own definition (directives,
// reserved words, builtin functors), every scope it defines is asserted by a grammar test, and
// every policy shipped with policyc is tokenized completely, with nothing left unscoped.
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { test, before } = require('node:test');
const { loadGrammar, tokenize, GRAMMAR, ROOT } = require('./textmate');

const REPO = path.resolve(ROOT, '..', '..');
const LARK = fs.readFileSync(path.join(REPO, 'grammar', 'policy.lark'), 'utf8');

let grammar;
before(async () => {
  grammar = await loadGrammar();
});

// The scopes of the characters [start, end) of `text`, one list per character.
function scopesAt(text, start, end) {
  const { tokens } = tokenize(grammar, text);
  const out = [];
  for (let i = start; i < end; i++) {
    const token = tokens.find((t) => t.start <= i && i < t.end);
    out.push(token ? token.scopes : ['source.policyc']);
  }
  return out;
}

function leafAt(text, fragment) {
  const i = text.indexOf(fragment);
  assert.ok(i >= 0, `${fragment} is in ${text}`);
  return scopesAt(text, i, i + fragment.length).map((s) => s[s.length - 1]);
}

function policyFiles(dir) {
  const found = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) found.push(...policyFiles(full));
    else if (entry.name.endsWith('.dl')) found.push(full);
  }
  return found.sort();
}

test('every directive of the language is highlighted as one', () => {
  const directives = [...LARK.matchAll(/^[A-Z]+: \/\\\.([a-z]+)\\b\//gm)].map((m) => m[1]);
  assert.ok(directives.length >= 9, `directives found in policy.lark: ${directives}`);
  for (const name of directives) {
    const text = `.${name} x`;
    const leaves = leafAt(text, `.${name}`);
    assert.deepEqual(new Set(leaves), new Set(['keyword.other.directive.policyc']), text);
  }
});

test('every reserved word of the language is highlighted as a keyword', () => {
  const words = [...LARK.matchAll(/^[A-Z]+: "([a-z]+)"$/gm)].map((m) => m[1]);
  const operators = ['band', 'bnot', 'bor', 'bshl', 'bshr', 'bshru', 'bxor', 'land', 'lnot', 'lor', 'lxor'];
  assert.deepEqual(words.sort(), ['count', 'max', 'mean', 'min', 'not', 'sum', ...operators].sort());
  for (const word of words) {
    const unary = word === 'bnot' || word === 'lnot';
    const text = operators.includes(word)
      ? `P(x) :- Q(x), y = ${unary ? '' : 'x '}${word} 1.`
      : `P(x) :- Q(x), y = ${word} : { R(x) }.`;
    const leaves = leafAt(text, word);
    assert.ok(leaves.every((s) => s.startsWith('keyword.')), `${word}: ${leaves}`);
    // ... but a longer name that starts with it is a variable
    assert.deepEqual(leafAt(`P(${word}x) :- Q(${word}x).`, `${word}x`)[0], 'variable.other.policyc');
  }
});

test('the soft keywords of the language are keywords in their directive only', () => {
  const declared = LARK.match(/^%declare (.+)$/m)[1].trim().split(/\s+/).map((s) => s.toLowerCase());
  assert.deepEqual(
    declared.sort(),
    [
      'budget',
      'choice_domain',
      'eqrel',
      'hint',
      'inline',
      'io_qualifier',
      'overridable',
      'pool',
      'presence',
      'stateful',
      'storage',
    ],
  );
  const hinted = '.decl R(x: symbol) no_magic output';
  assert.equal(leafAt(hinted, 'no_magic')[0], 'storage.modifier.hint.policyc');
  assert.equal(leafAt(hinted, 'output')[0], 'storage.modifier.io.policyc');
  const stateful = '.functor f(x: number): number stateful';
  assert.equal(leafAt(stateful, 'stateful')[0], 'storage.modifier.stateful.policyc');
  assert.equal(leafAt('.decl R(x: symbol) inline', 'inline')[0], 'storage.modifier.inline.policyc');
  const both = '.decl R(x: symbol) inline overridable';
  assert.equal(leafAt(both, 'overridable')[0], 'storage.modifier.overridable.policyc');
  const role = '.role r budget 0.5 pool shared';
  assert.equal(leafAt(role, 'budget')[0], 'keyword.other.budget.policyc');
  assert.equal(leafAt(role, 'pool')[0], 'keyword.other.pool.policyc');
  assert.equal(leafAt('.arg pay.amount: number required', 'required')[0], 'keyword.other.presence.policyc');
  for (const word of declared) {
    assert.equal(leafAt(`P(${word}) :- Q(${word}).`, word)[0], 'variable.other.policyc', word);
  }
});

test('the builtin functors are those of the standard library', () => {
  const builtins = fs.readFileSync(path.join(REPO, 'stdlib', 'builtins.dl'), 'utf8');
  const names = [...builtins.matchAll(/^\.functor ([A-Za-z_][A-Za-z0-9_]*)\(/gm)].map((m) => m[1]);
  assert.ok(names.length >= 10, `functors found in stdlib/builtins.dl: ${names}`);
  for (const name of names) {
    const text = `P(x) :- Q(x), ${name}(x, "a") = y, R(${name}(x)).`;
    const i = text.indexOf(name);
    const j = text.lastIndexOf(name);
    for (const at of [i, j]) {
      const scopes = scopesAt(text, at, at + name.length);
      assert.ok(
        scopes.every((s) => s.includes('support.function.builtin.policyc')),
        `${name}: ${scopes[0]}`,
      );
    }
  }
  // a name that only starts like a builtin is not one
  const scopes = scopesAt('P(x) :- Q(x), y = concat(x, x).', 18, 24);
  assert.ok(scopes.every((s) => s.includes('entity.name.function.policyc')), `${scopes[0]}`);
});

function grammarScopes() {
  const json = JSON.parse(fs.readFileSync(GRAMMAR, 'utf8'));
  const scopes = new Set();
  const visit = (node) => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!node || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node)) {
      if ((key === 'name' || key === 'contentName') && typeof value === 'string') {
        value.split(/\s+/).forEach((s) => scopes.add(s));
      } else {
        visit(value);
      }
    }
  };
  visit(json.repository);
  visit(json.patterns);
  return scopes;
}

test('every scope the grammar defines is asserted by a grammar test', () => {
  const asserted = new Set();
  const dir = path.join(ROOT, 'test', 'grammar');
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.dltest'))) {
    for (const line of fs.readFileSync(path.join(dir, file), 'utf8').split('\n')) {
      const m = line.match(/^\/\/\s*(?:\^+|<~*-+)\s+(.*)$/);
      if (!m) continue;
      const required = m[1].split(/\s+-\s+|^-\s+/)[0];
      required.split(/\s+/).filter(Boolean).forEach((s) => asserted.add(s));
    }
  }
  const missing = [...grammarScopes()].filter((s) => !asserted.has(s)).sort();
  assert.deepEqual(missing, [], 'scopes of the grammar that no test asserts');
});

const SHIPPED = [...policyFiles(path.join(REPO, 'examples')), ...policyFiles(path.join(REPO, 'stdlib'))];

test('policies are shipped with policyc to tokenize', () => {
  assert.ok(SHIPPED.length >= 20, `${SHIPPED.length} policy files`);
});

for (const file of SHIPPED) {
  test(`every character of ${path.relative(REPO, file)} is scoped, none as invalid`, () => {
    const text = fs.readFileSync(file, 'utf8');
    const chars = Array.from(text);
    const { tokens, depth } = tokenize(grammar, text);
    const problems = [];
    const covered = new Array(chars.length).fill(false);
    for (const token of tokens) {
      const invalid = token.scopes.find((s) => s.startsWith('invalid.'));
      const bare = token.scopes.length === 1 || token.scopes.every((s) => s === 'source.policyc');
      const visible = chars.slice(token.start, token.end).join('');
      if (invalid || (bare && visible.trim())) {
        const line = chars.slice(0, token.start).filter((c) => c === '\n').length + 1;
        problems.push(`line ${line}: ${JSON.stringify(visible)} ${invalid ?? 'has no scope'}`);
      }
      for (let i = token.start; i < token.end; i++) covered[i] = true;
    }
    chars.forEach((c, i) => {
      if (!covered[i] && c.trim()) problems.push(`offset ${i}: ${JSON.stringify(c)} is in no token`);
    });
    assert.deepEqual(problems.slice(0, 20), []);
    // nothing left open at the end of the file (a runaway string, comment or parenthesis)
    assert.equal(depth, 1, 'the grammar is back at the top level at the end of the file');
  });
}
