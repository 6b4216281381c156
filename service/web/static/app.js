// The table companion: start a table, share it, record a round by tapping, see the
// balances live on every phone. Speaks only the public HTTP API (/v1/...), plus POST /web/qr
// for the QR picture of the share link.
import { call, tablePath, uuid4, ApiError, apiKey, setApiKey } from '/web/api.js';
import { t, getLang, setLang } from '/web/i18n.js';
import { h, field } from '/web/dom.js';
import { TableLive } from '/web/live.js';
import { meldsBySeat, winsBySeat, keptHands } from '/web/round.js';
import { Outbox } from '/web/outbox.js';
import { describe, transferWords, seatName, setPatterns } from '/web/words.js';
import {
  openDialog, closeDialog, dialogOpen, roundStartDialog, pengDialog, kongDialog, huDialog, drawDialog,
  escapeDialog, undoDialog, confirmDialog, buyInDialog,
} from '/web/dialogs.js';

const ROUND_EVENTS = ['peng', 'kong', 'hu', 'draw', 'escape'];
const OPTION_FLAGS = ['haidi', 'jingoudiao', 'menqing', 'zhongzhang', 'jiaxinwu', 'kaertiao', 'yitiaolong', 'dianpao_pinghu',
  'xueliu_dajiao_winners'];
// an option shown only where it means something
const OPTION_SHOWN = { xueliu_dajiao_winners: (preset) => preset.mode === 'xueliu' };
const root = () => document.getElementById('app');

const S = {
  rulesets: null, tableId: null, token: null, readToken: null, view: null, records: [],
  online: true, pending: [], live: null, outbox: null, transfers: new Map(), roundKey: null,
  scores: new Map(), ownDeltas: new Map(), qr: null, showShare: false,
};

// -- storage (the phone keeps its tables, the last view of each, and the language) --------------
const store = {
  get(k, d) { try { const v = localStorage.getItem(k); return v == null ? d : JSON.parse(v); } catch { return d; } },
  set(k, v) { try { localStorage.setItem(k, JSON.stringify(v)); } catch { /* full or private */ } },
};

function remember(entry) {
  const list = store.get('mj.tables', []).filter((x) => x.id !== entry.id);
  const old = store.get('mj.tables', []).find((x) => x.id === entry.id) || {};
  list.unshift({ ...old, ...Object.fromEntries(Object.entries(entry).filter(([, v]) => v != null)), at: Date.now() });
  store.set('mj.tables', list.slice(0, 10));
}

// -- errors in plain words -------------------------------------------------------------------
export function errorText(e) {
  if (!(e instanceof ApiError)) return String(e && e.message || e);
  const p = e.problem || {};
  const detail = p.detail || p.title || '';
  const code = e.code;
  const codeWords = code && t(`codes.${code}`) !== `codes.${code}` ? t(`codes.${code}`) : '';
  switch (true) {
    case e.status === 0: return t('err.offline');
    case e.status === 412: return t('err.stale');
    case e.status === 403: return t('err.read_only');
    case e.status === 401: return /api.?key/i.test(`${code} ${detail} ${p.title || ''}`) ? t('err.api_key') : t('err.auth');
    case e.status === 404: return t('err.gone');
    case e.status === 429 || e.status >= 500: return t('err.busy');
    case e.status === 409:
      if (code === 'void_conflict' || code === 'already_voided') return `${t(`err.${code}`)} (${detail})`;
      return t('err.conflict') + detail;
    case e.status === 422: return `${t('err.rule')}${codeWords ? `${codeWords} ` : ''}(${detail})`;
    default: return t('err.bad') + detail;
  }
}

let errorTimer = null;
function showError(text) {
  const box = document.getElementById('toast');
  document.getElementById('error').textContent = text;
  box.hidden = !text;
  clearTimeout(errorTimer);
  if (text) errorTimer = setTimeout(() => showError(''), 20000);
}

// -- boot & routing ----------------------------------------------------------------------------
async function boot() {
  setLang(getLang());
  document.getElementById('toast-close').addEventListener('click', () => showError(''));
  document.getElementById('toast-close').setAttribute('aria-label', t('close'));
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
  return { id: p.get('t'), token: p.get('k'), read: p.get('r') };
}

