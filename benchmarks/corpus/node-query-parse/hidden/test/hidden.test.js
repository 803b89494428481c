'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { parseQuery, buildQuery } = require('../src/index');

test('an encoded plus stays a plus', () => {
  assert.deepEqual(parseQuery('?expr=1%2B1+is+2'), { expr: '1+1 is 2' });
});

test('plus in keys and repeated values', () => {
  assert.deepEqual(parseQuery('first+name=Ada+L&tag=a+b&tag=c'), {
    'first name': 'Ada L',
    tag: ['a b', 'c'],
  });
});

test('build then parse gives the same parameters', () => {
  const params = { q: 'c++ & rust', page: '2', tag: ['x y', 'z'] };
  assert.deepEqual(parseQuery(buildQuery(params)), params);
});

test('percent-encoded spaces still decode', () => {
  assert.deepEqual(parseQuery('q=a%20b'), { q: 'a b' });
});
