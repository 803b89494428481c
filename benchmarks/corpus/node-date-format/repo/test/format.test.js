'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { formatDate, formatDateTime } = require('../src/dates');

test('formatDate pads month and day', () => {
  assert.equal(formatDate(new Date(Date.UTC(2024, 2, 5))), '2024-03-05');
});

test('formatDateTime adds hours and minutes', () => {
  assert.equal(formatDateTime(new Date(Date.UTC(2023, 10, 9, 7, 4))), '2023-11-09 07:04');
});
