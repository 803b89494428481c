'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { createClient, defaults } = require('../src/index');

test('two clients keep their own settings', () => {
  const a = createClient({ timeoutMs: 100 });
  const b = createClient({ userAgent: 'b/2' });
  assert.equal(a.settings.timeoutMs, 100);
  assert.equal(a.settings.userAgent, 'api-client/1.0');
  assert.equal(b.settings.timeoutMs, 5000);
  assert.equal(b.settings.userAgent, 'b/2');
});

test('defaults stay the published defaults after many clients', () => {
  for (let i = 0; i < 3; i++) {
    createClient({ retries: i + 7, baseUrl: `http://host${i}` });
  }
  assert.deepEqual(defaults(), {
    baseUrl: 'http://localhost:8080',
    timeoutMs: 5000,
    retries: 2,
    userAgent: 'api-client/1.0',
  });
});

test('the options object passed in is not changed', () => {
  const options = { retries: 1 };
  createClient(options);
  assert.deepEqual(options, { retries: 1 });
});

test('a rejected client leaves the defaults alone', () => {
  assert.throws(() => createClient({ timeoutMs: 0 }), RangeError);
  assert.equal(createClient().settings.timeoutMs, 5000);
});
