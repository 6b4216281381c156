// What the current round's records say about each seat, for the dialogs: its melds, its wins,
// and (血流成河, docs/rules.md#s13.2) the hand a winner keeps. `recs` are the round's records in
// log order, voided ones left out; `n` the number of seats.

import { ROUND_EVENTS as SETTLED } from './state.js';

// tiles of a hand string ("123m55p", "1m2m3m") or list (["1m", "2m"]) → ["1m", "2m", ...]
export function parseTiles(tiles) {
  if (Array.isArray(tiles)) return tiles.map(String);
  const out = [];
  let ranks = [];
  for (const ch of String(tiles || '')) {
    if (ch >= '0' && ch <= '9') ranks.push(ch);
    else if ('mps'.includes(ch)) { for (const r of ranks) out.push(`${r}${ch}`); ranks = []; }
  }
  return out;
}

const meldOf = (m) => (m.type === 'peng' ? { type: 'peng', tile: m.tile } : { type: 'kong', kind: m.kind, tile: m.tile });

// each seat's melds as the log shows them (its pengs, and its kongs — an added kong replaces its peng)
export function meldsBySeat(recs, n) {
  const melds = Array.from({ length: n }, () => []);
  for (const r of recs) {
    if (r.seat == null || r.seat >= n) continue;
    if (r.type === 'peng') melds[r.seat].push({ type: 'peng', tile: r.tile });
    if (r.type === 'kong') {
      const list = melds[r.seat];
      const i = r.kind === 'added' ? list.findIndex((m) => m.type === 'peng' && m.tile === r.tile) : -1;
      if (i >= 0) list.splice(i, 1);
      list.push({ type: 'kong', kind: r.kind, tile: r.tile });
    }
  }
  return melds;
}

// how many times each seat has won in the round (血流: any number; 一炮多响 counts once per winner)
export function winsBySeat(recs, n) {
  const wins = Array(n).fill(0);
  for (const r of recs) if (r.type === 'hu') for (const w of r.winners || []) if (w.seat < n) wins[w.seat] += 1;
  return wins;
}

// 血流: the hand each winner keeps once known — a win given with a hand, less the tile won (set
// aside); then its concealed kong takes three of its tiles, its added kong turns its peng into a
// kong, and a robbed added kong gives the peng back. null: not known (wins given as fan only).
export function keptHands(recs, n) {
  const kept = Array(n).fill(null);
  let lastKong = null;
  for (const r of recs) {
    if (r.type === 'hu') {
      if (r.robbing_kong && lastKong && lastKong.kind === 'added' && kept[lastKong.seat]) {
        const k = kept[lastKong.seat];
        k.melds = k.melds.map((m) => (m.type === 'kong' && m.kind === 'added' && m.tile === lastKong.tile ? { type: 'peng', tile: m.tile } : m));
      }
      for (const w of r.winners || []) {
        if (!w.hand || w.seat >= n) continue;
        const tiles = parseTiles(w.hand.tiles);
        const i = tiles.indexOf(r.tile);
        if (i >= 0) tiles.splice(i, 1);
        kept[w.seat] = { tiles, melds: (w.hand.melds || []).map(meldOf) };
      }
    } else if (r.type === 'kong' && r.seat < n && kept[r.seat]) {
      const k = kept[r.seat];
      if (r.kind === 'concealed') {
        for (let c = 0; c < 3; c += 1) { const i = k.tiles.indexOf(r.tile); if (i >= 0) k.tiles.splice(i, 1); }
        k.melds.push({ type: 'kong', kind: 'concealed', tile: r.tile });
      } else if (r.kind === 'added') {
        k.melds = k.melds.map((m) => (m.type === 'peng' && m.tile === r.tile ? { type: 'kong', kind: 'added', tile: r.tile } : m));
      }
    }
    lastKong = r.type === 'kong' ? r : null;
  }
  return kept;
}

// The current round as this phone knows it: its standing events in order — the log's, then this
// phone's entries not sent yet (they will follow whatever the log holds) — and what they say: the
// last one (what a 抢杠胡, 杠上花 or 杠上炮 follows), whether any 碰 or 杠 stands (地胡 comes before
// any), and each seat's wins and escape. `pending` the outbox's items ({body}); `n` the seats.
export function roundSoFar(records, pending, number, n) {
  const events = standingEvents(records, number).map((x) => x.record || x.event);
  for (const item of pending || []) {
    const b = item.body;
    if (b && (b.type === 'round_start' || b.type === 'round_end')) break; // (what follows is another round's)
    if (b && SETTLED.includes(b.type)) events.push(b);
  }
  const won = Array(n).fill(false);
  const left = Array(n).fill(false);
  for (const e of events) {
    if (e.type === 'hu') for (const w of e.winners || []) if (w && w.seat < n) won[w.seat] = true;
    if (e.type === 'escape' && e.seat < n) left[e.seat] = true;
  }
  return { events, last: events.length ? events[events.length - 1] : null,
    claims: events.some((e) => e.type === 'peng' || e.type === 'kong'), won, left };
}

// -- points and patterns of a win given as fan ---------------------------------------------------
// what one payer pays for `fan` (docs/rules.md#s5.3: the cap, then base × 2^(fan−1), or base × fan
// when scoring is linear; 自摸加底 adds a base per payer): {fan, points, capped}, or null
export function pointsFor(fan, ruleset, { selfDrawn = false } = {}) {
  if (!Number.isInteger(fan) || fan < 1 || !ruleset) return null;
  const capped = ruleset.cap != null && fan > ruleset.cap;
  const f = capped ? ruleset.cap : fan;
  const base = ruleset.base ?? 6;
  const mult = ruleset.scoring === 'linear' ? f : 2 ** (f - 1);
  return { fan: f, points: base * mult + (selfDrawn && ruleset.zimo === 'base' ? base : 0), capped };
}

