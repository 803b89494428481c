'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { archive, articlePath } = require('../src/index');

test('archive groups by month, newest first', () => {
  const articles = [
    { id: 1, title: 'Old', published: '2023-01-05T00:00:00Z' },
    { id: 2, title: 'New', published: '2024-02-01T00:00:00Z' },
    { id: 3, title: 'Also old', published: '2023-01-20T00:00:00Z' },
  ];
  assert.deepEqual(archive(articles), [['2024/02', [2]], ['2023/01', [1, 3]]]);
});

test('a bad date is refused', () => {
  assert.throws(() => articlePath({ id: 9, title: 'x', published: 'soon' }), RangeError);
});
