// What round.js derives from a round's records (node --test service/web/tests/).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseTiles, meldsBySeat, winsBySeat, keptHands, pointsFor, roomPatterns, roundLog, settleRequest,
  drawStatuses, roundAfterRecord, roundSoFar } from '../static/round.js';
import { servedPatterns } from './setup.mjs';

const PATTERNS = servedPatterns();
const XUEZHAN = { preset: 'xuezhan', mode: 'xuezhan', fan_table: 'qq', scoring: 'exponential', base: 6, cap: null, zimo: 'none',
  haidi: false, jingoudiao: false, menqing: false, zhongzhang: false, jiaxinwu: false, kaertiao: false, yitiaolong: false };

test('tiles of a hand string or list', () => {
  assert.deepEqual(parseTiles('123m55p'), ['1m', '2m', '3m', '5p', '5p']);
  assert.deepEqual(parseTiles(['1m', '9s']), ['1m', '9s']);
  assert.deepEqual(parseTiles(''), []);
});

test('melds: pengs and kongs, an added kong replaces its peng', () => {
  const recs = [{ type: 'peng', seat: 1, tile: '5m', from: 0 }, { type: 'kong', seat: 1, kind: 'added', tile: '5m' },
    { type: 'kong', seat: 2, kind: 'concealed', tile: '7s' }, { type: 'peng', seat: 2, tile: '1p', from: 3 }];
  assert.deepEqual(meldsBySeat(recs, 4), [[], [{ type: 'kong', kind: 'added', tile: '5m' }],
    [{ type: 'kong', kind: 'concealed', tile: '7s' }, { type: 'peng', tile: '1p' }], []]);
});

test('wins per seat: 一炮多响 once per winner, 血流 any number', () => {
  const recs = [{ type: 'hu', from: 0, tile: '9p', winners: [{ seat: 1, fan: 1 }, { seat: 3, fan: 2 }] },
    { type: 'hu', from: null, tile: '3p', winners: [{ seat: 1, fan: 2 }] }];
  assert.deepEqual(winsBySeat(recs, 4), [0, 2, 0, 1]);
});

test('血流: the hand a winner keeps, then its concealed kong', () => {
  const recs = [{ type: 'hu', from: 0, tile: '9m', winners: [{ seat: 1, hand: { tiles: '123456789m99955p' } }] },
    { type: 'kong', seat: 1, kind: 'concealed', tile: '9p' }];
  const kept = keptHands(recs, 4)[1];
  assert.deepEqual(kept.tiles, ['1m', '2m', '3m', '4m', '5m', '6m', '7m', '8m', '5p', '5p']);
  assert.deepEqual(kept.melds, [{ type: 'kong', kind: 'concealed', tile: '9p' }]);
  assert.equal(keptHands(recs, 4)[0], null);
});

test('points of a fan: the cap, exponential or linear, 自摸加底', () => {
  assert.deepEqual(pointsFor(3, XUEZHAN), { fan: 3, points: 24, capped: false });
  assert.deepEqual(pointsFor(5, { ...XUEZHAN, cap: 4 }), { fan: 4, points: 48, capped: true });
  assert.deepEqual(pointsFor(3, { ...XUEZHAN, scoring: 'linear', base: 1 }), { fan: 3, points: 3, capped: false });
  assert.equal(pointsFor(2, { ...XUEZHAN, zimo: 'base' }, { selfDrawn: true }).points, 18);
  assert.equal(pointsFor(2, { ...XUEZHAN, zimo: 'base' }, { selfDrawn: false }).points, 12);
  assert.equal(pointsFor(0, XUEZHAN), null);
});

test('the pattern chips: the room’s own options only', () => {
  const ids = (rs) => roomPatterns(PATTERNS, rs).map((p) => p.id);
  const plain = ids(XUEZHAN);
  assert.ok(plain.includes('qingyise') && plain.includes('gen') && plain.includes('gangshanghua'));
  for (const off of ['menqing', 'zhongzhang', 'jingoudiao', 'haidi', 'jiaxinwu', 'kaertiao', 'yitiaolong', 'zimo']) assert.ok(!plain.includes(off), off);
  assert.ok(ids({ ...XUEZHAN, menqing: true, zimo: 'fan' }).includes('menqing'));
  assert.ok(ids({ ...XUEZHAN, menqing: true, zimo: 'fan' }).includes('zimo'));
  // chengdu: no 龙七对 (null), no 杠上炮 (0)
  const cd = ids({ ...XUEZHAN, fan_table: 'chengdu' });
  assert.ok(!cd.includes('longqidui') && !cd.includes('gangshangpao'));
});

