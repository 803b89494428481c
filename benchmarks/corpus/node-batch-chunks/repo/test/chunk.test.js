'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { chunk } = require('../src/chunk');

test('the last partial batch is kept', () => {
  assert.deepEqual(chunk([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]]);
});

test('a bad size is rejected', () => {
  assert.throws(() => chunk([1], 0), RangeError);
});
