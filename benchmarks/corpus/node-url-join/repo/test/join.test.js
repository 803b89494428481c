'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { joinUrl } = require('../src/index');

test('plain parts', () => {
  assert.equal(joinUrl('https://api.test', 'v1', 'users'), 'https://api.test/v1/users');
});

test('slashes already present are not doubled', () => {
  assert.equal(joinUrl('https://api.test/', '/v1/', 'users'), 'https://api.test/v1/users');
});
