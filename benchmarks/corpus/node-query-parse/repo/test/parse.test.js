'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { parseQuery, searchTerms } = require('../src/index');

test('plus means space', () => {
  assert.deepEqual(parseQuery('?q=red+shoes'), { q: 'red shoes' });
  assert.deepEqual(searchTerms('?q=red+shoes'), ['red', 'shoes']);
});

test('repeated keys become arrays', () => {
  assert.deepEqual(parseQuery('tag=a&tag=b&x'), { tag: ['a', 'b'], x: '' });
});