function route() {
  closeDialog();
  if (S.live) S.live.stop();
  S.live = null; S.liveMode = 'connecting'; S.outbox = null; S.view = null; S.records = []; S.transfers = new Map(); S.scores = new Map(); S.ownDeltas = new Map(); S.roundKey = null;
  const { id, token, read } = parseHash();
  if (id && (token || read)) openTable(id, token, read);
  else renderStart();
}

function langButton(rerender) {
  return h('button', { type: 'button', class: 'lang', testid: 'lang', 'aria-label': t('lang_label'),
    onclick: () => { setLang(getLang() === 'zh' ? 'en' : 'zh'); rerender(); if (dialogOpen()) closeDialog(); } },
  t('lang_switch'));
}

// a room's name in the current language (a preset the app does not know: its id)
const presetName = (name) => (t(`presets.${name}`) !== `presets.${name}` ? t(`presets.${name}`) : name);

// -- start -------------------------------------------------------------------------------------
let startState = null;

async function renderStart() {
  if (!startState) {
    startState = { preset: null, names: [], opts: {}, key: null, keyBody: null, busy: false,
      stakes: { on: false, cpp: '1', fee: '0', bankrolls: [] } };
  }
  if (!S.rulesets) {
    S.rulesets = store.get('mj.rulesets', null);
    try {
      const res = await call('GET', '/v1/rulesets');
      S.rulesets = res.data;
      store.set('mj.rulesets', res.data);
    } catch (e) { if (!S.rulesets) showError(errorText(e)); }
  }
  drawStart();
}

function drawStart() {
  const st = startState;
  const presets = S.rulesets ? S.rulesets.presets : { xuezhan: { preset: 'xuezhan', players: 4 } };
  if (!st.preset || !presets[st.preset]) st.preset = (S.rulesets && S.rulesets.default) || Object.keys(presets)[0];
  const preset = presets[st.preset];
  const seats = preset.players || 4;
  const winds = t('wind');
  const select = h('select', { testid: 'ruleset', onchange: (e) => { st.preset = e.target.value; st.opts = {}; drawStart(); } },
    Object.keys(presets).map((name) => h('option', { value: name, selected: name === st.preset }, presetName(name))));
  const opt = (k) => (k in st.opts ? st.opts[k] : preset[k]);
  const setOpt = (k, v) => { if (v === preset[k]) delete st.opts[k]; else st.opts[k] = v; };
  const options = [];
  if ('cap' in preset) {
    options.push(field(t('cap'), h('select', { testid: 'opt-cap', onchange: (e) => setOpt('cap', e.target.value ? Number(e.target.value) : null) },
      h('option', { value: '', selected: opt('cap') == null }, t('cap_none')),
      [1, 2, 3, 4, 5, 6, 7, 8].map((n) => h('option', { value: n, selected: opt('cap') === n }, String(n))))));
  }
  if ('zimo' in preset) {
    options.push(field(t('zimo'), h('select', { testid: 'opt-zimo', onchange: (e) => setOpt('zimo', e.target.value) },
      ['none', 'base', 'fan'].map((v) => h('option', { value: v, selected: opt('zimo') === v }, t(`zimo_${v}`))))));
  }
  if ('dianganghua' in preset) {
    options.push(field(t('dianganghua'), h('select', { testid: 'opt-dianganghua', onchange: (e) => setOpt('dianganghua', e.target.value) },
      ['self_draw', 'discard'].map((v) => h('option', { value: v, selected: opt('dianganghua') === v }, t(`dgh_${v}`))))));
  }
  for (const k of OPTION_FLAGS.filter((f) => f in preset && (!OPTION_SHOWN[f] || OPTION_SHOWN[f](preset)))) {
    options.push(h('label', { class: 'check' }, h('input', { type: 'checkbox', testid: `opt-${k}`, checked: !!opt(k),
      onchange: (e) => setOpt(k, e.target.checked) }), t(k)));
  }
  options.push(field(t('api_key'), h('input', { type: 'password', testid: 'api-key', autocomplete: 'off', value: apiKey(),
    onchange: (e) => { setApiKey(e.target.value.trim()); S.rulesets = null; renderStart(); } }), t('api_key_hint')));
  const recent = store.get('mj.tables', []);
  // stakes (游戏币): coins per point, a fee per round, each seat's bankroll
  const sk = st.stakes;
  const num = (testid, value, onInput) => h('input', { type: 'number', min: 0, step: 1, inputmode: 'numeric', testid, value,
    oninput: (e) => onInput(e.target.value) });
  const stakes = h('fieldset', { class: 'stakes' }, h('legend', {}, t('stakes')),
    h('label', { class: 'check' }, h('input', { type: 'checkbox', testid: 'stakes-on', checked: sk.on,
      onchange: (e) => { sk.on = e.target.checked; drawStart(); } }), t('stakes_on')),
    sk.on ? [
      field(t('coin_per_point'), num('stakes-cpp', sk.cpp, (v) => { sk.cpp = v; })),
      field(t('fee'), num('stakes-fee', sk.fee, (v) => { sk.fee = v; })),
      Array.from({ length: seats }, (_, i) => field(`${st.names[i] || winds[i]} · ${t('bankroll')}`,
        num(`stakes-bankroll-${i}`, sk.bankrolls[i] ?? '1000', (v) => { sk.bankrolls[i] = v; }))),
    ] : null);
  const form = h('form', { class: 'start', onsubmit: (e) => { e.preventDefault(); createTable(seats); } },
    field(t('room'), select),
    h('fieldset', {}, h('legend', {}, t('players')), Array.from({ length: seats }, (_, i) => field(
      `${t('player_n', { n: i + 1 })} · ${winds[i]}`,
      h('input', { type: 'text', testid: `player-${i}`, maxlength: 40, autocomplete: 'off', value: st.names[i] || '',
        placeholder: winds[i], oninput: (e) => { st.names[i] = e.target.value; } })))),
    stakes,
    h('details', { class: 'options', open: st.optionsOpen, ontoggle: (e) => { st.optionsOpen = e.target.open; } },
      h('summary', {}, t('options')), options),
    h('button', { type: 'submit', class: 'primary big', testid: 'create-table', disabled: st.busy }, st.busy ? t('creating') : t('create')));
  root().replaceChildren(
    h('header', { class: 'bar' }, h('h1', {}, t('app')), langButton(drawStart)),
    h('main', { class: 'page' }, h('h2', {}, t('start_title')), form,
      recent.length ? h('section', { class: 'recent' }, h('h2', {}, t('recent')), h('ul', {}, recent.map((r) => h('li', {},
        h('a', { href: `#t=${r.id}${r.token ? `&k=${r.token}` : ''}${r.read ? `&r=${r.read}` : ''}` },
          (r.players || []).join(' · ') || r.id))))) : null));
}

