// The store and its transitions (pure), and the duplicate check between phones.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStore, edit } from '../static/store.js';
import { initialState, transitions, lastUndoable, sameEvent, recentDuplicate } from '../static/state.js';

const fresh = () => createStore(initialState('en'), transitions);
const VIEW = { players: ['东', '南', '西', '北'], version: 3, balances: [0, 0, 0, 0], round: { number: 1, status: 'playing' }, rounds: [] };

test('a transition makes a new state and tells the subscribers; the old one stays as it was', () => {
  const store = fresh();
  const seen = [];
  store.subscribe((s, prev, name) => seen.push([name, prev.toast, s.toast && s.toast.text]));
  const before = store.state;
  store.dispatch('toast/show', 'hello');
  assert.equal(before.toast, null);
  assert.equal(store.state.toast.text, 'hello');
  assert.deepEqual(seen, [['toast/show', null, 'hello']]);
});

test('a transition that changes nothing tells no one', () => {
  const store = fresh();
  let n = 0;
  store.subscribe(() => { n += 1; });
  store.dispatch('net/online', null);
  store.dispatch('toast/hide');
  assert.equal(n, 0);
});

test('a dispatch from a subscriber runs after the current one, in order', () => {
  const store = fresh();
  const order = [];
  store.subscribe((s, prev, name) => { order.push(name); if (name === 'net/online') store.dispatch('live/mode', 'stream'); });
  store.dispatch('net/online', true);
  assert.deepEqual(order, ['net/online', 'live/mode']);
  assert.equal(store.state.liveMode, 'stream');
});

test('an unknown transition is an error', () => {
  assert.throws(() => fresh().dispatch('nope'), /no transition nope/);
});

test('edit changes a copy', () => {
  const v = { a: [1], b: { c: 2 } };
  const w = edit(v, (d) => { d.a.push(2); d.b.c = 3; });
  assert.deepEqual(v, { a: [1], b: { c: 2 } });
  assert.deepEqual(w, { a: [1, 2], b: { c: 3 } });
});

test('a hide of an older toast leaves the newer one', () => {
  const store = fresh();
  store.dispatch('toast/show', 'first');
  const first = store.state.toast.id;
  store.dispatch('toast/show', 'second');
  store.dispatch('toast/hide', first);
  assert.equal(store.state.toast.text, 'second');
});

test('opening a table starts from nothing known: not online, no toast, its kept view and log', () => {
  const store = fresh();
  store.dispatch('toast/show', 'fill every name');
  store.dispatch('route/table', { id: 't1', token: 'k', view: VIEW, records: [{ seq: 1 }], mySeat: 2 });
  const s = store.state;
  assert.equal(s.route, 'table');
  assert.equal(s.online, null);
  assert.equal(s.toast, null);
  assert.deepEqual(s.table, { id: 't1', token: 'k', read: null });
  assert.equal(s.mySeat, 2);
  assert.equal(s.records.length, 1);
  store.dispatch('route/start');
  assert.equal(store.state.table, null);
});

test('dialog: open, edit its form (a copy), message, close', () => {
  const store = fresh();
  store.dispatch('dialog/open', { kind: 'kong', form: { seat: null }, id: 1 });
  const form = store.state.dialog.form;
  store.dispatch('dialog/edit', (f) => { f.seat = 2; });
  assert.equal(form.seat, null);
  assert.equal(store.state.dialog.form.seat, 2);
  store.dispatch('dialog/msg', 'Still to choose: Kind of kong');
  assert.equal(store.state.dialog.msg, 'Still to choose: Kind of kong');
  store.dispatch('dialog/edit', (f) => { f.kind = 'concealed'; });
  assert.equal(store.state.dialog.msg, ''); // (a change clears the message)
  store.dispatch('dialog/close');
  assert.equal(store.state.dialog, null);
});

test('a write that landed: its transfers, and the record counted as this phone’s', () => {
  const store = fresh();
  store.dispatch('write/landed', { seq: 4, transfers: [{ from: 0, to: 1, points: 6 }] });
  assert.deepEqual(store.state.transfers[4], [{ from: 0, to: 1, points: 6 }]);
  assert.equal(store.state.landed[4], true);
  assert.equal(store.state.online, true);
});

