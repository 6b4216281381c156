// The correction sheet's logic (mend.js) and the round's standing events under corrections (round.js):
// node --test service/web/tests/
import './setup.mjs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mendForm, rebase, changed, moveEntry, removeEntry, putEntry, settleBody, afterKey, afterOf, payments, putBody,
  roundCtx, mendCtx, eventOf } from '../static/mend.js';
import { standingEvents, replacedSeqs, settleRequest, roundSoFar } from '../static/round.js';
import { edit } from '../static/store.js';

const tr = (from, to, points, reason, event) => ({ from, to, points, reason, event });
const KONG = { type: 'kong', seat: 2, kind: 'concealed', tile: '7s' };
const ZIMO = { type: 'hu', from: null, tile: '5p', winners: [{ seat: 0, fan: 2 }] };
// GET …/rounds/1 of a round with 东's 自摸 (seq 2)
const ROUND = {
  number: 1, dealer: 0, status: 'ended', voids: [null, null, null, null], deltas: [36, -12, -12, -12],
  events: [{ seq: 2, ...ZIMO, transfers: [tr(1, 0, 12, 'zimo', 2), tr(2, 0, 12, 'zimo', 2), tr(3, 0, 12, 'zimo', 2)] }],
  transfers: [], corrected_by: [],
};
const VIEW = { players: ['东', '南', '西', '北'], ruleset: { preset: 'xuezhan', mode: 'xuezhan', cap: null } };

test('the sheet starts from the round as the service explains it', () => {
  const f = mendForm(ROUND, 5);
  assert.deepEqual(f.entries, [{ id: 1, event: ZIMO, was: 0 }]);
  assert.deepEqual([f.number, f.version, f.dealer, f.status], [1, 5, 0, 'ended']);
  assert.deepEqual(f.before.deltas, [36, -12, -12, -12]);
  assert.equal(f.before.transfers[0].length, 3);
  assert.equal(changed(f), false);
  assert.deepEqual(eventOf({ seq: 9, index: 0, transfers: [], round: 1, at: 'x', voided: false, ...KONG }), KONG);
});

test('insert, re-enter, move and delete: each a change; the list back as it was is none', () => {
  const f0 = mendForm(ROUND, 5);
  const f1 = edit(f0, (x) => putEntry(x, 0, KONG)); // (the forgotten kong, before the win)
  assert.deepEqual(f1.entries.map((e) => [e.event.type, e.was]), [['kong', null], ['hu', 0]]);
  assert.ok(changed(f1));
  assert.equal(f0.entries.length, 1); // (a draft: the form kept in the store is untouched)
  const f2 = edit(f1, (x) => moveEntry(x, 0, 1));
  assert.deepEqual(f2.entries.map((e) => e.event.type), ['hu', 'kong']);
  assert.deepEqual(edit(f2, (x) => moveEntry(x, 1, 1)).entries, f2.entries); // (nowhere to go)
  const f3 = edit(f2, (x) => removeEntry(x, 1));
  assert.equal(changed(f3), false);
  const f4 = edit(f3, (x) => putEntry(x, 0, { ...ZIMO, winners: [{ seat: 0, fan: 3 }] }, true)); // entered again
  assert.deepEqual([f4.entries.length, f4.entries[0].was, f4.entries[0].id, f4.entries[0].event.winners[0].fan], [1, null, 1, 3]);
  assert.ok(changed(f4));
  const f5 = edit(f0, (x) => putEntry(x, null, KONG)); // (at the end)
  assert.deepEqual(f5.entries.map((e) => e.event.type), ['hu', 'kong']);
  assert.equal(new Set(f5.entries.map((e) => e.id)).size, 2);
});

test('what the new list would pay: the settle body, its answer per entry, before and after per seat', () => {
  const f = edit(mendForm({ ...ROUND, voids: ['m', null, null, null] }, 5), (x) => putEntry(x, 0, KONG));
  assert.deepEqual(settleBody(f, VIEW.ruleset), { ruleset: VIEW.ruleset, dealer: 0, events: [KONG, ZIMO], voids: ['m', null, null, null] });
  assert.equal(settleBody(mendForm(ROUND, 5), 'xuezhan').voids, undefined);
  assert.deepEqual(payments(f).map((p) => p.after), [null, null, null, null]); // (not asked yet)
  const res = { deltas: [24, -24, 24, -24], transfers: [tr(0, 2, 12, 'kong_concealed', 0), tr(1, 2, 12, 'kong_concealed', 0),
    tr(3, 2, 12, 'kong_concealed', 0), tr(1, 0, 12, 'zimo', 1), tr(2, 0, 12, 'zimo', 1), tr(3, 0, 12, 'zimo', 1)] };
  const after = afterOf(res, f);
  assert.equal(after.for, afterKey(f));
  assert.deepEqual(after.transfers.map((x) => x.length), [3, 3]);
  const g = { ...f, after };
  assert.deepEqual(payments(g).map((p) => [p.before, p.after, p.change]), [[36, 24, -12], [-12, -24, -12], [-12, 24, 36], [-12, -24, -12]]);
  // an answer for another list is not shown as this one's
  assert.deepEqual(payments(edit(g, (x) => removeEntry(x, 0))).map((p) => p.after), [null, null, null, null]);
});

