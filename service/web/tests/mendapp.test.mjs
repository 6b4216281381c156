// The correction sheet's requests (mendapp.js) against replies given in order (setup.mjs's fetch): the
// round read, what the new list pays asked of the service, one PUT with If-Match and one Idempotency-Key
// per body, and each refusal said on the sheet with every entry kept.
import { fetchReplies } from './setup.mjs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createStore } from '../static/store.js';
import { initialState, transitions } from '../static/state.js';
import { mendActions } from '../static/mendapp.js';
import { DIALOGS } from '../static/dialogs.js';
import { setLang, t } from '../static/i18n.js';

const KONG = { type: 'kong', seat: 2, kind: 'concealed', tile: '7s' };
const ZIMO = { type: 'hu', from: null, tile: '5p', winners: [{ seat: 0, fan: 2 }] };
const ROUND = { number: 1, dealer: 0, status: 'ended', voids: [null, null, null, null], deltas: [36, -12, -12, -12],
  events: [{ seq: 2, ...ZIMO, transfers: [1, 2, 3].map((s) => ({ from: s, to: 0, points: 12, reason: 'zimo', event: 2 })) }] };
const VIEW = { version: 5, players: ['东', '南', '西', '北'], balances: [24, 24, -24, -24],
  ruleset: { preset: 'xuezhan', mode: 'xuezhan', base: 6, cap: null }, round: { number: 2, status: 'playing', dealer: 0, won: [], left: [], voids: [] }, rounds: [] };

const until = async (fn) => { for (let i = 0; i < 200 && !fn(); i += 1) await new Promise((r) => setTimeout(r, 1)); assert.ok(fn()); };

function table() {
  const store = createStore(initialState('en'), transitions);
  store.dispatch('route/table', { id: 't1', token: 'k', read: 'r', view: VIEW });
  let id = 0;
  const written = [];
  const fx = mendActions({ S: () => store.state, dispatch: store.dispatch, dialogs: DIALOGS, nextId: () => { id += 1; return id; },
    errorText: (e) => `refused ${e.status} ${e.code}`, written: (data, n) => written.push([data, n]) });
  return { store, fx, written, form: () => store.state.dialog.form };
}

test('a correction from the round read to the one PUT, each refusal said with every entry kept', async () => {
  setLang('en');
  const { store, fx, written, form } = table();
  let calls = fetchReplies([{ status: 200, body: ROUND }]);
  fx.open(1);
  await until(() => form().entries);
  assert.equal(calls[0].url, '/v1/tables/t1/rounds/1');
  assert.equal(calls[0].headers.Authorization, 'Bearer k');
  assert.deepEqual([form().version, form().entries.length, store.state.dialog.kind], [5, 1, 'mend']);
  const mendId = store.state.dialog.id;

  // the forgotten kong, entered on the 杠 sheet, goes first; cancelling a sheet comes back unchanged
  fx.sheet('kong', 0, false);
  assert.deepEqual([store.state.dialog.kind, store.state.dialog.mend.at], ['kong', 0]);
  fx.back();
  assert.deepEqual([store.state.dialog.kind, store.state.dialog.id, form().entries.length], ['mend', mendId, 1]);
  fx.sheet('kong', 0, false);
  fx.put(KONG);
  assert.deepEqual([store.state.dialog.kind, store.state.dialog.id], ['mend', mendId]);
  assert.deepEqual(form().entries.map((e) => e.event.type), ['kong', 'hu']);
  // re-entering the win opens its sheet filled in as it was
  fx.sheet('hu', 1, true);
  const hu = store.state.dialog.form;
  assert.deepEqual([hu.selfDrawn, hu.winners, hu.tile, hu.entries[0].fan], [true, [0], '5p', 2]);
  fx.back();

  // what it would pay, asked once per list
  const deltas = [24, -24, 24, -24];
  calls = fetchReplies([{ status: 200, body: { deltas, transfers: [{ from: 0, to: 2, points: 12, reason: 'kong_concealed', event: 0 }] } }]);
  fx.effects(store.state);
  fx.effects(store.state);
  await until(() => form().after);
  assert.equal(calls.length, 1);
  assert.deepEqual([calls[0].url, calls[0].method, calls[0].body.events], ['/v1/rounds/settle', 'POST', [KONG, ZIMO]]);
  assert.deepEqual([form().after.deltas, form().after.transfers.map((x) => x.length)], [deltas, [1, 0]]);
  fx.effects(store.state);
  assert.equal(calls.length, 1);

  // 409: a later round would break — its words, naming it
  calls = fetchReplies([{ status: 409, body: { code: 'correction_conflict', round: 2, event: 6 } }]);
  assert.equal(await fx.save(), t('mend_conflict', { round: 2 }));
  const put = calls[0];
  assert.deepEqual([put.method, put.url, put.headers['If-Match'], put.body], ['PUT', '/v1/tables/t1/rounds/1/events', '"5"', { events: [KONG, ZIMO] }]);
  // 422: the entry that cannot happen, by its place in the list
  calls = fetchReplies([{ status: 422, body: { code: 'round_ended', event: 1 } }]);
  assert.equal(await fx.save(), `${t('mend_entry_n', { n: 2 })}refused 422 round_ended`);
  assert.equal(calls[0].headers['Idempotency-Key'], put.headers['Idempotency-Key']); // (the same body: the same key)
  // 412: another phone first — the round read again, the version of the 412, the entries kept
  const moved = { ...ROUND, deltas: [30, -10, -10, -10] };
  calls = fetchReplies([{ status: 412, body: { code: 'version_mismatch', version: 7 } }, { status: 200, body: moved }]);
  assert.equal(await fx.save(), t('mend_stale'));
  assert.deepEqual([form().version, form().before.deltas, form().entries.map((e) => e.event.type)], [7, [30, -10, -10, -10], ['kong', 'hu']]);
  // written: once, with the version read again; a note changes the body, and so the key
  store.dispatch('dialog/edit', (x) => { x.note = 'the kong came first'; });
  calls = fetchReplies([{ status: 201, body: { seq: 8, version: 8 } }]);
  assert.equal(await fx.save(), true);
  assert.deepEqual([calls[0].headers['If-Match'], calls[0].body.note], ['"7"', 'the kong came first']);
  assert.notEqual(calls[0].headers['Idempotency-Key'], put.headers['Idempotency-Key']);
  assert.deepEqual(written, [[{ seq: 8, version: 8 }, 1]]);
});

test('a round that cannot be read says so on the sheet', async () => {
  setLang('en');
  const { fx, form } = table();
  fetchReplies([{ status: 404, body: { code: 'round_not_found' } }]);
  fx.open(9);
  await until(() => form().loadError);
  assert.equal(form().loadError, 'refused 404 round_not_found');
});
