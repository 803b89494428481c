'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { memoize } = require('../src/index');

test('oldest entries are evicted beyond maxEntries', async () => {
  const memo = memoize(async (key) => key, { maxEntries: 2 });
  await memo.get(1);
  await memo.get(2);
  await memo.get(3);
  assert.equal(memo.size(), 2);
});

test('forget drops a key', async () => {
  const memo = memoize(async (key) => key);
  await memo.get('k');
  assert.equal(memo.forget('k'), true);
  assert.equal(memo.size(), 0);
});
