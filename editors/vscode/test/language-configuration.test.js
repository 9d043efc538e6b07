// The language configuration, evaluated as VS Code evaluates it (its patterns are JavaScript
// regular expressions): words keep their primes, the editor indents a rule's body and returns
// to the margin after it, and block comments continue.
'use strict';

const assert = require('node:assert/strict');
const { test } = require('node:test');
const config = require('../language-configuration.json');

// The word at `column` of `line`, found the way VS Code's getWordAtText does it.
function wordAt(line, column) {
  const pattern = new RegExp(config.wordPattern, 'g');
  for (const m of line.matchAll(pattern)) {
    if (m.index <= column && column <= m.index + m[0].length) return m[0];
  }
  return null;
}

function onEnter(before, after = '') {
  const rule = config.onEnterRules.find(
    (r) => new RegExp(r.beforeText).test(before) && (!r.afterText || new RegExp(r.afterText).test(after)),
  );
  return rule ? rule.action : null;
}

test('a word is a name with its primes, or a number', () => {
  const line = "Tainted(e) :- DependsOn(e, e'), Tainted(e’’), Score(x1_2, 2.5e-3).";
  assert.equal(wordAt(line, line.indexOf("e')")), "e'");
  assert.equal(wordAt(line, line.indexOf('e’’')), 'e’’');
  assert.equal(wordAt(line, line.indexOf('DependsOn') + 3), 'DependsOn');
  assert.equal(wordAt(line, line.indexOf('x1_2') + 2), 'x1_2');
  assert.equal(wordAt(line, line.indexOf('2.5') + 1), '2.5e-3');
  assert.equal(wordAt('.decl R(x: symbol)', 3), 'decl');
  assert.equal(wordAt('a, b', 1), 'a', 'a comma is not part of a word');
});

test('comments and brackets are those of the language', () => {
  assert.equal(config.comments.lineComment, '//');
  assert.deepEqual(config.comments.blockComment, ['/*', '*/']);
  assert.deepEqual(config.brackets, [
    ['(', ')'],
    ['{', '}'],
  ]);
  const pairs = config.autoClosingPairs.map((p) => p.open);
  assert.ok(pairs.includes('"') && pairs.includes('('));
  assert.ok(!pairs.includes("'"), 'a prime is not a quote: typing `e\'` must not insert another');
});

test("a rule's body is indented, and the line after its end is not", () => {
  const increase = new RegExp(config.indentationRules.increaseIndentPattern);
  assert.ok(increase.test('Deny(a) :-'));
  assert.ok(increase.test('Deny(a) :-  // why'));
  assert.ok(increase.test('Many(n) :- n = count : {'));
  assert.ok(!increase.test('Deny(a) :- Send(a).'));
  assert.ok(new RegExp(config.indentationRules.decreaseIndentPattern).test('    }'));
  assert.deepEqual(onEnter('    not BrowseAllowed(a).'), { indent: 'outdent' });
  assert.deepEqual(onEnter('    s != v. // last'), { indent: 'outdent' });
  assert.equal(onEnter('    Actions(a),'), null);
  assert.equal(onEnter('    Actions(a), // the action.'), null, 'a period in a comment ends nothing');
  assert.equal(onEnter('Deny(a) :- Send(a).'), null, 'at the margin already');
});

test('block comments continue on the next line', () => {
  assert.deepEqual(onEnter('/* a comment', ' */'), { indent: 'indentOutdent', appendText: ' * ' });
  assert.deepEqual(onEnter('/** a comment'), { indent: 'none', appendText: ' * ' });
  assert.deepEqual(onEnter(' * more of it'), { indent: 'none', appendText: '* ' });
  assert.deepEqual(onEnter(' * the end.'), { indent: 'none', appendText: '* ' });
  assert.deepEqual(onEnter(' */'), { indent: 'none', removeText: 1 });
  assert.deepEqual(onEnter('// a line comment', 'split here'), { indent: 'none', appendText: '// ' });
});
