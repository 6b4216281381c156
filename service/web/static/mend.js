// Mending a round (改记录): the correction sheet's logic and the round as a recording sheet sees it
// (pure: no DOM, no network; node-tested). docs/rules.md#s15.2: a round, the one being played or an
// ended one, is rewritten as a whole by PUT /v1/tables/{id}/rounds/{n}/events; the sheet starts from
// the round as GET …/rounds/{n} explains it, and its entries are inserted, replaced (entered again on
// the very sheet that records a new one), moved and deleted here. What the new list would pay is asked
// of the service (POST /v1/rounds/settle: settleBody) before anything is written.
//
// A form (the sheet's value, kept in the store): {number, version (the table's, for If-Match),
// dealer, voids, status, before: {deltas, transfers: [per event of the round as it stands]},
// entries: [{id, event, was: its index in `before` (null: new or entered again)}], nextId,
// at (where the next entry goes: an index, or null for the end), note, key (the PUT's
// Idempotency-Key, kept while the body stays the same), after: {for, deltas, transfers} | null
// (what the entries would pay, for the list `for`), afterError}.
import { meldsBySeat, keptHands } from './round.js';

const NOT_EVENT = ['seq', 'index', 'transfers', 'at', 'round', 'voided'];
export const eventOf = (e) => Object.fromEntries(Object.entries(e).filter(([k]) => !NOT_EVENT.includes(k)));

// the sheet's first form, from GET …/rounds/{n} (`round`) and the table's version when it was read
export function mendForm(round, version) {
  const entries = round.events.map((e, i) => ({ id: i + 1, event: eventOf(e), was: i }));
  return {
    number: round.number, version, dealer: round.dealer, voids: round.voids || null, status: round.status,
    before: { deltas: round.deltas.slice(), transfers: round.events.map((e) => e.transfers || []) },
    entries, nextId: entries.length + 1, at: null, note: '', key: null, after: null, afterError: null,
  };
}

// the round read again (another phone changed the table first): the new "before" and version,
// the entries kept as they were entered (those unchanged now point nowhere: the round moved under them)
export function rebase(f, round, version) {
  const fresh = mendForm(round, version);
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const entries = f.entries.map((e) => {
    const at = fresh.entries.findIndex((x) => same(x.event, e.event));
    return { ...e, was: at >= 0 ? at : null };
  });
  return { ...f, version, dealer: round.dealer, voids: round.voids || null, status: round.status, before: fresh.before, entries };
}

export const newEvents = (f) => f.entries.map((e) => e.event);

// has anything changed (an entry moved, new, entered again or deleted)?
export const changed = (f) => f.entries.length !== f.before.transfers.length || f.entries.some((e, i) => e.was !== i);

// -- the edits (on a draft: A.edit) ----------------------------------------------------------------
export function moveEntry(f, i, by) {
  const j = i + by;
  if (i < 0 || i >= f.entries.length || j < 0 || j >= f.entries.length) return f;
  const [e] = f.entries.splice(i, 1);
  f.entries.splice(j, 0, e);
  f.at = null;
  return f;
}

export function removeEntry(f, i) {
  if (i >= 0 && i < f.entries.length) f.entries.splice(i, 1);
  f.at = null;
  return f;
}

// an entry made on a recording sheet: inserted at `at` (null: at the end), or in place of entry `at`
export function putEntry(f, at, event, replace = false) {
  const i = at == null ? f.entries.length : Math.max(0, Math.min(at, f.entries.length));
  if (replace && i < f.entries.length) f.entries[i] = { id: f.entries[i].id, event, was: null };
  else f.entries.splice(i, 0, { id: f.nextId++, event, was: null });
  f.at = null;
  return f;
}

// -- what it would pay, and what is written ----------------------------------------------------------
// POST /v1/rounds/settle's body for the entries: the round's ruleset, dealer and 定缺
export function settleBody(f, ruleset) {
  const body = { ruleset, dealer: f.dealer ?? 0, events: newEvents(f) };
  if (Array.isArray(f.voids) && f.voids.some((v) => v)) body.voids = f.voids;
  return body;
}

// which entries `after` was worked out for
export const afterKey = (f) => JSON.stringify(newEvents(f));

// the settle answer as the sheet shows it: the deltas, and each entry's transfers
export function afterOf(res, f) {
  const transfers = f.entries.map(() => []);
  for (const tr of res.transfers || []) if (transfers[tr.event]) transfers[tr.event].push(tr);
  return { for: afterKey(f), deltas: res.deltas.slice(), transfers };
}

// each seat: before, after (null: not known yet) and the change
export function payments(f) {
  const after = f.after && f.after.for === afterKey(f) ? f.after.deltas : null;
  return f.before.deltas.map((b, i) => ({ seat: i, before: b, after: after ? after[i] : null, change: after ? after[i] - b : null }));
}

// the PUT's body: the new list, and the note when one is written
export function putBody(f) {
  const body = { events: newEvents(f) };
  const note = (f.note || '').trim();
  if (note) body.note = note.slice(0, 500);
  return body;
}

// -- the round as a recording sheet sees it ----------------------------------------------------------
// The recording sheets (dialogs.js) ask a `ctx` about the round so far: who is still in, who has won,
// each seat's melds, the last event (what a 抢杠胡 or 杠上花 follows). roundCtx builds it from a round's
// standing `events` in order: the round being played (app.js) or, on the correction sheet, the
// entries before the place where the new one goes (mendCtx). won / left: seats known to have won or
// left besides what the events say (the view's, when the phone does not hold the round's log).
export function roundCtx({ view, mySeat, events, voids = [], dealer = null, won: wonToo = () => false, left: leftToo = () => false }) {
  const n = view.players.length;
  const xueliu = view.ruleset.mode === 'xueliu';
  const won = Array(n).fill(false);
  const left = Array(n).fill(false);
  for (const e of events) {
    if (e.type === 'hu') for (const w of e.winners || []) if (w && w.seat < n) won[w.seat] = true;
    if (e.type === 'escape' && e.seat < n) left[e.seat] = true;
  }
  const melds = meldsBySeat(events, n);
  const kept = keptHands(events, n);
  const hasWon = (i) => won[i] || wonToo(i);
  const hasLeft = (i) => left[i] || leftToo(i);
  return {
    view, players: view.players, ruleset: view.ruleset, voids: voids || [], xueliu, mySeat,
    suits: n === 3 ? ['p', 's'] : ['m', 'p', 's'], // 三人两房: 筒 and 条 only
    round: { last: events.length ? events[events.length - 1] : null, events: events.length,
      claims: events.some((e) => e.type === 'peng' || e.type === 'kong'), dealer },
    out: (i) => hasLeft(i) || (!xueliu && hasWon(i)), // (血流: a winner plays on, §13.1)
    won: hasWon,
    claims: (i) => !(xueliu && hasWon(i)), // 血流: a seat that has won may not 碰 or 直杠 (§13.2)
    melds: (i) => melds[i].map((m) => ({ ...m })),
    pengs: (i) => melds[i].filter((m) => m.type === 'peng').map((m) => m.tile),
    kept: (i) => (xueliu ? kept[i] : null),
  };
}

// the ctx of a recording sheet opened from the correction sheet: the round as its entries before
// `at` make it (at null: all of them)
export function mendCtx(view, mySeat, f, at) {
  const events = newEvents(f).slice(0, at == null ? f.entries.length : at);
  return roundCtx({ view, mySeat, events, voids: f.voids || [], dealer: f.dealer });
}

