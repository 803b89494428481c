'use strict';

// Roles a user can hold, and what each role implies.

const ROLE_IMPLIES = {
  admin: ['editor', 'viewer'],
  editor: ['viewer'],
  viewer: [],
};

function expandRoles(roles) {
  const all = new Set();
  for (const role of roles) {
    if (!(role in ROLE_IMPLIES)) {
      throw new Error(`unknown role ${role}`);
    }
    all.add(role);
    for (const implied of ROLE_IMPLIES[role]) {
      all.add(implied);
    }
  }
  return all;
}

function hasRole(user, role) {
  return expandRoles(user.roles || []).has(role);
}

module.exports = { expandRoles, hasRole };