// the patterns worth fan in this room: those of its fan table whose ruleset option, if they have one,
// is on (each pattern's `option` and the value `on` that turns it on: the rules core's registry, as
// /web/patterns.json serves it; 自摸加番 is on with zimo = fan)
export function roomPatterns(patterns, ruleset) {
  const table = (ruleset && ruleset.fan_table) || 'qq';
  return patterns.filter((p) => (p.fan[table] || 0) > 0 && (!p.option || (ruleset || {})[p.option] === p.on));
}

// -- one round, explained ----------------------------------------------------------------------
// the records of round n (voided ones included, and the voids that took them back)
export function roundLog(records, n) {
  const inRound = new Set(records.filter((r) => r.round === n).map((r) => r.seq));
  return records.filter((r) => inRound.has(r.seq) || (r.type === 'void' && inRound.has(r.target)));
}

const eventBody = (r) => Object.fromEntries(Object.entries(r).filter(([k]) => !['seq', 'at', 'round', 'voided'].includes(k)));

// The events of round n that stand, in order (docs/rules.md#s15.2): those of its latest standing
// correction (a `correction` record, whose `round` is the round it rewrote), then its own events
// recorded after that correction; without a correction, all its own. Each as {key, seq, event}
// (`key`: the record's seq, or "seq.index" for the index-th event of a correction, as GET …/rounds/{n}
// numbers them; a record of the round's own also `record`). With `upTo`: as they stood when record `upTo` was made (what a void took back).
export function standingEvents(records, n, upTo = null) {
  const standing = (r) => (upTo == null ? !r.voided : r.seq <= upTo && (r.seq === upTo || !voidedBefore(records, r.seq, upTo)));
  const recs = records.filter((r) => r.round === n && standing(r));
  const fixes = recs.filter((r) => r.type === 'correction');
  const latest = fixes.length ? fixes[fixes.length - 1] : null;
  const out = latest ? (latest.events || []).map((event, i) => ({ key: `${latest.seq}.${i}`, seq: latest.seq, index: i, event })) : [];
  for (const r of recs) {
    if (SETTLED.includes(r.type) && r.seq > (latest ? latest.seq : 0)) out.push({ key: r.seq, seq: r.seq, event: eventBody(r), record: r });
  }
  return out;
}

// the seqs of round n's records that a standing correction replaced (shown as such, paying nothing)
export function replacedSeqs(records, n) {
  const fixes = records.filter((r) => r.round === n && !r.voided && r.type === 'correction');
  if (!fixes.length) return new Set();
  const last = fixes[fixes.length - 1].seq;
  return new Set(records.filter((r) => r.round === n && r.seq < last && (SETTLED.includes(r.type) || r.type === 'correction')).map((r) => r.seq));
}

// the round's dealer and 定缺 as its round_start and its standing corrections give them
function roundSetup(records, n) {
  const recs = records.filter((r) => r.round === n && !r.voided && (r.type === 'round_start' || r.type === 'correction'));
  let dealer = null, voids = null;
  for (const r of recs) {
    if (r.dealer != null) dealer = r.dealer;
    if (Array.isArray(r.voids)) voids = r.voids;
  }
  return { dealer, voids };
}

// POST /v1/rounds/settle's body for the events of round n that stand (or, with `upTo`, for the
// ones that stood when record `upTo` was made: what a void took back), and the key of each index
// (standingEvents); `dealer`: the round's dealer when its records do not name it
export function settleRequest(records, n, ruleset, upTo = null, dealer = null) {
  const evs = standingEvents(records, n, upTo);
  const setup = roundSetup(records, n);
  const body = { ruleset, dealer: setup.dealer ?? dealer ?? 0, events: evs.map((x) => x.event) };
  if (Array.isArray(setup.voids) && setup.voids.some((v) => v)) body.voids = setup.voids;
  return { body, seqs: evs.map((x) => x.key) };
}

// was record `seq` voided by a void made before record `before`?
function voidedBefore(records, seq, before) {
  return records.some((r) => r.type === 'void' && r.target === seq && r.seq < before);
}

// each seat's standing at a draw (or an escape's last-four reports): ting (with its 大叫 fan when
// given), a hand (ting worked out by the server), not ting, 花猪
export function drawStatuses(rec) {
  if (!rec || !Array.isArray(rec.seats)) return [];
  return rec.seats.map((s) => (s.hand
    ? { seat: s.seat, status: 'hand', hand: s.hand }
    : { seat: s.seat, status: s.status, dajiao_fan: s.dajiao_fan ?? null }));
}

// the balance changes of a stream record applied to the round it belongs to: the round's deltas
// move with the balances (so that 本局 and the rounds table agree with 合计 at once)
export function roundAfterRecord(round, rec, before, after) {
  if (!round || !Array.isArray(before) || !Array.isArray(after) || rec.type === 'buy_in') return round;
  if (rec.type === 'round_start') {
    const n = before.length;
    return { number: rec.round ?? round.number + 1, dealer: rec.dealer ?? 0, status: 'playing',
      voids: rec.voids || Array(n).fill(null), won: [], left: [], deltas: Array(n).fill(0), ended_by: null, next_dealer: null, events: 0 };
  }
  const deltas = round.deltas.map((d, i) => d + (after[i] - before[i]));
  const next = { ...round, deltas };
  if (rec.type === 'round_end') next.status = 'ended';
  return next;
}
