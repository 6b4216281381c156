// words.js: a hand at a draw that is not ting says how far it is (向听), from POST /v1/hands/shanten's `shanten`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setLang } from '../static/i18n.js';
import { shantenWords } from '../static/words.js';

test('not ting: how far from ting, in Chinese numerals', () => {
  setLang('zh');
  assert.equal(shantenWords(1), '没听牌（一向听）');
  assert.equal(shantenWords(2), '没听牌（二向听）');
  assert.equal(shantenWords(6), '没听牌（六向听）');
  assert.equal(shantenWords(12), '没听牌（12向听）');
});

test('not ting: tiles from ready, in English (one tile, two tiles)', () => {
  setLang('en');
  assert.equal(shantenWords(1), 'Not ting (1 tile from ready)');
  assert.equal(shantenWords(3), 'Not ting (3 tiles from ready)');
});

test('unknown (no answer, or a hand whose melds break 缺一门: shanten null): only "not ting"', () => {
  setLang('zh');
  for (const n of [null, undefined, 0, -1, 1.5]) assert.equal(shantenWords(n), '没听牌');
  setLang('en');
  assert.equal(shantenWords(null), 'Not ting');
});
