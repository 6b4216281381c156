// The table companion: start a table, share it, record a round by tapping, see the
// balances live on every phone. Speaks only the public HTTP API (/v1/...), plus POST /web/qr
// for the QR picture of the share link.
//
// How it is put together: one store (store.js) holds the whole state; its named transitions
// (state.js) are the only way it changes. The screens (ui.js, dialogs.js, end.js) are drawn
// from the state by pure functions and patched into the page (dom.js: only what changed is
// touched, so focus and scroll survive). Everything else — requests, the outbox, the live
// table, storage, timers, scrolling — happens here, in the actions the screens call and in
// the subscribers that watch the state change.
import { call, tablePath, uuid4, ApiError, apiKey, setApiKey } from './api.js';
import { t, getLang, setLang } from './i18n.js';
import { patch } from './dom.js';
import { TableLive } from './live.js';
import { settleRequest, roundLog, roundSoFar } from './round.js';
import { roundCtx, mendCtx } from './mend.js';
import { Outbox } from './outbox.js';
import { describe, setPatterns } from './words.js';
import { createStore } from './store.js';
import { initialState, transitions, ROUND_EVENTS, lastUndoable, recentDuplicate } from './state.js';
import { renderApp, shareLinks } from './ui.js';
import { DIALOGS, renderDialog, undoForm } from './dialogs.js';
import { scoreHand, tingHand, shantenHand } from './picker.js';
import { endActions } from './end.js';
import { winFlags } from './wins.js';
import { mendActions } from './mendapp.js';
import { clubTransitions, parseClubHash, renderClub, renderClubHome } from './club.js';
import { clubActions } from './clubs.js';

const store = createStore(initialState(getLang()), { ...transitions, ...clubTransitions });
const S = () => store.state;
const dispatch = (name, payload) => store.dispatch(name, payload);
const fx = { live: null, outbox: null, qrAsked: false, seatAsked: false, returnFocus: null, dialogSeq: 0, toastTimer: null, drawn: {} };

// -- storage (the phone keeps its tables, the last view and log of each, its seat, the language) --
const saved = {
  get(k, d) { try { const v = localStorage.getItem(k); return v == null ? d : JSON.parse(v); } catch { return d; } },
  set(k, v) { try { localStorage.setItem(k, JSON.stringify(v)); } catch { /* full or private */ } },
};
const LOG_KEPT = 3000; // records of a table's log kept on the phone

function remember(entry) {
  const all = saved.get('mj.tables', []);
  const old = all.find((x) => x.id === entry.id) || {};
  const list = all.filter((x) => x.id !== entry.id);
  list.unshift({ ...old, ...Object.fromEntries(Object.entries(entry).filter(([, v]) => v != null)), at: Date.now() });
  saved.set('mj.tables', list.slice(0, 10));
}

// -- errors in plain words, in the phone's language (never the API's English detail in Chinese) ----
const has = (key) => t(key) !== key;
export function errorText(e) {
  if (!(e instanceof ApiError)) return t('err.generic');
  const code = e.code;
  const words = code && has(`codes.${code}`) ? t(`codes.${code}`) : '';
  const detail = getLang() === 'en' && !words ? (e.problem && (e.problem.detail || e.problem.title)) || '' : '';
  switch (true) {
    case e.status === 0: return t('err.offline');
    case e.status === 412: return t('err.stale');
    case e.status === 403: return t('err.read_only');
    case e.status === 401: return /api.?key/i.test(`${code}`) ? t('err.api_key') : t('err.auth');
    case e.status === 404: return words || t('err.gone');
    case e.status === 429 || e.status >= 500: return t('err.busy');
    case e.status === 409: return words || (detail ? `${t('err.conflict')}${detail}` : t('err.conflict_plain'));
    case e.status === 422: return `${t('err.rule')}${words || detail || t('err.generic')}`;
    default: return words || (detail ? `${t('err.bad')}${detail}` : t('err.generic'));
  }
}

const toast = (text) => dispatch('toast/show', text);

// -- the dialogs' view of the table ---------------------------------------------------------------
// Who has won or left is read from the round's records (and this phone's entries not sent yet) when
// the phone holds the round's log: the view's round follows a record by up to a second, and a sheet
// must not ask about a seat that has just won. Without the log (a phone just opened), the view says.
function dialogCtx(s) {
  if (s.dialog && s.dialog.mend) return mendCtx(s.view, s.mySeat, s.dialog.mend.form, s.dialog.mend.at); // (an entry of a correction)
  const view = s.view;
  const round = view.round || { won: [], left: [], voids: [] };
  const n = view.players.length;
  const so = roundSoFar(s.records, s.pending, round.number, n);
  const logged = s.records.some((r) => r.type === 'round_start' && r.round === round.number);
  return roundCtx({ view, mySeat: s.mySeat, events: so.events, voids: round.voids || [], dealer: round.dealer ?? null,
    won: (i) => !logged && round.won.includes(i), left: (i) => !logged && round.left.includes(i) });
}

