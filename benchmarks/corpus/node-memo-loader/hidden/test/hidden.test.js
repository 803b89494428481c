'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { memoize, loadMany } = require('../src/index');

const later = (ms, value) => new Promise((resolve) => setTimeout(() => resolve(value), ms));

test('loadMany with repeated keys loads each key once', async () => {
  const calls = [];
  const memo = memoize(async (key) => {
    calls.push(key);
    return later(5, key * 10);
  });
  const values = await loadMany(memo, [1, 2, 1, 3, 2, 1]);
  assert.deepEqual(values, [10, 20, 10, 30, 20, 10]);
  assert.deepEqual(calls.sort(), [1, 2, 3]);
});

test('a call during a pending load shares that load', async () => {
  let loads = 0;
  const memo = memoize(async () => {
    loads++;
    return later(20, 'v');
  });
  const first = memo.get('k');
  await later(5);
  const second = memo.get('k');
  assert.deepEqual(await Promise.all([first, second]), ['v', 'v']);
  assert.equal(loads, 1);
});

test('different keys load separately', async () => {
  let loads = 0;
  const memo = memoize(async (key) => {
    loads++;
    return later(1, key);
  });
  await Promise.all([memo.get('a'), memo.get('b')]);
  assert.equal(loads, 2);
});
