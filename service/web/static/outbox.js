// The outbox: every write (event or undo) goes through here, each with its own
// Idempotency-Key made when the player confirmed it. Kept in localStorage, so a reload or a
// dead network loses nothing; sent in order when the network is back. A retry of a request
// whose answer was lost repeats the same key, so the server records it once and replays its
// first answer. If-Match carries the version the phone expected: if another phone changed
// the table meanwhile, the server refuses (412) and the player is told, never silently.
import { call, uuid4 } from './api.js';

const RETRY_MS = 3000;

export class Outbox {
  constructor({ tableId, token, onChange, onSent, onRefused }) {
    Object.assign(this, { tableId, token, onChange, onSent, onRefused });
    this.key = `mj.outbox.${tableId}`;
    const saved = this.load();
    this.items = saved.items;
    this.landed = saved.landed; // Idempotency-Key → seq of this phone's items that landed
    this.sending = false;
    this.timer = null;
    window.addEventListener('online', () => this.flush());
  }

  load() {
    try {
      const v = JSON.parse(localStorage.getItem(this.key) || 'null');
      if (v && Array.isArray(v.items)) return { items: v.items, landed: v.landed || {} };
    } catch { /* unreadable: start empty */ }
    return { items: [], landed: {} };
  }

  save() {
    const wanted = new Set(this.items.flatMap((i) => i.before));
    for (const k of Object.keys(this.landed)) if (!wanted.has(k)) delete this.landed[k];
    try {
      localStorage.setItem(this.key, JSON.stringify({ items: this.items, landed: this.landed }));
    } catch { /* quota: kept in memory */ }
    this.onChange(this.items);
  }

  get length() { return this.items.length; }

  // drop an item not sent yet (a wrong tap made offline); the one on the wire stays
  cancel(key) {
    const i = this.items.findIndex((x) => x.key === key);
    if (i < 0 || (i === 0 && this.sending)) return false;
    this.items.splice(i, 1);
    this.save();
    return true;
  }

  // path: API path to POST; body: JSON (undefined for a void); seen: the table version the
  // player was looking at (null: no If-Match); label: words for the pending list.
  add({ path, body, seen, label }) {
    const item = { key: uuid4(), path, body, seen, before: this.items.map((i) => i.key), label, at: Date.now() };
    this.items.push(item);
    this.save();
    this.flush();
    return item;
  }

  // The version the table should be at when `item` lands: what the player saw, plus this
  // phone's earlier items that landed after it (an earlier item the view already showed, or
  // one that was refused, adds nothing).
  expected(item) {
    if (item.seen == null) return null;
    return item.seen + item.before.filter((k) => (this.landed[k] || 0) > item.seen).length;
  }

  async flush() {
    if (this.sending) return;
    this.sending = true;
    clearTimeout(this.timer);
    try {
      while (this.items.length) {
        const item = this.items[0];
        const headers = { 'Idempotency-Key': item.key };
        const expect = this.expected(item);
        if (expect != null) headers['If-Match'] = `"${expect}"`;
        let res;
        try {
          res = await call('POST', item.path, { body: item.body, token: this.token, headers });
        } catch (e) {
          if (e.retryable) { // (a 429 or 503: after the server's Retry-After)
            this.onChange(this.items, e);
            this.timer = setTimeout(() => this.flush(), Math.max(RETRY_MS, 1000 * (e.retryAfter || 0)));
            return;
          }
          this.items.shift();
          this.save();
          this.onRefused(item, e);
          continue;
        }
        this.landed[item.key] = res.data.seq;
        this.items.shift();
        this.save();
        this.onSent(item, res.data);
      }
    } finally {
      this.sending = false;
    }
  }
}
