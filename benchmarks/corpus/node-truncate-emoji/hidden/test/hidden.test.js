'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const { truncate, preview, charLength } = require('../src/index');

function wellFormed(text) {
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text);
}

test('every limit gives whole characters', () => {
  const text = '🎉 party 𝒳 time 🚀🚀!';
  for (let max = 0; max <= charLength(text) + 1; max++) {
    const cut = truncate(text, max);
    assert.ok(wellFormed(cut), `max ${max} gave a broken string`);
    assert.equal(charLength(cut), Math.min(max, charLength(text)));
    assert.ok(text.startsWith(cut));
  }
});

test('preview of emoji text stays well formed and within the limit', () => {
  const out = preview('🍕🍕🍕🍕🍕🍕', 4);
  assert.equal(out, '🍕🍕🍕…');
  assert.ok(charLength(out) <= 4);
});

test('only astral characters', () => {
  assert.equal(truncate('😀😁😂', 2), '😀😁');
  assert.equal(truncate('😀😁😂', 0), '');
});
