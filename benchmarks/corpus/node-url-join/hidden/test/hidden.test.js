'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { joinUrl, resourceUrl } = require('../src/index');

test('every slash combination gives one slash', () => {
  for (const base of ['http://h', 'http://h/']) {
    for (const part of ['a', '/a', 'a/', '/a/']) {
      assert.equal(joinUrl(base, part, 'b'), 'http://h/a/b', `${base} + ${part}`);
    }
  }
});

test('a base with a path keeps it', () => {
  assert.equal(joinUrl('http://h/api/', '/v2'), 'http://h/api/v2');
});

test('the scheme separator is left alone', () => {
  assert.equal(joinUrl('https://h', 'x'), 'https://h/x');
});

test('no parts returns the base', () => {
  assert.equal(joinUrl('http://h/api'), 'http://h/api');
});

test('resourceUrl with a trailing-slash base', () => {
  assert.equal(resourceUrl('http://h/', 'users', 7, { q: 1 }), 'http://h/users/7?q=1');
});