// -- actions: what the screens call ------------------------------------------------------------------
// the correction sheet (mendapp.js); a correction written: the log and the view read at once (the
// stream brings the record too: each phone's rounds, balances and history follow it)
const mend = mendActions({ S, dispatch, dialogs: DIALOGS, errorText: (e) => errorText(e), nextId: () => { fx.dialogSeq += 1; return fx.dialogSeq; },
  written: () => { if (fx.live) fx.live.catchUp().then(() => fx.live && fx.live.refresh()); } });

const dialogActions = {
  mend,
  edit: (fn) => dispatch('dialog/edit', fn),
  close: () => A.closeDialog(),
  confirm: () => A.confirmDialog(),
  record: (body) => A.record(body),
  setSeat: (seat) => A.setSeat(seat),
  answer: (form) => A.answer(form),
  checkHand: (path, how, seat) => checkHand(path, how, seat),
};

const A = {
  ...dialogActions,
  origin: () => location.origin,
  loopback: () => /^(localhost|127\.|\[::1\])/.test(location.hostname),
  apiKey: () => apiKey(),
  setApiKey: (v) => { setApiKey(v); loadRulesets(true); },
  recentTables: () => saved.get('mj.tables', []),
  toggleLang: () => { setLang(getLang() === 'zh' ? 'en' : 'zh'); dispatch('lang/set', getLang()); },
  editStart: (fn) => dispatch('start/edit', fn),
  createTable: () => createTable(),
  sending: () => !!(fx.outbox && fx.outbox.sending),
  cancelPending: (key) => fx.outbox && fx.outbox.cancel(key),

  openDialog(kind, extra) {
    const s = S();
    if (kind !== 'glossary' && !s.view) return;
    const ctx = kind === 'glossary' ? null : dialogCtx(s);
    fx.returnFocus = document.activeElement;
    fx.dialogSeq += 1;
    dispatch('dialog/open', { kind, form: DIALOGS[kind].form(ctx, extra), id: fx.dialogSeq });
    const first = document.getElementById('overlay').querySelector('button:not([disabled]), input, select');
    if (first) first.focus();
  },
  closeDialog() {
    const d = S().dialog;
    if (d && d.mend) { mend.back(); return; } // (a sheet opened from the correction sheet: back to it)
    if (d && d.kind === 'whoAmI' && S().mySeat == null) A.setSeat(-1); // asked once: "just watching"
    dispatch('dialog/close');
    if (fx.returnFocus && fx.returnFocus.isConnected) fx.returnFocus.focus();
  },
  async confirmDialog() {
    const d = S().dialog;
    if (!d || d.busy) return;
    const def = DIALOGS[d.kind];
    dispatch('dialog/busy', true);
    let r;
    try {
      r = await def.confirm(d.form, def === DIALOGS.glossary ? null : dialogCtx(S()), dialogActions);
    } catch (e) {
      r = errorText(e);
    }
    const now = S().dialog;
    if (!now || now.id !== d.id) return; // (replaced meanwhile: the duplicate question)
    dispatch('dialog/busy', false);
    if (r === true) A.closeDialog();
    else if (typeof r === 'string') dispatch('dialog/msg', r);
  },

  // an event, after the check that another phone has not just recorded the same one; from a sheet,
  // answered once the service has (see awaitAnswer): true (recorded, or waiting for the network), or
  // the refusal in words for the sheet to show
  record(body, { force = false } = {}) {
    const s = S();
    if (s.dialog && s.dialog.mend) return mend.put(body); // (an entry of a correction: into its list, not sent)
    const dup = force ? null : recentDuplicate(s, body, Date.now());
    if (dup) {
      const what = `#${dup.seq} ${describe(dup, s.view.players)}`;
      if (body.type === 'kong') return t('dup_kong', { what }); // a second one would be a fifth copy
      if (!canAgain(s, body)) return t('dup_done', { what }); // (血战: that seat has won already)
      askAgain(body, what);
      return undefined;
    }
    const n = s.view.round ? s.view.round.number : null;
    const number = body.type === 'round_start' ? (n || 0) + 1 : n; // (a round start: of the next round)
    const item = send({ path: tablePath(s.table.id, '/events'), body, label: describe(body, s.view.players, number) });
    return s.dialog ? awaitAnswer(item, s.dialog.id) : true;
  },
  answer(form) {
    const s = S();
    if (form.then === 'again') return A.record(form.body, { force: true });
    if (form.then === 'round_end') return A.record({ type: 'round_end' });
    if (form.then === 'finish') { finishTable(); return true; }
    if (form.then === 'void') {
      const rec = s.records.find((r) => r.seq === form.seq);
      send({ path: tablePath(s.table.id, `/events/${form.seq}/void`), body: undefined,
        label: `${t('undo')} #${form.seq}: ${rec ? describe(rec, s.view.players) : ''}` });
      return true;
    }
    return true;
  },
  askUndo() {
    const r = lastUndoable(S().records);
    if (!r) { toast(t('err.nothing_to_undo')); return; }
    A.openDialog('ask', undoForm(r, S().view.players));
  },
  askRoundEnd: () => A.openDialog('ask', { title: t('end_round'), text: t('end_round_q'), then: 'round_end' }),
  askFinish: () => A.openDialog('ask', { title: t('finish'), text: t('finish_q'), then: 'finish', confirmLabel: t('finish') }),
  setSeat(seat) {
    const s = S();
    if (!s.table) return;
    saved.set(`mj.seat.${s.table.id}`, seat);
    dispatch('seat/mine', seat);
  },
  resubmit(key) {
    const s = S();
    const d = s.drafts.find((x) => x.key === key);
    if (!d) return;
    setDrafts(s.drafts.filter((x) => x.key !== key));
    send({ path: d.path, body: d.body, label: d.label });
  },
  discardDraft: (key) => setDrafts(S().drafts.filter((x) => x.key !== key)),
  expandRound: (n) => dispatch('round/expand', n),
  openMend: (n) => { fx.returnFocus = document.activeElement; mend.open(n); },
  showQr: () => showQr(),
  openSummary: () => { location.hash = `${location.hash.replace(/^#/, '').replace(/&end=1/, '')}&end=1`; },
  followNext: (id) => followNext(id),
  ...endActions({ S, dispatch, toast, errorText, saved, startNext: () => startNext() }),
  ...clubActions({ S, dispatch, toast, errorText, saved, openCreated: (tb, body) => openCreated(tb, body), rulesets: () => S().rulesets }),
};