async function createTable(seats) {
  const st = startState;
  const names = Array.from({ length: seats }, (_, i) => (st.names[i] || '').trim());
  if (names.some((n) => !n)) { showError(t('err.names')); return; }
  const ruleset = Object.keys(st.opts).length ? { preset: st.preset, ...st.opts } : st.preset;
  const body = { players: names, ruleset };
  if (st.stakes.on) {
    const whole = (v) => (String(v).trim() === '' ? NaN : Number(v));
    body.stakes = { coin_per_point: whole(st.stakes.cpp), fee: whole(st.stakes.fee),
      bankrolls: Array.from({ length: seats }, (_, i) => whole(st.stakes.bankrolls[i] ?? '1000')) };
    const all = [body.stakes.coin_per_point, body.stakes.fee, ...body.stakes.bankrolls];
    if (all.some((v) => !Number.isSafeInteger(v) || v < 0) || body.stakes.coin_per_point < 1) { showError(t('codes.bad_stakes')); return; }
  }
  const bodyText = JSON.stringify(body);
  if (st.keyBody !== bodyText) { st.key = uuid4(); st.keyBody = bodyText; } // a retry reuses its key
  st.busy = true; drawStart();
  let res = null, err = null;
  for (let attempt = 0; attempt < 3 && !res; attempt += 1) {
    try {
      res = await call('POST', '/v1/tables', { body, headers: { 'Idempotency-Key': st.key } });
    } catch (e) {
      err = e;
      if (!e.retryable) break;
      await new Promise((r) => setTimeout(r, 1000 * (attempt + 1)));
    }
  }
  st.busy = false;
  if (!res) { drawStart(); showError(t('err.create_failed') + errorText(err)); return; }
  const tb = res.data;
  startState = null;
  remember({ id: tb.id, token: tb.token, read: tb.read_token, players: tb.players });
  store.set(`mj.view.${tb.id}`, { ...tb, round: null, rounds: [] });
  S.showShare = true;
  location.hash = `t=${tb.id}&k=${tb.token}&r=${tb.read_token}`;
}

