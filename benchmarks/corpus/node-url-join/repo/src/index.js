'use strict';

// Build URLs for the API from a base URL, path segments and a query object.

// The base followed by each part, separated by exactly one '/'.
function joinUrl(base, ...parts) {
  let url = base;
  for (const part of parts) {
    url = `${url}/${part}`;
  }
  return url;
}

function encodeSegment(value) {
  return encodeURIComponent(String(value));
}

// A query string for the defined values of `params`, keys sorted for stable URLs.
function queryString(params) {
  const pairs = Object.keys(params)
    .filter((key) => params[key] !== undefined && params[key] !== null)
    .sort()
    .flatMap((key) => {
      const values = Array.isArray(params[key]) ? params[key] : [params[key]];
      return values.map((v) => `${encodeURIComponent(key)}=${encodeURIComponent(String(v))}`);
    });
  return pairs.length ? `?${pairs.join('&')}` : '';
}

function resourceUrl(base, resource, id, params = {}) {
  const parts = id === undefined ? [resource] : [resource, encodeSegment(id)];
  return joinUrl(base, ...parts) + queryString(params);
}

module.exports = { joinUrl, queryString, resourceUrl };
