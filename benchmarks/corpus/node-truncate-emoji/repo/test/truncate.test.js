'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { truncate, charLength } = require('../src/index');

test('truncate ascii', () => {
  assert.equal(truncate('hello world', 5), 'hello');
});

test('truncate never splits an emoji', () => {
  const text = 'hi 😀😀';
  assert.equal(truncate(text, 4), 'hi 😀');
  assert.equal(charLength(truncate(text, 4)), 4);
});