const LOG = [
  { seq: 1, type: 'round_start', round: 1, dealer: 2, voids: [null, 'm', null, null] },
  { seq: 2, type: 'kong', round: 1, seat: 1, kind: 'concealed', tile: '1p' },
  { seq: 3, type: 'kong', round: 1, seat: 3, kind: 'concealed', tile: '2p', voided: true },
  { seq: 4, type: 'void', round: 1, target: 3 },
  { seq: 5, type: 'draw', round: 1, seats: [{ seat: 0, status: 'ting', dajiao_fan: 2 }, { seat: 1, hand: { tiles: '1112223334445s' } },
    { seat: 2, status: 'not_ting' }, { seat: 3, status: 'huazhu' }] },
  { seq: 6, type: 'round_start', round: 2, dealer: 0 },
];

test('a round’s log: its records and the voids that took them back', () => {
  assert.deepEqual(roundLog(LOG, 1).map((r) => r.seq), [1, 2, 3, 4, 5]);
  assert.deepEqual(roundLog(LOG, 2).map((r) => r.seq), [6]);
});

test('settle request: the standing events, the dealer and 定缺 of the round', () => {
  const { body, seqs } = settleRequest(LOG, 1, XUEZHAN);
  assert.deepEqual(seqs, [2, 5]);
  assert.equal(body.dealer, 2);
  assert.deepEqual(body.voids, [null, 'm', null, null]);
  assert.deepEqual(body.events[0], { type: 'kong', seat: 1, kind: 'concealed', tile: '1p' });
  // what stood when #3 was made: #2 and #3 (what the void took back is #3's transfers)
  assert.deepEqual(settleRequest(LOG, 1, XUEZHAN, 3).seqs, [2, 3]);
});

test('each seat’s standing at a draw', () => {
  assert.deepEqual(drawStatuses(LOG[4]).map((s) => [s.seat, s.status, s.dajiao_fan ?? null]),
    [[0, 'ting', 2], [1, 'hand', null], [2, 'not_ting', null], [3, 'huazhu', null]]);
  assert.deepEqual(drawStatuses({ type: 'escape', seat: 1 }), []);
});

test('a stream record moves the round with the balances', () => {
  const round = { number: 1, status: 'playing', deltas: [0, 0, 0, 0], won: [], left: [] };
  const after = roundAfterRecord(round, { type: 'kong', round: 1 }, [0, 0, 0, 0], [-12, 36, -12, -12]);
  assert.deepEqual(after.deltas, [-12, 36, -12, -12]);
  assert.deepEqual(round.deltas, [0, 0, 0, 0]); // (not changed in place)
  assert.equal(roundAfterRecord(after, { type: 'round_end', round: 1 }, [-12, 36, -12, -12], [-12, 36, -12, -12]).status, 'ended');
  const next = roundAfterRecord(after, { type: 'round_start', round: 2, dealer: 1 }, [-12, 36, -12, -12], [-12, 36, -12, -12]);
  assert.deepEqual([next.number, next.dealer, next.status, next.deltas], [2, 1, 'playing', [0, 0, 0, 0]]);
  assert.equal(roundAfterRecord(after, { type: 'buy_in' }, [0], [1]), after);
});

test('the round so far: the log’s standing events, then this phone’s unsent entries; who has won or left', () => {
  const records = [
    { seq: 1, round: 1, type: 'round_start', dealer: 0 },
    { seq: 2, round: 1, type: 'kong', seat: 1, kind: 'concealed', tile: '7s' },
    { seq: 3, round: 1, type: 'hu', from: null, tile: '3p', winners: [{ seat: 2, fan: 1 }] },
    { seq: 4, round: 1, type: 'hu', from: 0, tile: '4p', winners: [{ seat: 3, fan: 1 }], voided: true },
    { seq: 5, round: null, type: 'void', target: 4 },
  ];
  const so = roundSoFar(records, [], 1, 4);
  assert.deepEqual(so.events.map((e) => e.type), ['kong', 'hu']);
  assert.deepEqual([so.won, so.left, so.claims, so.last.seq], [[false, false, true, false], [false, false, false, false], true, 3]);
  const pending = [{ body: { type: 'escape', seat: 0 } }, { body: { type: 'round_end' } }, { body: { type: 'hu', winners: [{ seat: 1 }] } }];
  const more = roundSoFar(records, pending, 1, 4);
  assert.deepEqual([more.left, more.won, more.last], [[true, false, false, false], [false, false, true, false], pending[0].body]);
  assert.deepEqual(roundSoFar(records, [], 2, 4), { events: [], last: null, claims: false, won: [false, false, false, false], left: [false, false, false, false] });
});
