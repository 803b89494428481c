'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { createClient } = require('../src/index');

test('url joins base and path with one slash', () => {
  const client = createClient({ baseUrl: 'http://svc/' });
  assert.equal(client.url('/users'), 'http://svc/users');
});

test('headers merge extras', () => {
  const headers = createClient().headers({ 'x-id': '1' });
  assert.equal(headers['x-id'], '1');
  assert.equal(headers.accept, 'application/json');
});
