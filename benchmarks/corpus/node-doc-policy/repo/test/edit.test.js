'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { canEdit } = require('../src/index');

const doc = { id: 1, ownerId: 'u1', locked: false, public: false };

test('an owner without roles can edit their document', () => {
  assert.equal(canEdit({ id: 'u1', roles: [] }, doc), true);
});

test('a stranger cannot edit', () => {
  assert.equal(canEdit({ id: 'u9', roles: ['viewer'] }, doc), false);
});
