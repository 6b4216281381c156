// Pickers used by the dialogs: seats, tiles, and a whole hand (checked by the server).
import { h, uid } from '/web/dom.js';
import { t } from '/web/i18n.js';
import { TILES, SUITS, tileName, tileSvg } from '/web/tiles.js';
import { seatName, patternName } from '/web/words.js';
import { call } from '/web/api.js';

// seat buttons `${prefix}-${i}`; pressed(i) says which are on
export function seatButtons({ prefix, players, pressed, onPick, disabled = () => false, label }) {
  const id = uid('g');
  return h('div', { class: 'group', role: 'group', 'aria-labelledby': id },
    h('div', { class: 'group-label', id }, label),
    h('div', { class: 'seats' }, players.map((_, i) => h('button', {
      type: 'button', class: 'choice', testid: `${prefix}-${i}`, 'aria-pressed': String(!!pressed(i)),
      disabled: disabled(i), onclick: () => onPick(i),
    }, seatName(players, i)))));
}

// the 27 tiles as buttons `tile-1m`…`tile-9s`
// (suits: those of the room — a three-player room plays 筒 and 条 only)
export function tilePicker({ label, pressed = () => false, onPick, count = () => 0, suits = SUITS }) {
  const id = uid('g');
  return h('div', { class: 'group', role: 'group', 'aria-labelledby': id },
    h('div', { class: 'group-label', id }, label),
    suits.map((s) => h('div', { class: 'tiles' }, TILES.filter((x) => x[1] === s).map((tile) => {
      const n = count(tile);
      return h('button', {
        type: 'button', class: 'tile-btn', testid: `tile-${tile}`, 'aria-label': tileName(tile),
        'aria-pressed': String(!!pressed(tile)), onclick: () => onPick(tile),
      }, tileSvg(tile), n ? h('span', { class: 'badge', 'aria-hidden': 'true' }, String(n)) : null);
    }))));
}

export function tileRow(tiles, cls = 'tile sm') {
  return h('span', { class: 'tile-row' }, tiles.map((x) => tileSvg(x, cls)));
}

const order = (a, b) => (a[1] === b[1] ? a[0] - b[0] : 'mps'.indexOf(a[1]) - 'mps'.indexOf(b[1]));
const MELD_KINDS = ['peng', 'direct', 'added', 'concealed'];

// A hand entered with the tile picker. entry = {tiles: [..], melds: [{type, kind?, tile}],
// result, error}; size: 14 (a win, checked by /v1/hands/score) or 13 (a draw, /v1/hands/ting).
// check(entry) → Promise: called when the hand reaches its size; update() re-renders.
export function handEditor({ entry, size, check, update, fixed, suits = SUITS }) {
  const held = entry.tiles.length + 3 * entry.melds.length;
  const counts = {};
  for (const x of entry.tiles) counts[x] = (counts[x] || 0) + 1;
  const changed = () => {
    entry.result = null; entry.error = null;
    if (entry.tiles.length + 3 * entry.melds.length === size) {
      entry.checking = true;
      check(entry).finally(() => { entry.checking = false; update(); });
    }
    update();
  };
  // a hand that comes whole (血流: a winner's kept hand and the new tile) is checked at once
  if (held === size && !entry.checking && entry.result == null && !entry.error && !entry.checked) {
    entry.checked = true;
    entry.checking = true;
    Promise.resolve().then(() => check(entry)).finally(() => { entry.checking = false; update(); });
  }
  const meldSel = h('select', { 'aria-label': t('add_meld') },
    MELD_KINDS.map((k) => h('option', { value: k }, t(`meld_${k}`))));
  const meldTile = h('select', { 'aria-label': t('tile') },
    TILES.filter((x) => suits.includes(x[1])).map((x) => h('option', { value: x }, tileName(x))));
  return h('div', { class: 'hand' },
    h('div', { class: 'group-label' }, t('hand_tiles', { n: held, size })),
    h('div', { class: 'hand-tiles', testid: 'hand-tiles' }, tileRow([...entry.tiles].sort(order))),
    h('div', { class: 'row' },
      h('button', { type: 'button', testid: 'remove-last', disabled: entry.tiles.length <= (fixed ? 1 : 0),
        onclick: () => { entry.tiles.pop(); changed(); } }, t('remove_last')),
      h('button', { type: 'button', testid: 'clear-hand',
        onclick: () => { entry.tiles = fixed ? [fixed] : []; changed(); } }, t('clear'))),
    tilePicker({
      label: t('tile'), count: (x) => counts[x] || 0, suits,
      onPick: (x) => { if (held < size && (counts[x] || 0) < 4) { entry.tiles.push(x); changed(); } },
    }),
    h('div', { class: 'group-label' }, t('melds')),
    h('ul', { class: 'melds' }, entry.melds.map((m, i) => h('li', {},
      `${t(`meld_${m.type === 'peng' ? 'peng' : m.kind}`)} `, tileRow([m.tile]),
      h('button', { type: 'button', class: 'small', onclick: () => { entry.melds.splice(i, 1); changed(); } }, t('remove'))))),
    h('div', { class: 'row' }, meldSel, meldTile, h('button', {
      type: 'button', onclick: () => {
        const k = meldSel.value;
        entry.melds.push(k === 'peng' ? { type: 'peng', tile: meldTile.value } : { type: 'kong', kind: k, tile: meldTile.value });
        changed();
      },
    }, t('add_meld'))),
    h('div', { class: 'result', role: 'status', testid: 'hand-result' },
      entry.checking ? t('scoring') : entry.error ? h('span', { class: 'bad' }, entry.error)
        : entry.result ? entry.result : ''));
}

export function handJson(entry, voidSuit) {
  const hand = { tiles: [...entry.tiles].sort(order).join(''), melds: entry.melds };
  if (voidSuit) hand.void = voidSuit;
  return hand;
}

// "清一色 Full flush 3番 + 根 1番 = 4番, 48 points"
export function breakdown(score) {
  return h('div', { class: 'breakdown' },
    h('ul', {}, score.patterns.map((p) => h('li', {}, `${patternName(p.id)}${p.count > 1 ? ` ×${p.count}` : ''}`,
      h('b', {}, ` ${t('fan_n', { fan: p.fan })}`)))),
    h('p', { testid: 'score-total' }, `${t('fan_total', { fan: score.fan })}${score.capped ? ` (${t('capped')})` : ''} · ${t('points_n', { points: score.points })}`));
}

export async function scoreHand(entry, { tile, win, ruleset, voidSuit }) {
  const body = { hand: handJson(entry, voidSuit), win: { tile, ...win }, ruleset };
  const res = await call('POST', '/v1/hands/score', { body });
  return res.data;
}

export async function tingHand(entry, { ruleset, voidSuit }) {
  const res = await call('POST', '/v1/hands/ting', { body: { hand: handJson(entry, voidSuit), ruleset } });
  return res.data;
}

export { seatName };
