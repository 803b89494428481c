'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { slugify } = require('../src/slug');
const { articlePath } = require('../src/index');

test('every space between words becomes a dash', () => {
  assert.equal(slugify('one two three four five'), 'one-two-three-four-five');
  assert.equal(slugify('A B C'), 'a-b-c');
});

test('accents and punctuation with many words', () => {
  assert.equal(slugify('Café Crème: Notes from a Barista!'), 'cafe-creme-notes-from-a-barista');
});

test('slugs never contain spaces', () => {
  const path = articlePath({ id: 5, title: 'Why We Moved to Node 18', published: '2024-07-01T00:00:00Z' });
  assert.equal(path, '/2024/07/why-we-moved-to-node-18');
  assert.ok(!path.includes(' '));
});

test('one and two words', () => {
  assert.equal(slugify('Hello'), 'hello');
  assert.equal(slugify('Hello World'), 'hello-world');
});