function send({ path, body, label }) {
  const s = S();
  return fx.outbox.add({ path, body, seen: s.view.version, label });
}

// the question "another phone has just recorded this: record it again?", with its two buttons
function askAgain(body, what) {
  fx.dialogSeq += 1;
  dispatch('dialog/open', { kind: 'ask', id: fx.dialogSeq, form: { then: 'again', body, title: t('dup_title'),
    text: t('dup_q', { what }), confirmLabel: t('dup_again'), cancelLabel: t('dup_no') } });
}

// may `body` be recorded once more, now that the same event stands (in 血流 a winner wins again; in
// 血战 it has left the round; a draw or an escape ends what it ends)?
function canAgain(s, body) {
  if (!s.view || !s.view.round || s.view.round.status !== 'playing') return false;
  const ctx = dialogCtx(s);
  const inRound = (i) => i == null || !ctx.out(i);
  if (body.type === 'hu') return (body.winners || []).every((w) => inRound(w.seat)) && inRound(body.from);
  if (body.type === 'peng') return inRound(body.seat) && inRound(body.from);
  if (body.type === 'penalty') return inRound(body.seat); // (a second 诈胡 of the same seat can happen)
  return false;
}

// -- the answer to an entry made on a sheet --------------------------------------------------------
// A sheet that records waits for the service's answer, so that a refusal is said on the sheet, which
// stays open with the entry as it was (never lost): what is refused, the same event another phone
// has just recorded (said so, or asked whether to record it again), another phone's change first
// (412: confirm again records it against the table as it is now). An entry that cannot be sent now
// (no network, the service busy) is in the outbox, sent when it can: the sheet closes (so it does
// after ANSWER_WAIT_MS without an answer), and its answer comes later as a toast, a draft or the
// question, like any entry sent from the outbox.
const ANSWER_WAIT_MS = 8000;
const waiting = new Map(); // outbox key → {item, dialogId, resolve, timer}

function awaitAnswer(item, dialogId) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => deliver(item, { kind: 'queued' }), ANSWER_WAIT_MS);
    waiting.set(item.key, { item, dialogId, resolve, timer });
  }).then((outcome) => {
    if (!outcome || outcome.kind === 'sent' || outcome.kind === 'queued') return true;
    if (outcome.kind === 'dup_ask') { askAgain(outcome.body, outcome.what); return undefined; }
    return outcome.text;
  });
}

