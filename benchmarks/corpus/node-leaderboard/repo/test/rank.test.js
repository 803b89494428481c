'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { rank, top } = require('../src/index');

const players = [
  { name: 'ada', score: 9 },
  { name: 'bob', score: 100 },
  { name: 'cy', score: 25 },
];

test('rank orders by numeric score, highest first', () => {
  assert.deepEqual(rank(players).map((p) => p.name), ['bob', 'cy', 'ada']);
});

test('top takes the best n', () => {
  assert.deepEqual(top(players, 1).map((p) => p.name), ['bob']);
});
