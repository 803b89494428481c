'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { cartTotal, isFreeShipping } = require('../src/index');

test('cartTotal is exact to the cent', () => {
  const lines = [
    { sku: 'a', price: 0.1, quantity: 1 },
    { sku: 'b', price: 0.2, quantity: 1 },
  ];
  assert.equal(cartTotal(lines), 0.3);
});

test('free shipping from the threshold on', () => {
  assert.equal(isFreeShipping([{ sku: 'x', price: 25, quantity: 2 }], 50), true);
});
