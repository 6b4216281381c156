// The app's state and its named transitions (pure: no DOM, no network, no storage; node-tested).
// Effects (requests, localStorage, timers, scrolling) run in app.js, from the actions that
// dispatch these and from subscribers that watch the state change.
import { edit } from './store.js';

export const blankStart = () => ({
  preset: null, names: [], opts: {}, optionsOpen: false, busy: false, key: null, keyBody: null,
  stakes: { on: false, cpp: '1', fee: '0', bankrolls: [] },
});

const blankTable = () => ({
  table: null,          // {id, token, read}
  view: null,           // GET /v1/tables/{id}, kept current by live.js
  records: [],          // the log (GET …/events and the stream), in order
  online: null,         // null: not known yet (no answer so far); true / false
  liveMode: 'connecting',
  pending: [],          // the outbox's items
  drafts: [],           // refused entries kept for a resubmit (412)
  transfers: {},        // seq → transfers in words' input (POST /v1/rounds/settle)
  roundKey: null,       // which records the current round's transfers were worked out for
  scores: {},           // `${seq}:${seat}` → {fan, raw_fan, capped, patterns} of a win given with a hand
  ownDeltas: {},        // seq of this phone's void → the deltas it answered
  landed: {},           // seq → true: written by this phone
  seenAt: {},           // seq → when this phone first had the record (ms)
  mySeat: null,         // the seat of this phone (null: not said; -1: only watching)
  qr: null, showShare: false,
  expanded: null,       // the ended round shown explained (its number)
  details: {},          // round number → {transfers: {seq: [...]}, statuses, error}
  summary: null, finished: null, endText: null, picture: null,
});

export const initialState = (lang = 'zh') => ({
  lang, route: 'start', start: blankStart(), rulesets: null, toast: null, dialog: null, glossary: false,
  ...blankTable(),
});

const set = (s, patch) => ({ ...s, ...patch });

let toastSeq = 0;

export const transitions = {
  // -- where the phone is --------------------------------------------------------------------
  'route/start': (s) => set(s, { ...blankTable(), route: 'start', dialog: null, toast: null }),
  'route/table': (s, { id, token, read, view = null, records = [], mySeat = null, drafts = [], showShare = false }) => set(s, {
    ...blankTable(), route: 'table', dialog: null, toast: null, table: { id, token: token || null, read: read || null },
    view, records, mySeat, drafts, showShare,
    seenAt: {},
  }),
  'route/back': (s) => (s.table ? set(s, { route: 'table' }) : s),
  'route/end': (s) => (s.table ? set(s, { route: 'end', dialog: null }) : s),
  'lang/set': (s, lang) => set(s, { lang: lang === 'zh' ? 'zh' : 'en' }),
  'glossary/toggle': (s, open) => set(s, { glossary: open == null ? !s.glossary : !!open }),

  // -- messages --------------------------------------------------------------------------------
  'toast/show': (s, text) => (text ? set(s, { toast: { text: String(text), id: ++toastSeq } }) : set(s, { toast: null })),
  'toast/hide': (s, id) => (!s.toast || (id != null && s.toast.id !== id) ? s : set(s, { toast: null })),

  // -- the start page --------------------------------------------------------------------------
  'rulesets/loaded': (s, rulesets) => set(s, { rulesets }),
  'start/edit': (s, fn) => set(s, { start: edit(s.start, fn) }),
  'start/reset': (s, start) => set(s, { start: start || blankStart() }),

  // -- the table as the server tells it ------------------------------------------------------
  'net/online': (s, online) => (s.online === online ? s : set(s, { online })),
  'live/mode': (s, liveMode) => (s.liveMode === liveMode ? s : set(s, { liveMode })),
  'view/received': (s, view) => set(s, { view }),
  // (seenAt: when this phone first had each record — a record of the log read at start-up
  // counts from its own time `at`, so that an old record is not taken for a new one)
  'records/changed': (s, { records, now = 0, initial = false }) => {
    const seenAt = { ...s.seenAt };
    for (const r of records) {
      if (r.seq in seenAt) continue;
      const at = Date.parse(r.at);
      seenAt[r.seq] = initial ? Math.min(now, Number.isFinite(at) ? at : 0) : now;
    }
    return set(s, { records, seenAt });
  },
  'outbox/changed': (s, items) => set(s, { pending: items }),
  // this phone's write landed (201): what it answered
  'write/landed': (s, { seq, transfers, deltas, voided }) => set(s, {
    landed: { ...s.landed, [seq]: true },
    transfers: Array.isArray(transfers) ? { ...s.transfers, [seq]: transfers } : s.transfers,
    ownDeltas: deltas && voided ? { ...s.ownDeltas, [seq]: deltas } : s.ownDeltas,
    online: true,
  }),
  'transfers/known': (s, { transfers, key }) => set(s, { transfers: { ...s.transfers, ...transfers }, roundKey: key ?? s.roundKey }),
  'scores/known': (s, scores) => set(s, { scores: { ...s.scores, ...scores } }),
  'drafts/changed': (s, drafts) => set(s, { drafts }),
  'seat/mine': (s, seat) => set(s, { mySeat: seat }),
  'share/qr': (s, qr) => set(s, { qr }),

  // -- an ended round, explained -------------------------------------------------------------
  'round/expand': (s, n) => set(s, { expanded: s.expanded === n ? null : n }),
  'round/details': (s, { n, details }) => set(s, { details: { ...s.details, [n]: details } }),

  // -- the end of the evening ------------------------------------------------------------------
  // (finishedAt null: finished, when not known yet — a write refused with 409 table_finished)
  'table/finished': (s, finishedAt) => set(s, { finished: finishedAt || s.finished || true,
    view: s.view && finishedAt ? { ...s.view, finished_at: finishedAt } : s.view }),
  'summary/loaded': (s, summary) => set(s, { summary, finished: summary && summary.finished_at ? summary.finished_at : s.finished }),
  'end/picture': (s, picture) => set(s, { picture }),

  // -- the dialog on top (one at a time) -------------------------------------------------------
  'dialog/open': (s, { kind, form = {}, ...rest }) => set(s, { dialog: { kind, form, msg: '', busy: false, ...rest }, toast: null }),
  'dialog/edit': (s, fn) => (s.dialog ? set(s, { dialog: { ...s.dialog, form: edit(s.dialog.form, fn), msg: '' } }) : s),
  // (an answer that arrives for the open sheet: its form changes, its message stays)
  'dialog/set': (s, { id, fn }) => (s.dialog && s.dialog.id === id ? set(s, { dialog: { ...s.dialog, form: edit(s.dialog.form, fn) } }) : s),
  'dialog/msg': (s, msg) => (s.dialog ? set(s, { dialog: { ...s.dialog, msg: msg || '' } }) : s),
  'dialog/busy': (s, busy) => (s.dialog ? set(s, { dialog: { ...s.dialog, busy } }) : s),
  'dialog/close': (s) => (s.dialog ? set(s, { dialog: null }) : s),
};

