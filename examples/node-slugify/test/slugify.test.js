'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { slugify } = require('../src/slugify');

test('lower-cases single words', () => {
  assert.equal(slugify('Hello'), 'hello');
});

test('removes accents', () => {
  assert.equal(slugify('Crème brûlée'), 'creme-brulee');
});

test('collapses runs of punctuation and spaces into one hyphen', () => {
  assert.equal(slugify('Hello,   World!  2024'), 'hello-world-2024');
});

test('trims hyphens at both ends', () => {
  assert.equal(slugify('  --Loopwright--  '), 'loopwright');
});
