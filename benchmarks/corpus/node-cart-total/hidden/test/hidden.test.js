'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { cartTotal, isFreeShipping, formatEuros } = require('../src/index');

test('many small prices add up exactly', () => {
  const lines = Array.from({ length: 10 }, (_, i) => ({ sku: `s${i}`, price: 0.1, quantity: 1 }));
  assert.equal(cartTotal(lines), 1);
});

test('quantities and cents', () => {
  const lines = [
    { sku: 'a', price: 19.99, quantity: 3 },
    { sku: 'b', price: 0.07, quantity: 7 },
    { sku: 'c', price: 1.15, quantity: 1 },
  ];
  assert.equal(cartTotal(lines), 61.61);
  assert.equal(formatEuros(cartTotal(lines)), '€61.61');
});

test('a cart that reaches the threshold exactly ships free', () => {
  const lines = [
    { sku: 'a', price: 0.7, quantity: 1 },
    { sku: 'b', price: 0.1, quantity: 1 },
    { sku: 'c', price: 0.1, quantity: 1 },
    { sku: 'd', price: 0.1, quantity: 1 },
  ];
  assert.equal(isFreeShipping(lines, 1), true);
});

test('an empty cart is zero', () => {
  assert.equal(cartTotal([]), 0);
});
