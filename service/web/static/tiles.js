// Tiles drawn by the app as SVG (no emoji font, no image files): 筒 as dots, 条 as sticks,
// 万 as the rank in Chinese numerals over 万. Every tile also shows its rank in a corner.
import { t } from './i18n.js';
import { h } from './dom.js';

export const SUITS = ['m', 'p', 's'];
export const TILES = SUITS.flatMap((s) => [1, 2, 3, 4, 5, 6, 7, 8, 9].map((r) => `${r}${s}`));
const NUMERALS = '一二三四五六七八九';

// dot centres (x, y) on a 30×40 face, per rank
const DOTS = {
  1: [[15, 21]], 2: [[15, 12], [15, 30]], 3: [[8, 10], [15, 21], [22, 32]],
  4: [[9, 12], [21, 12], [9, 30], [21, 30]], 5: [[9, 10], [21, 10], [15, 21], [9, 32], [21, 32]],
  6: [[9, 9], [21, 9], [9, 21], [21, 21], [9, 32], [21, 32]],
  7: [[7, 7], [15, 11], [23, 15], [9, 24], [21, 24], [9, 33], [21, 33]],
  8: [[9, 7], [21, 7], [9, 16], [21, 16], [9, 25], [21, 25], [9, 34], [21, 34]],
  9: [[7, 9], [15, 9], [23, 9], [7, 21], [15, 21], [23, 21], [7, 33], [15, 33], [23, 33]],
};
const DOT_R = { 1: 8, 2: 5.5, 3: 4.5, 4: 5, 5: 4.5, 6: 4, 7: 3.6, 8: 3.6, 9: 3.6 };
// bamboo stick centres
const STICKS = {
  2: [[15, 12], [15, 29]], 3: [[15, 12], [9, 29], [21, 29]], 4: [[9, 12], [21, 12], [9, 29], [21, 29]],
  5: [[8, 12], [22, 12], [15, 21], [8, 30], [22, 30]], 6: [[7, 12], [15, 12], [23, 12], [7, 29], [15, 29], [23, 29]],
  7: [[15, 8], [7, 21], [15, 21], [23, 21], [7, 33], [15, 33], [23, 33]],
  8: [[6, 12], [12, 12], [18, 12], [24, 12], [6, 29], [12, 29], [18, 29], [24, 29]],
  9: [[7, 8], [15, 8], [23, 8], [7, 21], [15, 21], [23, 21], [7, 33], [15, 33], [23, 33]],
};

// one SVG element as a vnode (dom.js creates it with document.createElementNS(NS, name))
function el(name, attrs, parent, text) {
  const v = h(name, attrs, text == null ? null : text);
  if (parent) parent.children.push(v);
  return v;
}

// "5筒" / "5 Dots"
export const tileName = (tile) => `${tile[0]}${t(`suits.${tile[1]}`)}`;

export function tileSvg(tile, cls = 'tile') {
  const rank = Number(tile[0]), suit = tile[1];
  const svg = el('svg', { viewBox: '0 0 30 40', class: cls, 'aria-hidden': 'true', focusable: 'false' });
  el('rect', { x: 0.75, y: 0.75, width: 28.5, height: 38.5, rx: 4, class: 'face' }, svg);
  if (suit === 'p') {
    DOTS[rank].forEach(([x, y], i) => {
      const c = rank === 1 ? 'dot-r' : (rank === 5 && i === 2) || (rank === 7 && i < 3) || (rank === 9 && i >= 3 && i < 6) ? 'dot-r' : (i % 2 ? 'dot-g' : 'dot-b');
      el('circle', { cx: x, cy: y, r: DOT_R[rank], class: c }, svg);
      el('circle', { cx: x, cy: y, r: DOT_R[rank] * 0.45, class: 'dot-in' }, svg);
    });
  } else if (suit === 's') {
    if (rank === 1) {
      el('rect', { x: 12, y: 6, width: 6, height: 28, rx: 3, class: 'stick-g' }, svg);
      el('circle', { cx: 15, cy: 9, r: 4, class: 'dot-r' }, svg);
    } else {
      STICKS[rank].forEach(([x, y], i) => {
        const red = (rank === 5 && i === 2) || (rank === 7 && i === 0) || (rank === 9 && i % 3 === 1);
        el('rect', { x: x - 1.8, y: y - 6, width: 3.6, height: 12, rx: 1.6, class: red ? 'stick-r' : 'stick-g' }, svg);
        el('line', { x1: x - 1.8, y1: y, x2: x + 1.8, y2: y, class: 'node' }, svg);
      });
    }
  } else {
    el('text', { x: 15, y: 17, class: 'num', 'text-anchor': 'middle' }, svg, NUMERALS[rank - 1]);
    el('text', { x: 15, y: 34, class: 'wan', 'text-anchor': 'middle' }, svg, '萬');
  }
  el('text', { x: 3, y: 8, class: 'idx' }, svg, String(rank));
  return svg;
}
