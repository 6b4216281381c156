// The outbox: kept, sent in order with one Idempotency-Key each, retried, refused ones handed back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fetchReplies } from './setup.mjs';
import { Outbox } from '../static/outbox.js';

function outbox(extra = {}) {
  const log = { changes: [], sent: [], refused: [] };
  const box = new Outbox({
    tableId: 't1', token: 'tok',
    onChange: (items, err) => log.changes.push([items.length, err ? err.status : null]),
    onSent: (item, data) => log.sent.push([item.label, data.seq]),
    onRefused: (item, err) => log.refused.push([item.label, err.status]),
    ...extra,
  });
  return { box, log };
}

const idle = (box) => new Promise((resolve) => { const t = setInterval(() => { if (!box.sending) { clearInterval(t); resolve(); } }, 1); });

test('sent in order, each with its key and the version it expects', async () => {
  localStorage.clear();
  const calls = fetchReplies([{ status: 201, body: { seq: 4 } }, { status: 201, body: { seq: 5 } }]);
  const { box, log } = outbox();
  box.add({ path: '/v1/tables/t1/events', body: { type: 'kong' }, seen: 3, label: 'a' });
  box.add({ path: '/v1/tables/t1/events', body: { type: 'peng' }, seen: 3, label: 'b' });
  await idle(box);
  assert.deepEqual(log.sent, [['a', 4], ['b', 5]]);
  assert.equal(calls.length, 2);
  assert.equal(calls[0].headers['If-Match'], '"3"');
  assert.equal(calls[1].headers['If-Match'], '"4"'); // (its own earlier item landed after what it saw)
  assert.equal(calls[0].headers.Authorization, 'Bearer tok');
  assert.notEqual(calls[0].headers['Idempotency-Key'], calls[1].headers['Idempotency-Key']);
  assert.equal(box.length, 0);
});

test('offline: kept (also across a reload), then sent with the same key', async () => {
  localStorage.clear();
  let calls = fetchReplies([{ offline: true }]);
  const first = outbox();
  first.box.add({ path: '/v1/tables/t1/events', body: { type: 'kong' }, seen: 1, label: 'k' });
  await idle(first.box);
  clearTimeout(first.box.timer);
  assert.equal(first.box.length, 1);
  assert.deepEqual(first.log.changes.at(-1), [1, 0]);
  const key = calls[0].headers['Idempotency-Key'];
  calls = fetchReplies([{ status: 201, body: { seq: 2 } }]);
  const again = outbox(); // (a reload: read back from localStorage)
  assert.equal(again.box.length, 1);
  await again.box.flush();
  assert.equal(calls[0].headers['Idempotency-Key'], key);
  assert.deepEqual(again.log.sent, [['k', 2]]);
});

test('a refusal (412) is handed back, and the next item is sent', async () => {
  localStorage.clear();
  fetchReplies([{ status: 412, body: { code: 'version_mismatch' } }, { status: 201, body: { seq: 9 } }]);
  const { box, log } = outbox();
  box.add({ path: '/v1/tables/t1/events', body: { type: 'kong' }, seen: 1, label: 'old' });
  box.add({ path: '/v1/tables/t1/events', body: { type: 'peng' }, seen: null, label: 'next' });
  await idle(box);
  assert.deepEqual(log.refused, [['old', 412]]);
  assert.deepEqual(log.sent, [['next', 9]]);
});

test('an item not on the wire can be cancelled', () => {
  localStorage.clear();
  fetchReplies([]);
  const { box } = outbox();
  box.sending = true; // (as if the first were on the wire)
  const a = box.add({ path: '/x', body: {}, seen: null, label: 'a' });
  const b = box.add({ path: '/x', body: {}, seen: null, label: 'b' });
  assert.equal(box.cancel(a.key), false);
  assert.equal(box.cancel(b.key), true);
  assert.deepEqual(box.items.map((i) => i.label), ['a']);
});