test('the PUT body: the entries, and the note when one is written', () => {
  const f = edit(mendForm(ROUND, 5), (x) => putEntry(x, 0, KONG));
  assert.deepEqual(putBody(f), { events: [KONG, ZIMO] });
  assert.deepEqual(putBody({ ...f, note: '  the kong came first ' }), { events: [KONG, ZIMO], note: 'the kong came first' });
});

test('the round read again after a 412: the new before and version, the entries kept', () => {
  const f = edit(mendForm(ROUND, 5), (x) => putEntry(x, 0, KONG));
  const moved = { ...ROUND, deltas: [30, -10, -10, -10] };
  const g = rebase(f, moved, 7);
  assert.deepEqual([g.version, g.before.deltas], [7, [30, -10, -10, -10]]);
  assert.deepEqual(g.entries.map((e) => [e.event.type, e.was]), [['kong', null], ['hu', 0]]);
});

test('a recording sheet opened from the correction sheet sees the round up to its place', () => {
  const peng = { type: 'peng', seat: 1, tile: '5m', from: 2 };
  const f = { ...mendForm({ ...ROUND, events: [] }, 5), entries: [peng, KONG, ZIMO].map((event, i) => ({ id: i + 1, event, was: i })) };
  const at1 = mendCtx(VIEW, 0, f, 1);
  assert.deepEqual([at1.round.events, at1.round.last, at1.round.claims, at1.round.dealer], [1, peng, true, 0]);
  assert.deepEqual(at1.pengs(1), ['5m']);
  assert.equal(at1.out(0), false);
  const end = mendCtx(VIEW, 0, f, null);
  assert.equal(end.out(0), true); // (血战: 东 has won and left)
  assert.deepEqual(end.melds(2), [{ type: 'kong', kind: 'concealed', tile: '7s' }]);
  // 血流: a winner plays on but may not claim; seats known from elsewhere count too
  const xl = roundCtx({ view: { ...VIEW, ruleset: { mode: 'xueliu' } }, mySeat: null, events: [ZIMO], left: (i) => i === 3 });
  assert.deepEqual([xl.out(0), xl.claims(0), xl.won(0), xl.out(3)], [false, false, true, true]);
});

// a log: round 1 (东's 自摸, #2), then round 2 under way while round 1 is corrected (#6, with the kong)
const LOG = [
  { seq: 1, type: 'round_start', round: 1, dealer: 0 },
  { seq: 2, type: 'hu', round: 1, ...ZIMO },
  { seq: 3, type: 'round_end', round: 1 },
  { seq: 4, type: 'round_start', round: 2 },
  { seq: 5, type: 'kong', round: 2, seat: 1, kind: 'concealed', tile: '1m' },
  { seq: 6, type: 'correction', round: 1, events: [KONG, ZIMO], note: 'x', voids: ['m', null, null, null] },
  { seq: 7, type: 'penalty', round: 2, seat: 3, kind: 'zhahu' },
];

test('the standing events of a round: its latest correction, then what came after it', () => {
  assert.deepEqual(standingEvents(LOG, 1).map((x) => [x.key, x.event.type]), [['6.0', 'kong'], ['6.1', 'hu']]);
  assert.deepEqual(standingEvents(LOG, 2).map((x) => [x.key, x.event.type]), [[5, 'kong'], [7, 'penalty']]);
  // as they stood before the correction, and once it is voided
  assert.deepEqual(standingEvents(LOG, 1, 5).map((x) => x.key), [2]);
  const voided = [...LOG.slice(0, 5), { ...LOG[5], voided: true }, LOG[6], { seq: 8, type: 'void', round: 2, target: 6 }];
  assert.deepEqual(standingEvents(voided, 1).map((x) => x.key), [2]);
  assert.deepEqual([...replacedSeqs(LOG, 1)], [2]);
  assert.deepEqual([...replacedSeqs(voided, 1)], []);
  // a later correction of the round being played keeps what is recorded after it
  const more = [...LOG, { seq: 8, type: 'correction', round: 2, events: [KONG] }, { seq: 9, type: 'peng', round: 2, seat: 0, tile: '1p', from: 1 }];
  assert.deepEqual(standingEvents(more, 2).map((x) => x.key), ['8.0', 9]);
  assert.deepEqual(roundSoFar(more, [], 2, 4).events.map((e) => e.type), ['kong', 'peng']);
});

test('the settle request of a corrected round: its events, keyed as GET …/rounds/{n} numbers them; its voids', () => {
  const { body, seqs } = settleRequest(LOG, 1, 'xuezhan');
  assert.deepEqual(seqs, ['6.0', '6.1']);
  assert.deepEqual(body, { ruleset: 'xuezhan', dealer: 0, events: [KONG, ZIMO], voids: ['m', null, null, null] });
  // a round whose start names no dealer: the one given (the view's)
  assert.equal(settleRequest(LOG, 2, 'xuezhan', null, 3).body.dealer, 3);
});