// an entry's outcome: to the sheet that waits for it, if still open; else said on the table
function deliver(item, outcome) {
  const w = waiting.get(item.key);
  if (w) {
    waiting.delete(item.key);
    clearTimeout(w.timer);
    const d = S().dialog;
    if (d && d.id === w.dialogId) { w.resolve(outcome); return; }
    w.resolve(null);
  }
  outside(item, outcome);
}

// an outcome with no sheet waiting for it
function outside(item, outcome) {
  switch (outcome.kind) {
    case 'sent': case 'queued': return;
    case 'dup_ask': // (asked with its buttons; if a sheet is open meanwhile, kept as a draft with them)
      if (!S().dialog && S().route === 'table') askAgain(outcome.body, outcome.what);
      else {
        setDrafts([...S().drafts, { key: item.key, path: item.path, body: item.body, label: item.label, at: Date.now() }]);
        toast(t('dup_draft', { what: outcome.what }));
      }
      return;
    case 'stale':
      setDrafts([...S().drafts, { key: item.key, path: item.path, body: item.body, label: item.label, at: Date.now() }]);
      toast(t('err.stale_draft'));
      return;
    case 'dup_kong': case 'dup_done': toast(outcome.text); return;
    default: toast(item.label ? `${item.label}${t('label_sep')}${outcome.text}` : outcome.text);
  }
}

function setDrafts(drafts) {
  const s = S();
  saved.set(`mj.drafts.${s.table.id}`, drafts);
  dispatch('drafts/changed', drafts);
}

// a hand of the open dialog, once whole: scored (a win) or its waits (a draw), by the server
async function checkHand(path, how, seat) {
  const d0 = S().dialog;
  if (!d0) return;
  const at = (form) => path.reduce((o, k) => o[k], form);
  const hand = at(d0.form);
  const size = how === 'score' ? 14 : 13;
  if (!hand || hand.tiles.length + 3 * hand.melds.length !== size || hand.checking) return;
  const editHand = (fn) => { const d = S().dialog; if (d && d.id === d0.id) dispatch('dialog/edit', (f) => fn(at(f))); };
  editHand((x) => { x.checking = true; x.error = null; });
  const ctx = dialogCtx(S());
  const f = d0.form;
  const winner = how === 'score' ? Number(path[1]) : seat;
  try {
    if (how === 'score') {
      const win = winFlags(f);
      const score = await scoreHand(hand, { tile: f.tile, win, ruleset: ctx.ruleset, voidSuit: ctx.voids[winner] });
      editHand((x) => { x.checking = false; x.score = score; });
    } else {
      const ting = await tingHand(hand, { ruleset: ctx.ruleset, voidSuit: ctx.voids[winner] });
      let shanten = null; // (not ting: how far from it, said instead of only "not ting")
      if (!ting.ting) shanten = await shantenHand(hand, { ruleset: ctx.ruleset, voidSuit: ctx.voids[winner] }).catch(() => null);
      editHand((x) => { x.checking = false; x.ting = ting; x.shanten = shanten; });
    }
  } catch (e) {
    editHand((x) => { x.checking = false; x.score = null; x.ting = null; x.error = errorText(e); });
  }
}

// -- boot & routing ----------------------------------------------------------------------------
async function boot() {
  setLang(getLang());
  dispatch('lang/set', getLang());
  document.getElementById('toast-close').addEventListener('click', () => dispatch('toast/hide'));
  document.getElementById('toast-close').setAttribute('aria-label', t('close'));
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && S().dialog) A.closeDialog(); });
  try {
    const res = await fetch('/web/patterns.json');
    setPatterns(await res.json());
  } catch { setPatterns([]); }
  if ('serviceWorker' in navigator) navigator.serviceWorker.register('/sw.js').catch(() => {});
  window.addEventListener('hashchange', route);
  route();
}

