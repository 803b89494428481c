'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { buildQuery } = require('../src/index');

test('buildQuery encodes spaces as plus', () => {
  assert.equal(buildQuery({ q: 'a b', tag: ['x', 'y'] }), '?q=a+b&tag=x&tag=y');
  assert.equal(buildQuery({}), '');
});
