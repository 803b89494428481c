'use strict';

// Query strings for the search page: parse `?q=a+b&tag=x&tag=y` and build them back.

function decode(text) {
  return decodeURIComponent(text);
}

// An object of the parameters; a key given more than once maps to an array of its values.
function parseQuery(query) {
  const params = {};
  const text = query.startsWith('?') ? query.slice(1) : query;
  for (const piece of text.split('&')) {
    if (!piece) {
      continue;
    }
    const at = piece.indexOf('=');
    const key = decode(at === -1 ? piece : piece.slice(0, at));
    const value = at === -1 ? '' : decode(piece.slice(at + 1));
    if (key in params) {
      params[key] = [].concat(params[key], value);
    } else {
      params[key] = value;
    }
  }
  return params;
}

function buildQuery(params) {
  const pieces = [];
  for (const [key, raw] of Object.entries(params)) {
    for (const value of [].concat(raw)) {
      pieces.push(`${encodeURIComponent(key)}=${encodeURIComponent(value).replace(/%20/g, '+')}`);
    }
  }
  return pieces.length ? `?${pieces.join('&')}` : '';
}

function searchTerms(query) {
  const { q = '' } = parseQuery(query);
  return String(q).split(' ').filter(Boolean);
}

module.exports = { parseQuery, buildQuery, searchTerms };