function parseHash() {
  const p = new URLSearchParams(location.hash.replace(/^#/, ''));
  return { id: p.get('t'), token: p.get('k'), read: p.get('r'), end: p.get('end') === '1' };
}

function route() {
  const club = parseClubHash(location.hash);
  if (club) {
    leaveTable();
    A.openClubRoute(club);
    loadRulesets(false).then(() => A.clubSeats()); // (a club's table: its room's seats)
    return;
  }
  const { id, token, read, end } = parseHash();
  const s = S();
  if (id && (token || read)) {
    if (!s.table || s.table.id !== id || s.table.token !== (token || null) || s.route === 'start') openTable(id, token, read);
    else if (s.dialog) A.closeDialog();
    if (end) dispatch('route/end');
    else if (S().route === 'end') dispatch('route/back');
    if (end) A.loadSummary();
    return;
  }
  leaveTable();
  dispatch('route/start');
  loadRulesets(false);
}

function leaveTable() {
  for (const w of waiting.values()) { clearTimeout(w.timer); w.resolve(null); }
  waiting.clear();
  if (fx.live) fx.live.stop();
  fx.live = null;
  fx.outbox = null;
  fx.qrAsked = false;
  fx.seatAsked = false;
  fx.endShown = false;
  fx.heard = null;
}

async function loadRulesets(again) {
  if (S().rulesets && !again) return;
  let rulesets = again ? null : saved.get('mj.rulesets', null);
  if (rulesets) dispatch('rulesets/loaded', rulesets);
  try {
    const res = await call('GET', '/v1/rulesets');
    rulesets = res.data;
    saved.set('mj.rulesets', res.data);
    dispatch('rulesets/loaded', rulesets);
  } catch (e) { if (!rulesets) toast(errorText(e)); }
}

// -- start -------------------------------------------------------------------------------------
async function createTable() {
  const s = S();
  const st = s.start;
  const presets = s.rulesets ? s.rulesets.presets : { xuezhan: { preset: 'xuezhan', players: 4 } };
  const preset = st.preset && presets[st.preset] ? st.preset : (s.rulesets && s.rulesets.default) || Object.keys(presets)[0];
  const seats = presets[preset].players || 4;
  const names = Array.from({ length: seats }, (_, i) => (st.names[i] || '').trim());
  if (names.some((n) => !n)) { toast(t('err.names')); return; }
  const ruleset = Object.keys(st.opts).length ? { preset, ...st.opts } : preset;
  const body = { players: names, ruleset };
  if (st.stakes.on) {
    const whole = (v) => (String(v).trim() === '' ? NaN : Number(v));
    body.stakes = { coin_per_point: whole(st.stakes.cpp), fee: whole(st.stakes.fee),
      bankrolls: Array.from({ length: seats }, (_, i) => whole(st.stakes.bankrolls[i] ?? '1000')) };
    const all = [body.stakes.coin_per_point, body.stakes.fee, ...body.stakes.bankrolls];
    if (all.some((v) => !Number.isSafeInteger(v) || v < 0) || body.stakes.coin_per_point < 1) { toast(t('codes.bad_stakes')); return; }
  }
  const tb = await createTableRequest(body, (busy) => dispatch('start/edit', (x) => { x.busy = busy; }));
  if (!tb) return;
  dispatch('start/reset');
  openCreated(tb, body);
}

// POST /v1/tables, retried with the same Idempotency-Key (a retry of the same body reuses its key)
let lastCreate = { key: null, body: null };
export async function createTableRequest(body, busy) {
  const bodyText = JSON.stringify(body);
  if (lastCreate.body !== bodyText) lastCreate = { key: uuid4(), body: bodyText };
  busy(true);
  let res = null, err = null;
  for (let attempt = 0; attempt < 3 && !res; attempt += 1) {
    try {
      res = await call('POST', '/v1/tables', { body, headers: { 'Idempotency-Key': lastCreate.key } });
    } catch (e) {
      err = e;
      if (!e.retryable) break;
      await new Promise((r) => setTimeout(r, 1000 * (attempt + 1)));
    }
  }
  busy(false);
  if (!res) { toast(t('err.create_failed') + errorText(err)); return null; }
  return res.data;
}

export function openCreated(tb, body) {
  dispatch('toast/hide'); // (a message about the start page is not about the new table)
  remember({ id: tb.id, token: tb.token, read: tb.read_token, players: tb.players, created: { ruleset: body.ruleset, stakes: body.stakes || null } });
  saved.set(`mj.view.${tb.id}`, { ...tb, round: null, rounds: [] });
  fx.showShareNext = true;
  location.hash = `t=${tb.id}&k=${tb.token}&r=${tb.read_token}`;
}

// -- the next table ------------------------------------------------------------------------------
// POST …/next (the finished table's write token): the same names, room, options and coins; the new
// table takes this one's tokens, so this phone (and every other, see effects) opens it with them.
// Another phone's start first (409 table_followed) names the same table: it is opened all the same.
let nextKey = { table: null, key: null };
async function startNext() {
  const s = S();
  if (!s.table || !s.table.token) return;
  if (nextKey.table !== s.table.id) nextKey = { table: s.table.id, key: uuid4() };
  try {
    const res = await call('POST', tablePath(s.table.id, '/next'), { body: {}, token: s.table.token, headers: { 'Idempotency-Key': nextKey.key } });
    followNext(res.data.id);
  } catch (e) {
    if (e instanceof ApiError && e.code === 'table_followed' && e.problem && e.problem.next) followNext(e.problem.next);
    else toast(t('err.create_failed') + errorText(e));
  }
}

// open the table that follows this one with the tokens this phone holds (and its seat: not asked again)
function followNext(nextId) {
  const s = S();
  if (!s.table || !nextId || nextId === s.table.id) return;
  if (s.mySeat != null) saved.set(`mj.seat.${nextId}`, s.mySeat);
  const known = saved.get('mj.tables', []).find((x) => x.id === s.table.id) || {};
  remember({ id: nextId, token: s.table.token, read: s.table.read, players: s.view ? s.view.players : null, created: known.created || null });
  const k = s.table.token ? `&k=${s.table.token}` : '';
  const r = s.table.read ? `&r=${s.table.read}` : '';
  location.hash = `t=${nextId}${k}${r}`;
}

// -- the table ---------------------------------------------------------------------------------
function openTable(id, token, read) {
  leaveTable();
  remember({ id, token, read });
  const view = saved.get(`mj.view.${id}`, null);
  const records = saved.get(`mj.log.${id}`, []);
  const mySeat = token ? saved.get(`mj.seat.${id}`, null) : null;
  const drafts = token ? saved.get(`mj.drafts.${id}`, []) : [];
  dispatch('route/table', { id, token, read, view, records, mySeat, drafts, showShare: !!fx.showShareNext });
  fx.showShareNext = false;
  dispatch('records/changed', { records, now: Date.now(), initial: true });
  let outbox = null;
  if (token) {
    outbox = new Outbox({
      tableId: id, token,
      onChange: (items, err) => {
        if (fx.outbox !== outbox) return; // (an outbox of a table left behind sends on by itself)
        dispatch('outbox/changed', items.slice());
        if (err && err.offline) dispatch('net/online', false);
        if (err && err.retryable) for (const item of items) if (waiting.has(item.key)) deliver(item, { kind: 'queued' });
      },
      onSent: (item, data) => {
        if (fx.outbox !== outbox || !data) return;
        dispatch('write/landed', data);
        if (S().toast) dispatch('toast/hide');
        if (fx.live) fx.live.noteWrite(data);
        deliver(item, { kind: 'sent' });
      },
      onRefused: async (item, err) => {
        if (fx.outbox !== outbox) return;
        const outcome = await refused(item, err);
        if (fx.outbox !== outbox) return;
        deliver(item, outcome);
        if (fx.live) fx.live.refresh({ fresh: err.code === 'table_finished' }); // (its version says nothing of it)
      },
    });
    fx.outbox = outbox;
    dispatch('outbox/changed', outbox.items.slice());
  }
  const live = new TableLive({
    id, token: token || read, view, records,
    onMode: (mode) => { if (fx.live === live) dispatch('live/mode', mode); },
    onView: (v) => {
      if (fx.live !== live) return;
      dispatch('view/received', v);
      fx.heard = id; // (the service has answered this table's view in this visit: see effects)
      if (fx.outbox) fx.outbox.flush();
    },
    onRecords: () => {
      if (fx.live !== live) return;
      dispatch('records/changed', { records: live.records.slice(), now: Date.now() });
    },
    onStatus: (online, err) => {
      if (fx.live !== live) return;
      dispatch('net/online', online);
      if (err && !err.offline && err.status && [401, 403, 404].includes(err.status)) toast(errorText(err));
    },
  });
  fx.live = live;
  window.scrollTo(0, 0);
  live.start();
}

// What a refusal means, as an outcome for deliver(): the same kong, or the same event, that another
// phone has just recorded (told so; asked whether to record it again only where it can be: 血流's
// second 自摸 — in 血战 that seat has won and left, and a draft of it could never be recorded); a 412
// (another phone changed the table first: recorded against the table as it is now, from the sheet
// or as a draft); any other refusal in words. Another phone's record may not have reached this one
// yet (its stream late, or cut): the log is read first.
async function refused(item, err) {
  const outbox = fx.outbox;
  const twice = (s) => item.body && recentDuplicate(s, item.body, Date.now(), 60000);
  if (item.body && ([412, 422].includes(err.status) || err.code === 'too_many_copies') && !twice(S()) && fx.live) {
    await fx.live.catchUp();
    if (fx.outbox !== outbox) return { kind: 'refused', text: errorText(err) }; // (the phone left that table meanwhile)
  }
  const s = S();
  const dup = twice(s);
  const what = dup ? `#${dup.seq} ${describe(dup, s.view.players)}` : '';
  if (dup && (item.body.type === 'kong' || (err.code === 'too_many_copies'))) return { kind: 'dup_kong', text: t('dup_kong', { what }) };
  if (err.code === 'table_finished') dispatch('table/finished', null); // (another phone finished it: the end screen follows)
  if (dup && (err.status === 412 || err.status === 422)) {
    return canAgain(s, item.body) ? { kind: 'dup_ask', body: item.body, what } : { kind: 'dup_done', text: t('dup_done', { what }) };
  }
  if (err.status === 412) return { kind: 'stale', text: t('err.stale_retry') };
  return { kind: 'refused', text: errorText(err) };
}

async function showQr() {
  const s = S();
  const { write } = shareLinks(s, location.origin);
  if (!write) return;
  fx.qrAsked = true;
  try {
    const res = await fetch('/web/qr', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text: write }), cache: 'no-store' });
    if (!res.ok) throw new ApiError(res.status, {});
    const url = URL.createObjectURL(await res.blob());
    if (S().table && S().table.id === s.table.id) dispatch('share/qr', url);
  } catch (e) { toast(errorText(e instanceof ApiError ? e : new ApiError(0, {}))); }
}

