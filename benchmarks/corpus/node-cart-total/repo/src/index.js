'use strict';

// Cart arithmetic for the checkout page. Prices are decimal numbers of euros (e.g. 19.99).

function lineTotal(line) {
  if (!Number.isInteger(line.quantity) || line.quantity < 0) {
    throw new RangeError(`bad quantity for ${line.sku}: ${line.quantity}`);
  }
  return line.price * line.quantity;
}

// The sum of every line, as a number of euros exact to the cent.
function cartTotal(lines) {
  let total = 0;
  for (const line of lines) {
    total += lineTotal(line);
  }
  return total;
}

function formatEuros(amount) {
  const cents = Math.round(amount * 100);
  const sign = cents < 0 ? '-' : '';
  const abs = Math.abs(cents);
  return `${sign}€${Math.floor(abs / 100)}.${String(abs % 100).padStart(2, '0')}`;
}

// VAT included in a gross amount, rounded to the cent.
function vatIncluded(gross, ratePercent) {
  const cents = Math.round(gross * 100);
  return Math.round((cents * ratePercent) / (100 + ratePercent)) / 100;
}

function isFreeShipping(lines, threshold) {
  return cartTotal(lines) >= threshold;
}

module.exports = { lineTotal, cartTotal, formatEuros, vatIncluded, isFreeShipping };
