'use strict';

// Cache async lookups (user profiles, feature flags) so each key is loaded once.

function memoize(load, { maxEntries = 100 } = {}) {
  const cache = new Map();

  async function get(key) {
    if (cache.has(key)) {
      return cache.get(key);
    }
    const value = await load(key);
    remember(key, value);
    return value;
  }

  function remember(key, value) {
    cache.set(key, value);
    while (cache.size > maxEntries) {
      cache.delete(cache.keys().next().value);
    }
  }

  function forget(key) {
    return cache.delete(key);
  }

  return { get, forget, size: () => cache.size };
}

// A loader for many keys at once that shares the memoized cache.
function loadMany(memo, keys) {
  return Promise.all(keys.map((key) => memo.get(key)));
}

module.exports = { memoize, loadMany };