async function finishTable() {
  const s = S();
  try {
    const res = await call('POST', tablePath(s.table.id, '/finish'), { token: s.table.token });
    dispatch('table/finished', (res.data && res.data.finished_at) || null);
    if (fx.live) fx.live.refresh({ fresh: true });
    A.openSummary();
  } catch (e) {
    toast(errorText(e));
  }
}

// -- the transfers of a round's records, worked out by POST /v1/rounds/settle ---------------------
// (the log keeps events, not transfers): what each record paid, and what each void took back
async function explainRound(s, n) {
  const ruleset = s.view.ruleset;
  const out = {};
  const known = [...(s.view.rounds || []), s.view.round].find((r) => r && r.number === n);
  const dealer = known ? known.dealer : null; // (a round_start that names no dealer)
  const { body, seqs } = settleRequest(s.records, n, ruleset, null, dealer);
  if (seqs.length) {
    const res = await call('POST', '/v1/rounds/settle', { body });
    for (const q of seqs) out[q] = [];
    for (const tr of res.data.transfers) out[seqs[tr.event]].push({ ...tr, event: seqs[tr.event] });
  }
  for (const v of roundLog(s.records, n).filter((r) => r.type === 'void')) {
    const target = s.records.find((r) => r.seq === v.target);
    if (!target || !ROUND_EVENTS.includes(target.type)) continue;
    if (s.transfers[target.seq] && n === (s.view.round || {}).number) { out[`v${v.seq}`] = s.transfers[target.seq]; continue; }
    try {
      const before = settleRequest(s.records, n, ruleset, target.seq, dealer);
      const res = await call('POST', '/v1/rounds/settle', { body: before.body });
      const at = before.seqs.indexOf(target.seq);
      out[`v${v.seq}`] = res.data.transfers.filter((tr) => tr.event === at).map((tr) => ({ ...tr, event: target.seq }));
    } catch { /* shown without */ }
  }
  const scores = {};
  for (const r of s.records.filter((x) => x.round === n && x.type === 'hu')) {
    for (const w of r.winners.filter((x) => x.hand)) {
      const k = `${r.seq}:${w.seat}`;
      if (s.scores[k]) continue;
      try {
        const win = { tile: r.tile, self_drawn: r.from == null };
        for (const f of ['after_kong', 'robbing_kong', 'last_tile', 'heavenly', 'earthly']) if (r[f]) win[f] = true;
        const res = await call('POST', '/v1/hands/score', { body: { hand: w.hand, win, ruleset } });
        scores[k] = { fan: res.data.fan, raw_fan: res.data.raw_fan, capped: res.data.capped, patterns: res.data.patterns };
      } catch { /* shown without its fan */ }
    }
  }
  if (Object.keys(scores).length) dispatch('scores/known', scores);
  return out;
}

