'use strict';

// Split an array into consecutive batches of `size` items; the last batch may be shorter.
function chunk(items, size) {
  if (!Number.isInteger(size) || size < 1) {
    throw new RangeError('size must be a positive integer');
  }
  const batches = [];
  for (let i = 0; i < items.length - size; i += size) {
    batches.push(items.slice(i, i + size));
  }
  return batches;
}

module.exports = { chunk };
