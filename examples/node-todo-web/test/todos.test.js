'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { TODOS, remaining, renderPage } = require('../src/todos');

test('remaining counts the open items', () => {
  assert.equal(remaining(TODOS), 2);
});

test('the page lists every item', () => {
  const html = renderPage(TODOS);
  for (const todo of TODOS) {
    assert.ok(html.includes(todo.title));
  }
});

test('the page escapes titles', () => {
  assert.ok(renderPage([{ title: '<b>', done: false }]).includes('&#60;b&#62;'));
});