// -- the table ---------------------------------------------------------------------------------
function openTable(id, token, read) {
  Object.assign(S, { tableId: id, token, readToken: read, qr: null, qrAsked: false });
  remember({ id, token, read });
  S.view = store.get(`mj.view.${id}`, null);
  if (token) {
    S.outbox = new Outbox({
      tableId: id, token,
      onChange: (items, err) => {
        if (S.tableId !== id) return; // (an outbox of a table left behind sends on by itself)
        S.pending = items;
        if (err) S.online = !err.offline ? S.online : false;
        renderStatus();
      },
      onSent: (item, data) => {
        if (S.tableId !== id) return;
        S.online = true;
        if (data && Array.isArray(data.transfers)) S.transfers.set(data.seq, data.transfers);
        if (data && data.deltas && data.voided) S.ownDeltas.set(data.seq, data.deltas);
        showError('');
        if (S.live) S.live.noteWrite(data);
        render();
      },
      onRefused: (item, err) => {
        if (S.tableId !== id) return;
        showError(`${describeItem(item)}: ${errorText(err)}`);
        S.live && S.live.refresh();
      },
    });
    S.pending = S.outbox.items;
  }
  // the transfers of the round's records, worked out whenever they change
  const transfers = serial(async () => {
    if (S.live !== live) return;
    await roundTransfers();
    if (S.live === live) render();
  });
  const live = new TableLive({
    id, token: token || read, view: S.view,
    onMode: (mode) => { S.liveMode = mode; renderStatus(); },
    onView: (view) => {
      if (S.live !== live) return;
      S.view = view;
      store.set(`mj.view.${id}`, view);
      remember({ id, players: view.players });
      render();
      if (S.outbox) S.outbox.flush();
    },
    onRecords: () => {
      if (S.live !== live) return;
      render();
      transfers(); // (renders again when they are known)
    },
    onStatus: (online, err) => {
      const was = S.online;
      S.online = online;
      if (err && !err.offline && err.status && [401, 403, 404].includes(err.status)) showError(errorText(err));
      if (was !== online) renderStatus();
    },
  });
  S.live = live;
  S.records = live.records;
  render();
  window.scrollTo(0, 0);
  live.start();
}

const players = () => (S.view ? S.view.players : []);
const describeItem = (item) => item.label || '';

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

const eventBody = (r) => Object.fromEntries(Object.entries(r).filter(([k]) => !['seq', 'at', 'round', 'voided'].includes(k)));

// transfers of the current round's events, from POST /v1/rounds/settle (the log keeps events,
// not transfers); each settle index maps back to the record's seq
async function roundTransfers() {
  const view = S.view;
  if (!view || !view.round) return;
  const recs = S.records.filter((r) => r.round === view.round.number && ROUND_EVENTS.includes(r.type) && !r.voided);
  const key = `${view.round.number}:${recs.map((r) => r.seq).join(',')}`;
  if (key === S.roundKey) return;
  const map = S.transfers; // (this table's, even if the phone opens another meanwhile)
  try {
    const body = { ruleset: view.ruleset, dealer: view.round.dealer, events: recs.map(eventBody) };
    if ((view.round.voids || []).some((v) => v)) body.voids = view.round.voids;
    const res = await call('POST', '/v1/rounds/settle', { body });
    for (const r of recs) map.set(r.seq, []);
    for (const tr of res.data.transfers) map.get(recs[tr.event].seq).push({ ...tr, event: recs[tr.event].seq });
    if (map === S.transfers) S.roundKey = key;
  } catch { /* shown without transfers */ }
  await scoreWinners(recs, view.ruleset);
}

