'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { canonicalUrl, articlePath } = require('../src/index');

test('canonical url of a long title', () => {
  const article = { id: 1, title: 'Ten Tips for Faster Tests', published: '2024-05-02T10:00:00Z' };
  assert.equal(canonicalUrl('https://blog.test/', article), 'https://blog.test/2024/05/ten-tips-for-faster-tests');
});

test('an explicit slug wins', () => {
  const article = { id: 2, title: 'Whatever', slug: 'hello', published: '2023-12-31T23:00:00Z' };
  assert.equal(articlePath(article), '/2023/12/hello');
});
