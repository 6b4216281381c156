// live.js: records from the stream, in order and once, the round moving with the balances.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TableLive } from '../static/live.js';
import { fetchReplies } from './setup.mjs';

function live(view, records = []) {
  const got = { views: [], records: [] };
  const l = new TableLive({ id: 't', token: 'k', view, records, onView: (v) => got.views.push(v), onRecords: (r) => got.records.push(...r), onStatus() {} });
  l.scheduleRefresh = () => {}; // (no request here)
  l.catchUp = () => { got.gap = true; };
  return { l, got };
}
const VIEW = { players: ['a', 'b', 'c', 'd'], version: 1, balances: [0, 0, 0, 0], rounds: [],
  round: { number: 1, status: 'playing', dealer: 0, won: [], left: [], deltas: [0, 0, 0, 0] } };

test('a kong on the stream: the balances and the round at once, the view a new object', () => {
  const { l, got } = live(VIEW, [{ seq: 1, type: 'round_start', round: 1 }]);
  l.takeRecords([{ seq: 2, type: 'kong', round: 1, seat: 2, kind: 'concealed', tile: '7s', version: 2, balances: [-12, -12, 36, -12] }]);
  const v = got.views.at(-1);
  assert.deepEqual(v.balances, [-12, -12, 36, -12]);
  assert.deepEqual(v.round.deltas, [-12, -12, 36, -12]);
  assert.deepEqual(VIEW.round.deltas, [0, 0, 0, 0]);
  assert.equal(got.records.length, 1);
});

test('a record twice is taken once; a gap reads the log', () => {
  const { l, got } = live(VIEW, [{ seq: 1, type: 'round_start', round: 1 }]);
  l.takeRecords([{ seq: 1, type: 'round_start', version: 1, balances: [0, 0, 0, 0] }]);
  assert.equal(got.records.length, 0);
  l.takeRecords([{ seq: 3, type: 'kong', version: 3, balances: [0, 0, 0, 0] }]);
  assert.equal(got.gap, true);
});

test('a void replaces its target with a voided copy (a snapshot handed out stays as it was)', () => {
  const { l } = live(VIEW, [{ seq: 1, type: 'round_start', round: 1 }, { seq: 2, type: 'kong', round: 1 }]);
  const snapshot = l.records.slice();
  l.takeRecords([{ seq: 3, type: 'void', target: 2, version: 3, balances: [0, 0, 0, 0] }]);
  assert.equal(snapshot[1].voided, undefined);
  assert.equal(l.records[1].voided, true);
});

test('round_end on the stream: the round ended and listed with the rounds', () => {
  const { l, got } = live({ ...VIEW, balances: [-12, -12, 36, -12], round: { ...VIEW.round, deltas: [-12, -12, 36, -12] } },
    [{ seq: 1, type: 'round_start', round: 1 }]);
  l.takeRecords([{ seq: 2, type: 'round_end', round: 1, version: 2, balances: [-12, -12, 36, -12] }]);
  const v = got.views.at(-1);
  assert.equal(v.round.status, 'ended');
  assert.deepEqual(v.rounds.map((r) => [r.number, r.deltas, r.local]), [[1, [-12, -12, 36, -12], true]]);
});

// a finished table keeps its version (its ETag): only a GET without If-None-Match tells
test('between rounds the view is read without If-None-Match until it says finished_at; not while a round is played', async () => {
  const ended = { ...VIEW, version: 4, round: { ...VIEW.round, status: 'ended' }, rounds: [{ number: 1, status: 'ended', deltas: [0, 0, 0, 0] }] };
  const views = [];
  const l = new TableLive({ id: 't', token: 'k', view: ended, onView: (v) => views.push(v), onRecords() {}, onStatus() {} });
  l.fullVersion = 4;
  const calls = fetchReplies([{ status: 304 }, { status: 200, body: { ...ended, rounds: [], rounds_next: null, finished_at: null } },
    { status: 200, body: { ...ended, rounds: [], rounds_next: null, finished_at: '2026-03-01T23:41:07Z' } }]);
  await l.refresh();
  assert.equal(calls[0].headers['If-None-Match'], '"4"'); // (the usual read: 304, nothing new)
  await l.checkFinished();
  assert.equal(calls[1].headers['If-None-Match'], undefined);
  assert.equal(views.length, 0); // (not finished: nothing new, nothing drawn again)
  await l.checkFinished();
  assert.equal(calls.length, 3);
  assert.equal(calls[2].headers['If-None-Match'], undefined);
  assert.equal(views.at(-1).finished_at, '2026-03-01T23:41:07Z');
  assert.deepEqual(views.at(-1).rounds.map((r) => r.number), [1]);
  l.view = { ...ended, round: { ...ended.round, status: 'playing' } };
  assert.equal(l.checkFinished(), null); // a round being played: it cannot be finished
  assert.equal(calls.length, 3);
});

test('a finished table is read until it names its next table (another phone started it); then no more', async () => {
  const done = { ...VIEW, version: 4, round: { ...VIEW.round, status: 'ended' }, rounds: [{ number: 1, status: 'ended', deltas: [0, 0, 0, 0] }],
    finished_at: '2026-03-01T23:41:07Z' };
  const views = [];
  const l = new TableLive({ id: 't', token: 'k', view: done, onView: (v) => views.push(v), onRecords() {}, onStatus() {} });
  l.fullVersion = 4;
  const calls = fetchReplies([{ status: 200, body: { ...done, rounds: [], rounds_next: null } },
    { status: 200, body: { ...done, rounds: [], rounds_next: null, next: 'n1' } }]);
  await l.checkFinished();
  assert.equal(calls[0].headers['If-None-Match'], undefined);
  assert.equal(views.length, 0); // (nothing new: nothing drawn again)
  await l.checkFinished();
  assert.equal(views.at(-1).next, 'n1');
  assert.equal(l.checkFinished(), null); // named: nothing more to ask
  assert.equal(calls.length, 2);
});

test('a table that is gone (401 on the view) stops the phone for good: it says so and asks nothing more', async () => {
  globalThis.document ||= { addEventListener() {}, removeEventListener() {}, visibilityState: 'visible' }; // (stop() lets go of it)
  const modes = [];
  const l = new TableLive({ id: 't', token: 'k', view: VIEW, onView() {}, onRecords() {}, onStatus() {}, onMode: (m) => modes.push(m) });
  const calls = fetchReplies([{ status: 401, body: { code: 'unauthorized' } }, { status: 200, body: VIEW }]);
  await l.refresh();
  assert.equal(calls.length, 1);
  assert.equal(l.stopped, true);
  assert.deepEqual(modes, ['stopped']);
  l.wakeUp(true);               // (back online, or the page shown again: a phone that follows asks at once)
  assert.equal(l.checkFinished(), null);
  assert.equal(calls.length, 1);
});
