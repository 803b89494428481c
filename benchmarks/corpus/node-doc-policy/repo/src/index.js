'use strict';

// Who may view, edit and delete a document.

const { hasRole } = require('./roles');

function isOwner(user, doc) {
  return doc.ownerId === user.id;
}

function canView(user, doc) {
  return doc.public || isOwner(user, doc) || hasRole(user, 'viewer');
}

// Owners may always edit their documents; editors may edit any document that is not locked.
function canEdit(user, doc) {
  if (doc.locked && !hasRole(user, 'admin')) {
    return false;
  }
  return isOwner(user, doc) && hasRole(user, 'editor');
}

function canDelete(user, doc) {
  return hasRole(user, 'admin') || (isOwner(user, doc) && !doc.locked);
}

module.exports = { canView, canEdit, canDelete };
