// Pickers used by the dialogs: seats, tiles, and a whole hand (checked by the server).
import { h } from './dom.js';
import { t } from './i18n.js';
import { TILES, SUITS, tileName, tileSvg } from './tiles.js';
import { seatName, patternName } from './words.js';
import { call } from './api.js';

// seat buttons `${prefix}-${i}`; pressed(i) says which are on
export function seatButtons({ prefix, players, pressed, onPick, disabled = () => false, label }) {
  const id = `g-${prefix}`;
  return h('div', { class: 'group', role: 'group', 'aria-labelledby': id },
    h('div', { class: 'group-label', id }, label),
    h('div', { class: 'seats' }, players.map((_, i) => h('button', {
      type: 'button', class: 'choice', testid: `${prefix}-${i}`, 'aria-pressed': String(!!pressed(i)),
      disabled: disabled(i), onclick: () => onPick(i),
    }, seatName(players, i)))));
}

// the 27 tiles as buttons `tile-1m`…`tile-9s`
// (suits: those of the room — a three-player room plays 筒 and 条 only)
export function tilePicker({ label, pressed = () => false, onPick, count = () => 0, suits = SUITS, prefix = 'tile' }) {
  const id = `g-${prefix}-picker`;
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

// A hand entered with the tile picker. hand = {tiles: [..], melds: [{type, kind?, tile}],
// score | ting (the server's answer), error, checking}: a value of the dialog's form, drawn here
// and changed only through change(fn) (fn edits a copy of the hand; the dialog then asks the
// server once the hand reaches its size). size: 14 (a win) or 13 (a draw).
export function handEditor({ hand, size, change, fixed, suits = SUITS, result }) {
  const held = hand.tiles.length + 3 * hand.melds.length;
  const counts = {};
  for (const x of hand.tiles) counts[x] = (counts[x] || 0) + 1;
  const meldKind = hand.meldKind || 'peng';
  const meldTile = hand.meldTile || TILES.find((x) => suits.includes(x[1]));
  return h('div', { class: 'hand' },
    h('div', { class: 'group-label' }, t('hand_tiles', { n: held, size })),
    h('div', { class: 'hand-tiles', testid: 'hand-tiles' }, tileRow([...hand.tiles].sort(order))),
    h('div', { class: 'row' },
      h('button', { type: 'button', testid: 'remove-last', disabled: hand.tiles.length <= (fixed ? 1 : 0),
        onclick: () => change((x) => { x.tiles.pop(); }) }, t('remove_last')),
      h('button', { type: 'button', testid: 'clear-hand',
        onclick: () => change((x) => { x.tiles = fixed ? [fixed] : []; }) }, t('clear'))),
    tilePicker({
      label: t('tile'), count: (x) => counts[x] || 0, suits, prefix: 'tile',
      onPick: (x) => { if (held < size && (counts[x] || 0) < 4) change((y) => { y.tiles.push(x); }); },
    }),
    h('div', { class: 'group-label' }, t('melds')),
    h('ul', { class: 'melds' }, hand.melds.map((m, i) => h('li', {},
      `${t(`meld_${m.type === 'peng' ? 'peng' : m.kind}`)} `, tileRow([m.tile]),
      h('button', { type: 'button', class: 'small', onclick: () => change((x) => { x.melds.splice(i, 1); }) }, t('remove'))))),
    h('div', { class: 'row' },
      h('select', { 'aria-label': t('add_meld'), testid: 'meld-kind', onchange: (e) => change((x) => { x.meldKind = e.target.value; }, false) },
        MELD_KINDS.map((k) => h('option', { value: k, selected: k === meldKind }, t(`meld_${k}`)))),
      h('select', { 'aria-label': t('tile'), testid: 'meld-tile', onchange: (e) => change((x) => { x.meldTile = e.target.value; }, false) },
        TILES.filter((x) => suits.includes(x[1])).map((x) => h('option', { value: x, selected: x === meldTile }, tileName(x)))),
      h('button', { type: 'button', testid: 'add-meld', onclick: () => change((x) => {
        x.melds.push(meldKind === 'peng' ? { type: 'peng', tile: meldTile } : { type: 'kong', kind: meldKind, tile: meldTile });
      }) }, t('add_meld'))),
    h('div', { class: 'result', role: 'status', testid: 'hand-result' },
      hand.checking ? t('scoring') : hand.error ? h('span', { class: 'bad' }, hand.error) : result || ''));
}

// the size a hand holds (concealed tiles, 3 per meld)
export const handSize = (hand) => hand.tiles.length + 3 * hand.melds.length;

export function handJson(entry, voidSuit) {
  const hand = { tiles: [...entry.tiles].sort(order).join(''), melds: entry.melds.map((m) => ({ ...m })) };
  if (voidSuit) hand.void = voidSuit;
  return hand;
}

// "清一色 Full flush 3番 + 根 1番 = 4番, 48 points"
export function breakdown(score) {
  return h('div', { class: 'breakdown' },
    h('ul', {}, score.patterns.map((p) => h('li', {}, `${patternName(p.id)}${p.count > 1 ? ` ×${p.count}` : ''}`,
      h('b', {}, ` ${t('fan_n', { fan: p.fan })}`)))),
    h('p', { testid: 'score-total' }, `${t('fan_total', { fan: score.fan })}${score.capped ? ` (${t('fan_capped', { raw: score.raw_fan ?? '', fan: score.fan })})` : ''} · ${t('points_n', { points: score.points })}`));
}

export async function scoreHand(entry, { tile, win, ruleset, voidSuit }) {
  const body = { hand: handJson(entry, voidSuit), win: { tile, ...win }, ruleset };
  if (!body.hand.melds.length) delete body.hand.melds;
  const res = await call('POST', '/v1/hands/score', { body });
  return res.data;
}

export async function tingHand(entry, { ruleset, voidSuit }) {
  const res = await call('POST', '/v1/hands/ting', { body: { hand: handJson(entry, voidSuit), ruleset } });
  return res.data;
}

// how far a hand that is not ting is from ting (向听: POST /v1/hands/shanten), or null
export async function shantenHand(entry, { ruleset, voidSuit }) {
  const res = await call('POST', '/v1/hands/shanten', { body: { hand: handJson(entry, voidSuit), ruleset } });
  return res.data.shanten;
}

export { seatName };
