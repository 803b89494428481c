'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { runSerial, delay } = require('../src/runner');

test('a job starts only after the previous one settled', async () => {
  let running = 0;
  let peak = 0;
  const job = (value) => async () => {
    running++;
    peak = Math.max(peak, running);
    await delay(3);
    running--;
    return value * 2;
  };
  const results = await runSerial([1, 2, 3, 4].map(job));
  assert.equal(peak, 1);
  assert.deepEqual(results, [2, 4, 6, 8]);
});

test('a later job sees what an earlier job did', async () => {
  const state = [];
  await runSerial([
    async () => { await delay(10); state.push('first'); },
    async () => { state.push(`second after ${state.length}`); },
  ]);
  assert.deepEqual(state, ['first', 'second after 1']);
});

test('an empty list resolves to an empty array', async () => {
  assert.deepEqual(await runSerial([]), []);
});
