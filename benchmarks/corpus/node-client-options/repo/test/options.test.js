'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { createClient, defaults } = require('../src/index');

test('a client with overrides does not change the next client', () => {
  createClient({ baseUrl: 'https://api.example.test', retries: 5 });
  const plain = createClient();
  assert.equal(plain.settings.baseUrl, 'http://localhost:8080');
  assert.equal(plain.settings.retries, 2);
  assert.equal(defaults().retries, 2);
});

test('bad options are rejected', () => {
  assert.throws(() => createClient({ retries: -1 }), RangeError);
});
