'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { chunk } = require('../src/chunk');
const { sendAll } = require('../src/index');

test('exact multiples keep their last full batch', () => {
  assert.deepEqual(chunk([1, 2, 3, 4], 2), [[1, 2], [3, 4]]);
  assert.deepEqual(chunk(['a', 'b', 'c'], 3), [['a', 'b', 'c']]);
});

test('fewer items than the size give one batch', () => {
  assert.deepEqual(chunk([1, 2], 5), [[1, 2]]);
  assert.deepEqual(chunk([], 5), []);
});

test('batches cover every item once, in order', () => {
  const items = Array.from({ length: 23 }, (_, i) => i);
  for (const size of [1, 2, 5, 7, 23, 24]) {
    const batches = chunk(items, size);
    assert.deepEqual(batches.flat(), items);
    assert.ok(batches.every((b) => b.length === size || b === batches.at(-1)));
  }
});

test('sendAll with a batch size equal to the record count', async () => {
  const report = await sendAll([1, 2, 3], async () => {}, { batchSize: 3 });
  assert.deepEqual([report.sent, report.batches], [3, 1]);
});
