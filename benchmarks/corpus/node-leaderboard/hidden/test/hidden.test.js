'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { rank, positionOf, addScore } = require('../src/index');

test('scores with different digit counts', () => {
  const board = [5, 1000, 42, 7, 300, 0, 88].map((score, i) => ({ name: `p${i}`, score }));
  assert.deepEqual(rank(board).map((p) => p.score), [1000, 300, 88, 42, 7, 5, 0]);
});

test('ties keep the given order', () => {
  const board = [
    { name: 'a', score: 10 },
    { name: 'b', score: 9 },
    { name: 'c', score: 10 },
  ];
  assert.deepEqual(rank(board).map((p) => p.name), ['a', 'c', 'b']);
});

test('negative and fractional scores', () => {
  const board = [-2, 10.5, -15, 3].map((score, i) => ({ name: `n${i}`, score }));
  assert.deepEqual(rank(board).map((p) => p.score), [10.5, 3, -2, -15]);
});

test('a player who overtakes moves up', () => {
  let board = [
    { name: 'ann', score: 80 },
    { name: 'ben', score: 95 },
  ];
  board = addScore(board, 'ann', 20);
  assert.equal(positionOf(board, 'ann'), 1);
  assert.equal(positionOf(board, 'ben'), 2);
});
