'use strict';

/**
 * Turn a title into a URL slug: lower case, accents removed, words joined by single
 * hyphens, no leading or trailing hyphen.
 */
function slugify(title) {
  return title
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]/g, '-')
    .replace(/^-+|-+$/g, '');
}

module.exports = { slugify };