test('the last record an undo takes back', () => {
  assert.equal(lastUndoable([{ seq: 1, type: 'round_start' }, { seq: 2, type: 'kong', voided: true }, { seq: 3, type: 'void', target: 2 }]).seq, 1);
  assert.equal(lastUndoable([]), null);
});

test('the same event: type, seat(s), tile', () => {
  assert.ok(sameEvent({ type: 'kong', seat: 1, kind: 'concealed', tile: '5s' }, { type: 'kong', seat: 1, kind: 'concealed', tile: '5s' }));
  assert.ok(!sameEvent({ type: 'kong', seat: 1, kind: 'concealed', tile: '5s' }, { type: 'kong', seat: 2, kind: 'concealed', tile: '5s' }));
  assert.ok(!sameEvent({ type: 'peng', seat: 1, tile: '5s' }, { type: 'peng', seat: 1, tile: '6s' }));
  const hu = (seats, tile) => ({ type: 'hu', from: null, tile, winners: seats.map((seat) => ({ seat, fan: 2 })) });
  assert.ok(sameEvent(hu([1], '3p'), { ...hu([1], '3p'), winners: [{ seat: 1, fan: 3 }] }));
  assert.ok(!sameEvent(hu([1], '3p'), hu([2], '3p')));
});

test('a duplicate is another phone’s, in this round, seen in the last 30 s', () => {
  const store = fresh();
  store.dispatch('route/table', { id: 't', token: 'k', view: VIEW });
  const kong = { seq: 2, type: 'kong', round: 1, seat: 1, kind: 'concealed', tile: '5s', at: '2026-01-01T00:00:00Z' };
  store.dispatch('records/changed', { records: [{ seq: 1, type: 'round_start', round: 1 }, kong], now: 1000 });
  const body = { type: 'kong', seat: 1, kind: 'concealed', tile: '5s' };
  assert.equal(recentDuplicate(store.state, body, 20000).seq, 2);
  assert.equal(recentDuplicate(store.state, body, 40000), null);                          // too long ago
  assert.equal(recentDuplicate(store.state, { ...body, tile: '6s' }, 20000), null);        // another event
  store.dispatch('write/landed', { seq: 2 });
  assert.equal(recentDuplicate(store.state, body, 20000), null);                          // this phone's own
});

test('the same penalty from two phones is a duplicate: the same seat and kind', () => {
  const store = fresh();
  store.dispatch('route/table', { id: 't', token: 'k', view: VIEW });
  const zhahu = { seq: 2, type: 'penalty', round: 1, seat: 3, kind: 'zhahu' };
  store.dispatch('records/changed', { records: [{ seq: 1, type: 'round_start', round: 1 }, zhahu], now: 1000 });
  assert.equal(recentDuplicate(store.state, { type: 'penalty', seat: 3, kind: 'zhahu' }, 20000).seq, 2);
  assert.equal(recentDuplicate(store.state, { type: 'penalty', seat: 3, kind: 'xianggong' }, 20000), null);
  assert.equal(recentDuplicate(store.state, { type: 'penalty', seat: 2, kind: 'zhahu' }, 20000), null);
});

test('a record of the log read at start-up counts from its own time', () => {
  const store = fresh();
  store.dispatch('route/table', { id: 't', token: 'k', view: VIEW });
  const old = { seq: 2, type: 'kong', round: 1, seat: 1, kind: 'concealed', tile: '5s', at: new Date(0).toISOString() };
  store.dispatch('records/changed', { records: [old], now: Date.now(), initial: true });
  assert.equal(recentDuplicate(store.state, { type: 'kong', seat: 1, kind: 'concealed', tile: '5s' }, Date.now()), null);
});

test('a table finished: known from the server, or only from a refusal (its time not known yet)', () => {
  const st = fresh();
  st.dispatch('route/table', { id: 't', token: 'k', view: VIEW });
  st.dispatch('table/finished', null);
  assert.equal(!!st.state.finished, true);
  assert.equal(st.state.view.finished_at, undefined);
  st.dispatch('table/finished', '2026-03-01T23:41:07Z');
  assert.equal(st.state.finished, '2026-03-01T23:41:07Z');
  assert.equal(st.state.view.finished_at, '2026-03-01T23:41:07Z');
});
