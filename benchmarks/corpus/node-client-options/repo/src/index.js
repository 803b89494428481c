'use strict';

// Options for the API client: defaults, per-client overrides and per-request headers.

const DEFAULTS = {
  baseUrl: 'http://localhost:8080',
  timeoutMs: 5000,
  retries: 2,
  userAgent: 'api-client/1.0',
};

function validate(options) {
  if (!Number.isInteger(options.retries) || options.retries < 0) {
    throw new RangeError('retries must be a non-negative integer');
  }
  if (!(options.timeoutMs > 0)) {
    throw new RangeError('timeoutMs must be positive');
  }
  return options;
}

function createClient(options = {}) {
  const settings = validate(Object.assign(DEFAULTS, options));
  return {
    settings,
    url(path) {
      return settings.baseUrl.replace(/\/$/, '') + '/' + path.replace(/^\//, '');
    },
    headers(extra = {}) {
      return { 'user-agent': settings.userAgent, accept: 'application/json', ...extra };
    },
  };
}

function defaults() {
  return { ...DEFAULTS };
}

module.exports = { createClient, defaults };
