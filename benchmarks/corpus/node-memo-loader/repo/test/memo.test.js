'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { memoize } = require('../src/index');

const later = (ms, value) => new Promise((resolve) => setTimeout(() => resolve(value), ms));

test('concurrent calls for one key load it once', async () => {
  let loads = 0;
  const memo = memoize(async (key) => {
    loads++;
    return later(10, key.toUpperCase());
  });
  const values = await Promise.all([memo.get('a'), memo.get('a'), memo.get('a')]);
  assert.deepEqual(values, ['A', 'A', 'A']);
  assert.equal(loads, 1);
});

test('a later call reuses the value', async () => {
  let loads = 0;
  const memo = memoize(async (key) => ++loads && key);
  await memo.get('x');
  await memo.get('x');
  assert.equal(loads, 1);
});
