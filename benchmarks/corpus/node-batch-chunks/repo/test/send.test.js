'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { sendAll, summary } = require('../src/index');

test('every record is sent', async () => {
  const seen = [];
  const report = await sendAll([1, 2, 3, 4, 5, 6, 7], async (b) => seen.push(...b), { batchSize: 3 });
  assert.deepEqual(seen, [1, 2, 3, 4, 5, 6, 7]);
  assert.equal(summary(report), '7 sent in 3 batches, 0 failed');
});

test('a batch that keeps failing is reported', async () => {
  const report = await sendAll([1, 2, 3, 4], async (b) => {
    if (b[0] === 1) throw new Error('503');
  }, { batchSize: 2, retries: 1 });
  assert.equal(summary(report), '2 sent in 1 batches, 2 failed');
});
