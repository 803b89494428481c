'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { formatEuros, vatIncluded, lineTotal } = require('../src/index');

test('formatEuros', () => {
  assert.equal(formatEuros(3), '€3.00');
  assert.equal(formatEuros(-0.5), '-€0.50');
});

test('vatIncluded rounds to the cent', () => {
  assert.equal(vatIncluded(119, 19), 19);
});

test('lineTotal rejects fractional quantities', () => {
  assert.throws(() => lineTotal({ sku: 'a', price: 1, quantity: 1.5 }), RangeError);
});