const logKey = (s, n) => `${n}:${roundLog(s.records, n).map((r) => `${r.seq}${r.voided ? 'v' : ''}`).join(',')}`;

// fn, run one at a time: a call while it runs runs it once more afterwards
function serial(fn) {
  let busy = false, again = false;
  return async function run() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      do { again = false; await fn(); } while (again);
    } finally { busy = false; }
  };
}

const currentTransfers = serial(async () => {
  const s = S();
  if (s.route === 'start' || !s.view || !s.view.round) return;
  const n = s.view.round.number;
  const key = logKey(s, n);
  if (key === s.roundKey) return;
  try {
    const transfers = await explainRound(s, n);
    if (S().table && S().table.id === s.table.id) dispatch('transfers/known', { transfers, key });
  } catch { /* shown without transfers */ }
});

const roundDetails = serial(async () => {
  const s = S();
  const n = s.expanded;
  if (n == null || !s.view) return;
  const key = logKey(s, n);
  if (s.details[n] && s.details[n].key === key) return;
  try {
    const transfers = await explainRound(s, n);
    dispatch('round/details', { n, details: { key, transfers } });
  } catch { /* shown without transfers */ }
});

// -- drawing and the effects that follow the state ------------------------------------------------
function draw(s) {
  const screens = { club: renderClub, clubs: renderClubHome };
  patch(document.getElementById('app'), (screens[s.route] || renderApp)(s, A));
  const o = document.getElementById('overlay');
  if (s.dialog) {
    const ctx = s.dialog.kind === 'glossary' || !s.view ? null : dialogCtx(s);
    patch(o, renderDialog(s.dialog, ctx, dialogActions));
    o.hidden = false;
  } else if (!o.hidden) {
    o.hidden = true;
    patch(o, []);
  }
  const box = document.getElementById('toast');
  const text = s.toast ? s.toast.text : '';
  if (document.getElementById('error').textContent !== text) document.getElementById('error').textContent = text;
  box.hidden = !text;
}

