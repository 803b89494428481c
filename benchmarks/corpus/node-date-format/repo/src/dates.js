'use strict';

// UTC calendar helpers used by the reports: formatting, parsing and day arithmetic.

const DAY_MS = 24 * 60 * 60 * 1000;

function pad(number, width = 2) {
  return String(number).padStart(width, '0');
}

// 'YYYY-MM-DD' for the UTC calendar day of `date`.
function formatDate(date) {
  return `${pad(date.getUTCFullYear(), 4)}-${pad(date.getUTCMonth())}-${pad(date.getUTCDate())}`;
}

// 'YYYY-MM-DD HH:MM' in UTC.
function formatDateTime(date) {
  return `${formatDate(date)} ${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}`;
}

// The Date at UTC midnight of an ISO calendar day 'YYYY-MM-DD'.
function parseDate(text) {
  const match = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!match) {
    throw new SyntaxError(`expected YYYY-MM-DD, got ${JSON.stringify(text)}`);
  }
  const [, year, month, day] = match.map(Number);
  const date = new Date(Date.UTC(year, month - 1, day));
  if (date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) {
    throw new RangeError(`${text} is not a day of the calendar`);
  }
  return date;
}

function addDays(date, days) {
  return new Date(date.getTime() + days * DAY_MS);
}

function daysBetween(from, to) {
  return Math.round((to.getTime() - from.getTime()) / DAY_MS);
}

module.exports = { formatDate, formatDateTime, parseDate, addDays, daysBetween };
