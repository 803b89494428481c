'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { runLimited, delay } = require('../src/runner');

test('runLimited keeps results in job order', async () => {
  const jobs = [30, 5, 10, 1].map((ms, i) => () => delay(ms, i));
  assert.deepEqual(await runLimited(jobs, 2), [0, 1, 2, 3]);
});

test('runLimited never exceeds the limit', async () => {
  let running = 0;
  let peak = 0;
  const job = async () => {
    running++;
    peak = Math.max(peak, running);
    await delay(5);
    running--;
  };
  await runLimited(Array.from({ length: 6 }, () => job), 3);
  assert.equal(peak, 3);
});

test('runLimited rejects a bad limit', async () => {
  await assert.rejects(runLimited([], 0), RangeError);
});
