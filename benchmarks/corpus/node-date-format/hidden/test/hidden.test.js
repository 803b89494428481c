'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { formatDate, formatDateTime, parseDate, addDays } = require('../src/dates');

test('January and December format as 01 and 12', () => {
  assert.equal(formatDate(new Date(Date.UTC(2025, 0, 1))), '2025-01-01');
  assert.equal(formatDate(new Date(Date.UTC(1999, 11, 31))), '1999-12-31');
});

test('formatDate is the inverse of parseDate', () => {
  for (const day of ['2024-02-29', '2023-10-10', '2000-06-15', '2031-09-01']) {
    assert.equal(formatDate(parseDate(day)), day);
  }
});

test('formatDateTime uses the same month', () => {
  assert.equal(formatDateTime(new Date(Date.UTC(2024, 11, 31, 23, 59))), '2024-12-31 23:59');
});

test('a date a week later formats a week later', () => {
  assert.equal(formatDate(addDays(parseDate('2024-12-28'), 7)), '2025-01-04');
});