// fan words of winners given with a hand: scored once by POST /v1/hands/score
async function scoreWinners(recs, ruleset) {
  const scores = S.scores;
  for (const r of recs.filter((x) => x.type === 'hu')) {
    for (const w of r.winners.filter((x) => x.hand)) {
      const k = `${r.seq}:${w.seat}`;
      if (scores.has(k)) continue;
      try {
        const win = { tile: r.tile, self_drawn: r.from == null };
        for (const f of ['after_kong', 'robbing_kong', 'last_tile', 'heavenly', 'earthly']) if (r[f]) win[f] = true;
        const res = await call('POST', '/v1/hands/score', { body: { hand: w.hand, win, ruleset } });
        scores.set(k, { fan: res.data.fan, patterns: res.data.patterns });
      } catch { scores.set(k, null); }
    }
  }
}

function winInfo(rec) {
  return (seat) => {
    const w = (rec.winners || []).find((x) => x.seat === seat);
    if (!w) return null;
    if (w.hand) return S.scores.get(`${rec.seq}:${seat}`) || null;
    return { fan: w.fan, patterns: w.patterns || [] };
  };
}

// -- recording ---------------------------------------------------------------------------------
function context() {
  const view = S.view;
  const round = view.round || { won: [], left: [], voids: [] };
  const xueliu = view.ruleset.mode === 'xueliu';
  const n = view.players.length;
  const recs = S.records.filter((r) => r.round === round.number && !r.voided);
  const kept = keptHands(recs, n);
  return {
    view, players: view.players, ruleset: view.ruleset, voids: round.voids || [], xueliu,
    suits: n === 3 ? ['p', 's'] : ['m', 'p', 's'], // 三人两房: 筒 and 条 only
    // out of the round: left it, or won (but in 血流 a winner plays on, §13.1)
    out: (i) => round.left.includes(i) || (!xueliu && round.won.includes(i)),
    won: (i) => round.won.includes(i),
    // 血流: a seat that has won may not 碰 or 直杠 (§13.2)
    claims: (i) => !(xueliu && round.won.includes(i)),
    melds: (i) => meldsBySeat(recs, n)[i],
    kept: (i) => (xueliu ? kept[i] : null),
    roundRecords: () => recs,
    errorText,
    record: (body) => {
      const label = describe(body, view.players, round.number);
      S.outbox.add({ path: tablePath(S.tableId, '/events'), body, seen: S.view.version, label });
    },
    voidRecord: (rec) => {
      const label = `${t('undo')} #${rec.seq}: ${describe(rec, view.players)}`;
      S.outbox.add({ path: tablePath(S.tableId, `/events/${rec.seq}/void`), body: undefined, seen: S.view.version, label });
    },
  };
}

function lastUndoable() {
  for (let i = S.records.length - 1; i >= 0; i -= 1) {
    const r = S.records[i];
    if (r.type !== 'void' && !r.voided) return r;
  }
  return null;
}

// -- rendering ---------------------------------------------------------------------------------
function renderStatus() {
  const el = document.getElementById('status');
  if (!el) return;
  el.dataset.live = S.liveMode;
  el.replaceChildren(...statusParts());
  const list = document.getElementById('pending');
  if (list) list.replaceChildren(...pendingParts());
}

function statusParts() {
  return [
    h('span', { class: S.online ? 'ok' : 'bad', testid: 'online' }, S.online ? t('online') : t('offline')),
    h('span', {}, `${t('pending')} `, h('b', { testid: 'pending-count' }, String(S.pending.length))),
    S.view ? h('span', {}, `${t('version')} `, h('b', { testid: 'version' }, String(S.view.version))) : null,
    S.liveMode === 'connecting' ? null : h('span', { class: 'muted', testid: 'live-mode' }, t(`live_${S.liveMode}`)),
    S.token ? null : h('span', { class: 'tag' }, t('read_only')),
  ];
}

function pendingParts() {
  if (!S.pending.length) return [];
  return [h('h3', {}, t('pending_list')), h('ul', {}, S.pending.map((i, n) => h('li', {}, i.label,
    S.outbox && !(n === 0 && S.outbox.sending) ? h('button', { type: 'button', class: 'small', testid: `pending-cancel-${n}`,
      'aria-label': `${t('cancel')}: ${i.label}`, onclick: () => S.outbox.cancel(i.key) }, t('cancel')) : null)))];
}

