'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { canEdit } = require('../src/index');

const open = { ownerId: 'owner', locked: false };
const locked = { ownerId: 'owner', locked: true };

test('an editor may edit documents of others', () => {
  assert.equal(canEdit({ id: 'ed', roles: ['editor'] }, open), true);
});

test('an admin may edit anything, locked or not', () => {
  assert.equal(canEdit({ id: 'ad', roles: ['admin'] }, open), true);
  assert.equal(canEdit({ id: 'ad', roles: ['admin'] }, locked), true);
});

test('owner who is also an editor', () => {
  assert.equal(canEdit({ id: 'owner', roles: ['editor'] }, open), true);
});

test('locked documents stop owners and editors', () => {
  assert.equal(canEdit({ id: 'owner', roles: [] }, locked), false);
  assert.equal(canEdit({ id: 'ed', roles: ['editor'] }, locked), false);
});

test('viewers and users without roles cannot edit others', () => {
  assert.equal(canEdit({ id: 'v', roles: ['viewer'] }, open), false);
  assert.equal(canEdit({ id: 'n' }, open), false);
});
