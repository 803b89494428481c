'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { parseDate, addDays, daysBetween } = require('../src/dates');

test('parseDate rejects days that do not exist', () => {
  assert.throws(() => parseDate('2023-02-29'), RangeError);
  assert.throws(() => parseDate('5/3/2024'), SyntaxError);
});

test('addDays crosses month ends', () => {
  const date = addDays(parseDate('2024-01-30'), 3);
  assert.equal(date.getTime(), Date.UTC(2024, 1, 2));
  assert.equal(daysBetween(parseDate('2024-02-01'), parseDate('2024-03-01')), 29);
});