function render() {
  if (!S.tableId) return;
  const view = S.view;
  const ps = players();
  const round = view && view.round;
  const playing = round && round.status === 'playing';
  const wins = round ? winsBySeat(S.records.filter((r) => r.round === round.number && !r.voided), ps.length) : [];
  const seats = ps.map((name, i) => {
    const tags = [];
    if (round && round.dealer === i && playing) tags.push(t('dealer'));
    if (round && round.won.includes(i)) tags.push(wins[i] > 1 ? t('won_n', { n: wins[i] }) : t('won'));
    if (round && round.left.includes(i)) tags.push(t('left'));
    const delta = round ? round.deltas[i] : 0;
    return h('div', { class: `seat${round && round.dealer === i && playing ? ' dealer' : ''}`, testid: `seat-card-${i}` },
      h('div', { class: 'name' }, name, tags.map((x) => h('span', { class: 'tag' }, x))),
      h('div', { class: 'balance', 'aria-label': `${name} ${t('balance')}` },
        h('span', { testid: `balance-${i}` }, String(view.balances[i]))),
      round ? h('div', { class: 'delta' }, `${t('this_round')} ${delta > 0 ? '+' : ''}${delta}`) : null,
      view.coins ? h('div', { class: 'coins', 'aria-label': `${name} ${t('coins')}` },
        h('span', { testid: `coins-${i}` }, String(view.coins[i])), ` ${t('coins')}`) : null);
  });
  const actions = S.token && view ? actionBar(playing) : null;
  const showShareFirst = S.showShare && !(view && view.round);
  if (showShareFirst && S.token && !S.qr && !S.qrAsked) { S.qrAsked = true; setTimeout(() => showQr(shareLinks().write)); }
  root().replaceChildren(
    h('div', { class: 'top' },
      h('header', { class: 'bar' }, h('h1', {}, view ? presetName(view.ruleset.preset) : t('app')), langButton(render)),
      h('div', { class: 'status', id: 'status', role: 'status', 'data-live': S.liveMode }, statusParts())),
    view ? h('main', { class: 'page' },
      h('p', { class: 'round-line', testid: 'round-line' }, round ? `${t('round_n', { n: round.number })} · ${t('dealer')} ${seatName(ps, round.dealer)}${playing ? '' : ` · ${t('round_ended')}`}` : t('no_round')),
      h('section', { class: `board seats-${ps.length}`, 'aria-label': t('balance') }, seats),
      showShareFirst ? shareSection() : null,
      actions,
      h('section', { id: 'pending', class: 'pending' }, pendingParts()),
      historySection(),
      showShareFirst ? null : shareSection(),
    ) : h('main', { class: 'page' }, h('p', {}, S.online ? '…' : t('err.offline'))));
}

function actionBar(playing) {
  const ctx = context();
  const btn = (testid, label, onclick, cls = '') => h('button', { type: 'button', class: `act ${cls}`, testid, onclick }, label);
  const undoTarget = lastUndoable();
  const undo = h('button', { type: 'button', class: 'act secondary', testid: 'undo', disabled: !undoTarget,
    onclick: () => { const r = lastUndoable(); if (r) openDialog(undoDialog(ctx, r)); else showError(t('err.nothing_to_undo')); } }, t('undo'));
  if (!playing) {
    return h('section', { class: 'actions' }, btn('round-start', t('round_start'), () => openDialog(roundStartDialog(ctx)), 'primary wide'),
      S.view.coins ? btn('buy-in', t('buy_in'), () => openDialog(buyInDialog(ctx)), 'secondary') : null, undo);
  }
  return h('section', { class: 'actions' },
    btn('record-hu', t('hu'), () => openDialog(huDialog(ctx)), 'primary'),
    btn('record-kong', t('kong'), () => openDialog(kongDialog(ctx))),
    btn('record-peng', t('peng'), () => openDialog(pengDialog(ctx))),
    btn('record-draw', t('draw'), () => openDialog(drawDialog(ctx))),
    btn('record-escape', t('escape'), () => openDialog(escapeDialog(ctx))),
    undo,
    btn('round-end', t('end_round'), () => openDialog(confirmDialog({ title: t('end_round'), text: t('end_round_q'),
      onConfirm: () => ctx.record({ type: 'round_end' }) })), 'secondary'));
}