function effects(s, prev) {
  const tableId = s.table && s.table.id;
  // the toast goes away by itself after 20 s
  if (s.toast && s.toast !== prev.toast) {
    clearTimeout(fx.toastTimer);
    const id = s.toast.id;
    fx.toastTimer = setTimeout(() => dispatch('toast/hide', id), 20000);
  }
  if (!tableId) return;
  if (s.view && s.view !== prev.view) {
    saved.set(`mj.view.${tableId}`, s.view);
    if (!prev.view || prev.view.players !== s.view.players) remember({ id: tableId, players: s.view.players });
  }
  if (s.records !== prev.records && s.records.length) saved.set(`mj.log.${tableId}`, s.records.slice(-LOG_KEPT));
  // the end screen's picture: drawn for the summary shown, in the phone's language
  const rounds = s.view && s.view.rounds ? s.view.rounds.map((r) => `${r.number}:${r.status}:${r.deltas}`).join(';') : ''; // (the chart's)
  if (s.route === 'end' && s.summary && (fx.drawn.summary !== s.summary || fx.drawn.lang !== s.lang || fx.drawn.rounds !== rounds)) {
    fx.drawn = { summary: s.summary, lang: s.lang, rounds };
    A.drawPicture();
  }
  // a finished table (opened so, finished here, or learnt from the server): the end screen, once;
  // from there 看各局记录 comes back to the table, which then stays
  const finished = !!(s.finished || (s.view && s.view.finished_at));
  // another phone started the next table while this one looked at the finished one: it follows (a
  // finished table opened later, whose first answer names its next already, stays: 去下一桌 leads on)
  if (s.view && s.view.next && prev.view && !prev.view.next && fx.heard === tableId && prev.table && prev.table.id === tableId) {
    setTimeout(() => { if (S().table && S().table.id === tableId) followNext(s.view.next); });
    return;
  }
  if (finished && s.route === 'end') fx.endShown = true;
  else if (finished && s.route === 'table' && !fx.endShown) {
    fx.endShown = true;
    setTimeout(() => { if (S().route === 'table' && S().table && S().table.id === tableId) A.openSummary(); });
  }
  if (s.route !== 'table') return;
  mend.effects(s);
  // what the current round's records paid, whenever they change
  if (s.view && (s.records !== prev.records || s.view.round !== (prev.view && prev.view.round))) currentTransfers();
  if (s.expanded != null && (s.expanded !== prev.expanded || s.records !== prev.records)) roundDetails();
  // the QR code of a new table, at once
  if (s.showShare && s.table.token && s.view && !s.view.round && !s.qr && !fx.qrAsked) setTimeout(showQr);
  // a phone that joins asks once which seat is its own
  if (s.table.token && s.view && !finished && s.mySeat == null && !fx.seatAsked && !s.dialog) {
    fx.seatAsked = true;
    setTimeout(() => { if (S().mySeat == null && !S().dialog && S().route === 'table') A.openDialog('whoAmI'); });
  }
  // a round that starts: its buttons in sight (the share section above them is gone)
  const round = s.view && s.view.round;
  const before = prev.view && prev.view.round;
  if (round && round.status === 'playing' && (!before || before.number !== round.number) && prev.table && prev.table.id === tableId) {
    requestAnimationFrame(() => {
      const el = document.querySelector('[data-testid="record-hu"]');
      const topBar = document.querySelector('.top');
      if (!el) return;
      const r = el.closest('.actions').getBoundingClientRect();
      const over = topBar ? topBar.getBoundingClientRect().bottom : 0;
      if (r.top < over || r.bottom > window.innerHeight) window.scrollBy(0, r.top - over - 8);
    });
  }
}

store.subscribe((s, prev) => { draw(s); effects(s, prev); });
draw(S());
boot();
