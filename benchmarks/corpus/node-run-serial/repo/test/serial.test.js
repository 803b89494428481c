'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { runSerial, delay } = require('../src/runner');

test('runSerial resolves with every result in order', async () => {
  const results = await runSerial([() => delay(20, 'a'), () => delay(5, 'b'), () => delay(1, 'c')]);
  assert.deepEqual(results, ['a', 'b', 'c']);
});

test('runSerial runs one job at a time', async () => {
  const log = [];
  const job = (name, ms) => async () => {
    log.push(`start ${name}`);
    await delay(ms);
    log.push(`end ${name}`);
  };
  await runSerial([job('x', 15), job('y', 1)]);
  assert.deepEqual(log, ['start x', 'end x', 'start y', 'end y']);
});
