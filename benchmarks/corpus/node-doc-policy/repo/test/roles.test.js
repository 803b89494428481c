'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { expandRoles } = require('../src/roles');
const { canView, canDelete } = require('../src/index');

test('admin implies editor and viewer', () => {
  assert.deepEqual([...expandRoles(['admin'])].sort(), ['admin', 'editor', 'viewer']);
  assert.throws(() => expandRoles(['root']), /unknown role/);
});

test('view and delete rules', () => {
  const doc = { ownerId: 'o', locked: true, public: false };
  assert.equal(canView({ id: 'x', roles: [] }, doc), false);
  assert.equal(canDelete({ id: 'o', roles: [] }, doc), false);
  assert.equal(canDelete({ id: 'x', roles: ['admin'] }, doc), true);
});
