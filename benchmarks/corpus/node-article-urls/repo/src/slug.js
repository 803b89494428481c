'use strict';

// URL slugs: lower case, ASCII letters and digits, words joined by '-'.

function stripAccents(text) {
  return text.normalize('NFD').replace(/[\u0300-\u036f]/g, '');
}

function slugify(title) {
  const words = stripAccents(title)
    .toLowerCase()
    .replace(/[^a-z0-9 ]/g, '')
    .trim();
  return words.replace(' ', '-');
}

module.exports = { slugify };
