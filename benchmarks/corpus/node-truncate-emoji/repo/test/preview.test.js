'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { preview, initials } = require('../src/index');

test('preview collapses whitespace and adds an ellipsis', () => {
  assert.equal(preview('  a   long\n\npost here ', 8), 'a long…');
  assert.equal(preview('short', 10), 'short');
});

test('initials', () => {
  assert.equal(initials('ada  lovelace'), 'AL');
});
