'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { averageScore, addScore, positionOf } = require('../src/index');

test('averageScore', () => {
  assert.equal(averageScore([{ score: 2 }, { score: 4 }]), 3);
  assert.equal(averageScore([]), 0);
});

test('addScore returns a new board', () => {
  const board = [{ name: 'a', score: 1 }];
  assert.equal(addScore(board, 'a', 2)[0].score, 3);
  assert.equal(board[0].score, 1);
  assert.equal(positionOf(board, 'zed'), null);
});
