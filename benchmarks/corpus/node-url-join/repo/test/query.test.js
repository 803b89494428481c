'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { queryString, resourceUrl } = require('../src/index');

test('queryString sorts keys, skips empty values and repeats arrays', () => {
  assert.equal(queryString({ b: 2, a: 'x y', c: undefined, tag: ['p', 'q'] }), '?a=x%20y&b=2&tag=p&tag=q');
  assert.equal(queryString({}), '');
});

test('resourceUrl encodes the id', () => {
  assert.equal(resourceUrl('http://h', 'files', 'a/b'), 'http://h/files/a%2Fb');
});