// -- selectors (pure) ----------------------------------------------------------------------------
// the events of a round, each settled, in the order the correction sheet offers them (a win first:
// the most often forgotten); every other list of them in the app is this one
export const ROUND_EVENTS = ['hu', 'kong', 'peng', 'draw', 'escape', 'penalty'];

export const roundRecords = (s, n) => s.records.filter((r) => r.round === n && !r.voided);

// the last record an undo would take back
export function lastUndoable(records) {
  for (let i = records.length - 1; i >= 0; i -= 1) {
    const r = records[i];
    if (r.type !== 'void' && !r.voided) return r;
  }
  return null;
}

// same event? (what two phones at one table would both record: type, seat(s), tile)
export function sameEvent(a, b) {
  if (!a || !b || a.type !== b.type) return false;
  if (a.type === 'hu') {
    const seats = (x) => (x.winners || []).map((w) => w.seat).sort().join(',');
    return seats(a) === seats(b) && a.tile === b.tile && (a.from ?? null) === (b.from ?? null);
  }
  if (a.type === 'draw' || a.type === 'round_end' || a.type === 'round_start') return true;
  return a.seat === b.seat && (a.tile ?? null) === (b.tile ?? null) && (a.kind ?? null) === (b.kind ?? null);
}

// a record equal to `body` that another phone recorded in the current round in the last
// `windowMs` (by when this phone first had it), or null
export function recentDuplicate(s, body, now, windowMs = 30000) {
  const round = s.view && s.view.round;
  if (!round || !['peng', 'kong', 'hu', 'escape', 'draw', 'penalty'].includes(body.type)) return null;
  for (let i = s.records.length - 1; i >= 0; i -= 1) {
    const r = s.records[i];
    if (r.round !== round.number) break;
    if (r.voided || s.landed[r.seq]) continue;
    const at = s.seenAt[r.seq];
    if (at == null || now - at > windowMs) continue;
    if (sameEvent(r, body)) return r;
  }
  return null;
}
