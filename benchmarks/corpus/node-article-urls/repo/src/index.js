'use strict';

// Canonical URLs and archive paths for blog articles.

const { slugify } = require('./slug');

function pad(number) {
  return String(number).padStart(2, '0');
}

function articlePath(article) {
  const date = new Date(article.published);
  if (Number.isNaN(date.getTime())) {
    throw new RangeError(`article ${article.id} has no valid publication date`);
  }
  const slug = article.slug || slugify(article.title);
  return `/${date.getUTCFullYear()}/${pad(date.getUTCMonth() + 1)}/${slug}`;
}

function canonicalUrl(site, article) {
  return site.replace(/\/+$/, '') + articlePath(article);
}

// Articles grouped by 'YYYY/MM', newest month first.
function archive(articles) {
  const groups = new Map();
  for (const article of articles) {
    const key = articlePath(article).split('/').slice(1, 3).join('/');
    if (!groups.has(key)) {
      groups.set(key, []);
    }
    groups.get(key).push(article.id);
  }
  return [...groups.entries()].sort((a, b) => (a[0] < b[0] ? 1 : -1));
}

module.exports = { articlePath, canonicalUrl, archive };