function historySection() {
  const view = S.view;
  const ps = players();
  const round = view.round;
  const recs = round ? S.records.filter((r) => (r.round === round.number || (r.type === 'void' && r.seq > (roundStartSeq(round) || 0))) && !r.voided) : [];
  const items = recs.slice().reverse().map((r) => {
    const trs = S.transfers.get(r.seq);
    const lines = r.type === 'void' && S.ownDeltas.has(r.seq)
      ? [S.ownDeltas.get(r.seq).map((d, i) => (d ? `${seatName(ps, i)} ${d > 0 ? '+' : ''}${d}` : null)).filter(Boolean).join(', ')]
      : (trs || []).map((tr) => transferWords(tr, ps, winInfo(r)));
    if (trs && !trs.length && ROUND_EVENTS.includes(r.type)) lines.push(t('nothing_paid'));
    return h('li', { testid: `event-${r.seq}` }, h('div', { class: 'ev' }, h('span', { class: 'seq' }, `#${r.seq}`), describe(r, ps)),
      lines.length ? h('ul', { class: 'transfers' }, lines.map((l) => h('li', {}, l))) : null);
  });
  const head = h('tr', {}, h('th', { scope: 'col' }, t('rounds')), ps.map((n) => h('th', { scope: 'col' }, n)));
  const rows = view.rounds.map((r) => h('tr', {}, h('th', { scope: 'row' }, t('round_n', { n: r.number })),
    r.deltas.map((d) => h('td', { class: d < 0 ? 'neg' : d > 0 ? 'pos' : '' }, String(d)))));
  if (round && round.status === 'playing') {
    rows.push(h('tr', { class: 'current' }, h('th', { scope: 'row' }, t('this_round')), round.deltas.map((d) => h('td', {}, String(d)))));
  }
  rows.push(h('tr', { class: 'total' }, h('th', { scope: 'row' }, t('totals')), view.balances.map((b) => h('td', {}, String(b)))));
  if (view.coins) rows.push(h('tr', { class: 'coins' }, h('th', { scope: 'row' }, t('coins')), view.coins.map((c) => h('td', {}, String(c)))));
  return h('section', { class: 'history' },
    h('h2', {}, t('history')),
    items.length ? h('ol', { class: 'events', testid: 'events', reversed: true }, items) : h('p', { class: 'muted' }, t('no_events')),
    h('div', { class: 'scroll' }, h('table', { class: 'rounds', testid: 'rounds' }, h('thead', {}, head), h('tbody', {}, rows))));
}

function roundStartSeq(round) {
  const start = S.records.find((r) => r.type === 'round_start' && r.round === round.number && !r.voided);
  return start ? start.seq : null;
}

function shareLinks() {
  const origin = location.origin;
  return {
    write: S.token ? `${origin}/#t=${S.tableId}&k=${S.token}${S.readToken ? `&r=${S.readToken}` : ''}` : null,
    read: S.readToken ? `${origin}/#t=${S.tableId}&r=${S.readToken}` : null,
  };
}

function shareSection() {
  const { write, read } = shareLinks();
  const loopback = /^(localhost|127\.|\[::1\])/.test(location.hostname);
  return h('section', { class: 'share', 'aria-labelledby': 'share-h' },
    h('h2', { id: 'share-h' }, t('share')),
    h('p', { class: 'muted' }, t('share_hint')),
    write ? h('p', {}, h('a', { href: write, testid: 'share-link', class: 'link' }, t('share_write'))) : null,
    read ? h('p', {}, h('a', { href: read, testid: 'share-read-link', class: 'link' }, t('share_read'))) : null,
    write ? h('div', { class: 'qr' }, S.qr
      ? h('img', { src: S.qr, alt: t('qr_alt'), testid: 'share-qr', width: 220, height: 220 })
      : h('button', { type: 'button', testid: 'show-qr', onclick: () => showQr(write) }, t('show_qr'))) : null,
    loopback ? h('p', { class: 'muted small' }, t('qr_local')) : null);
}

async function showQr(text) {
  try {
    const res = await fetch('/web/qr', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text }), cache: 'no-store' });
    if (!res.ok) throw new ApiError(res.status, {});
    S.qr = URL.createObjectURL(await res.blob());
  } catch (e) { showError(errorText(e instanceof ApiError ? e : new ApiError(0, {}))); }
  render();
}

boot();
