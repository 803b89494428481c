'use strict';

// Previews of user posts for notifications: lengths count characters as people see them
// (code points), never UTF-16 halves.

const ELLIPSIS = '…';

function charLength(text) {
  let count = 0;
  for (const _ of text) {
    count++;
  }
  return count;
}

// The first `max` characters of `text`.
function truncate(text, max) {
  if (!Number.isInteger(max) || max < 0) {
    throw new RangeError('max must be a non-negative integer');
  }
  return text.slice(0, max);
}

// `text` if it has at most `max` characters, else a shorter prefix and an ellipsis.
function preview(text, max) {
  const clean = text.replace(/\s+/g, ' ').trim();
  if (charLength(clean) <= max) {
    return clean;
  }
  return truncate(clean, max - 1).trimEnd() + ELLIPSIS;
}

function initials(name) {
  return name
    .split(/\s+/)
    .filter(Boolean)
    .map((word) => String.fromCodePoint(word.codePointAt(0)).toUpperCase())
    .join('');
}

module.exports = { charLength, truncate, preview, initials };
