// The screens, drawn from the state (pure: state → vnodes; no request, no storage, no timer).
// A = the app's actions (app.js): every handler calls one of them.
import { h, field } from './dom.js';
import { t } from './i18n.js';
import { describe, transferWords, seatName, fanInfo, patternList, patternName } from './words.js';
import { winsBySeat, drawStatuses, roundLog, standingEvents, replacedSeqs } from './round.js';
import { ROUND_EVENTS, lastUndoable } from './state.js';
import { renderEnd } from './end.js';

// the room's on/off options: the switch of each optional pattern (/web/patterns.json, made from the
// rules core's pattern registry), then the two that are no pattern's
const optionFlags = () => [...patternList().filter((p) => p.option && p.on === true).map((p) => p.option),
  'dianpao_pinghu', 'xueliu_dajiao_winners'];
// an option's words: its own, else the name of the pattern it turns on
const optionName = (k) => {
  const p = patternList().find((q) => q.option === k);
  return t(k) === k && p ? patternName(p.id) : t(k);
};
// an option shown only where it means something
const OPTION_SHOWN = { xueliu_dajiao_winners: (preset) => preset.mode === 'xueliu' };

// a room's name in the current language (a preset the app does not know: its id)
export const presetName = (name) => (t(`presets.${name}`) !== `presets.${name}` ? t(`presets.${name}`) : name);

export function renderApp(s, A) {
  if (s.route === 'start') return renderStart(s, A);
  if (s.route === 'end') return renderEnd(s, A, top(s, A, t('end_title')));
  return renderTable(s, A);
}

function langButton(A) {
  return h('button', { type: 'button', class: 'lang', testid: 'lang', 'aria-label': t('lang_label'), onclick: () => A.toggleLang() },
    t('lang_switch'));
}

function bar(title, A) {
  return h('header', { class: 'bar', key: 'bar' }, h('h1', {}, title),
    h('div', { class: 'bar-tools' },
      h('button', { type: 'button', class: 'lang help', testid: 'glossary-open', 'aria-label': t('glossary_btn'), onclick: () => A.openDialog('glossary') }, '?'),
      langButton(A)));
}

// -- start -------------------------------------------------------------------------------------
function renderStart(s, A) {
  const st = s.start;
  const presets = s.rulesets ? s.rulesets.presets : { xuezhan: { preset: 'xuezhan', players: 4 } };
  const name = st.preset && presets[st.preset] ? st.preset : (s.rulesets && s.rulesets.default) || Object.keys(presets)[0];
  const preset = presets[name];
  const seats = preset.players || 4;
  const winds = t('wind');
  const opt = (k) => (k in st.opts ? st.opts[k] : preset[k]);
  const setOpt = (k, v) => A.editStart((x) => { x.preset = name; if (v === preset[k]) delete x.opts[k]; else x.opts[k] = v; });
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
  for (const k of optionFlags().filter((f) => f in preset && (!OPTION_SHOWN[f] || OPTION_SHOWN[f](preset)))) {
    options.push(h('label', { class: 'check' }, h('input', { type: 'checkbox', testid: `opt-${k}`, checked: !!opt(k),
      onchange: (e) => setOpt(k, e.target.checked) }), optionName(k)));
  }
  options.push(field(t('api_key'), h('input', { type: 'password', testid: 'api-key', autocomplete: 'off', value: A.apiKey(),
    onchange: (e) => A.setApiKey(e.target.value.trim()) }), t('api_key_hint')));
  const sk = st.stakes;
  const num = (testid, value, onInput) => h('input', { type: 'number', min: 0, step: 1, inputmode: 'numeric', testid, value,
    oninput: (e) => onInput(e.target.value) });
  const stakes = h('fieldset', { class: 'stakes' }, h('legend', {}, t('stakes')),
    h('label', { class: 'check' }, h('input', { type: 'checkbox', testid: 'stakes-on', checked: sk.on,
      onchange: (e) => A.editStart((x) => { x.stakes.on = e.target.checked; }) }), t('stakes_on')),
    sk.on ? [
      field(t('coin_per_point'), num('stakes-cpp', sk.cpp, (v) => A.editStart((x) => { x.stakes.cpp = v; }))),
      field(t('fee'), num('stakes-fee', sk.fee, (v) => A.editStart((x) => { x.stakes.fee = v; }))),
      Array.from({ length: seats }, (_, i) => field(`${st.names[i] || winds[i]} · ${t('bankroll')}`,
        num(`stakes-bankroll-${i}`, sk.bankrolls[i] ?? '1000', (v) => A.editStart((x) => { x.stakes.bankrolls[i] = v; })))),
    ] : null);
  const form = h('form', { class: 'start', onsubmit: (e) => { e.preventDefault(); A.createTable(); } },
    field(t('room'), h('select', { testid: 'ruleset', onchange: (e) => A.editStart((x) => { x.preset = e.target.value; x.opts = {}; }) },
      Object.keys(presets).map((p) => h('option', { value: p, selected: p === name }, presetName(p))))),
    h('fieldset', {}, h('legend', {}, t('players')), Array.from({ length: seats }, (_, i) => field(
      `${t('player_n', { n: i + 1 })} · ${winds[i]}`,
      h('input', { type: 'text', testid: `player-${i}`, maxlength: 40, autocomplete: 'off', value: st.names[i] || '',
        placeholder: winds[i], oninput: (e) => A.editStart((x) => { x.names[i] = e.target.value; }) })))),
    stakes,
    h('details', { class: 'options', open: st.optionsOpen, ontoggle: (e) => { if (e.target.open !== st.optionsOpen) A.editStart((x) => { x.optionsOpen = e.target.open; }); } },
      h('summary', {}, t('options')), options),
    h('button', { type: 'submit', class: 'primary big', testid: 'create-table', disabled: st.busy }, st.busy ? t('creating') : t('create')));
  const recent = A.recentTables();
  return [
    bar(t('app'), A),
    h('main', { class: 'page', key: 'start' }, h('h2', {}, t('start_title')), form,
      h('p', { class: 'club-entry' }, h('a', { href: '#clubs', class: 'link', testid: 'clubs-open' }, t('club.entry'))),
      recent.length ? h('section', { class: 'recent' }, h('h2', {}, t('recent')), h('ul', {}, recent.map((r) => h('li', { key: r.id },
        h('a', { href: `#t=${r.id}${r.token ? `&k=${r.token}` : ''}${r.read ? `&r=${r.read}` : ''}` },
          (r.players || []).join(' · ') || r.id))))) : null),
  ];
}

// -- the status line -----------------------------------------------------------------------------
// In a player's words: online or not, what waits to be sent, and only when updates are not
// immediate (polling, or stopped) a word about it. The table's version and the kind of connection
// are the developers' (the status element carries them as data-version and data-live).
export function statusParts(s, A) {
  const net = s.online == null ? 'connecting' : s.online ? 'online' : 'offline';
  const ps = s.view ? s.view.players : [];
  const mode = s.liveMode === 'poll' || s.liveMode === 'stopped' ? s.liveMode : null;
  return [
    h('span', { class: net === 'online' ? 'ok' : net === 'offline' ? 'bad' : 'muted', testid: 'online' }, t(net)),
    h('span', {}, `${t('pending')} `, h('b', { testid: 'pending-count' }, String(s.pending.length))),
    mode ? h('span', { class: 'muted', testid: 'live-mode' }, t(`live_${mode}`)) : null,
    s.table && !s.table.token ? h('span', { class: 'tag' }, t('read_only')) : null,
    s.table && s.table.token && s.view ? h('button', { type: 'button', class: 'small me', testid: 'my-seat', onclick: () => A.openDialog('whoAmI') },
      s.mySeat != null && s.mySeat >= 0 && s.mySeat < ps.length ? t('my_seat_btn', { name: seatName(ps, s.mySeat) }) : t('my_seat_unset')) : null,
  ];
}

function top(s, A, title) {
  return h('div', { class: 'top', key: 'top' }, bar(title, A),
    h('div', { class: 'status', id: 'status', role: 'status', 'data-live': s.liveMode, 'data-version': s.view ? s.view.version : null,
      key: 'status' }, statusParts(s, A)));
}

// -- the table ---------------------------------------------------------------------------------
function renderTable(s, A) {
  const view = s.view;
  if (!view) {
    return [top(s, A, t('app')), h('main', { class: 'page', key: 'wait' }, h('p', { testid: 'waiting' }, s.online === false ? t('err.offline') : t('loading')))];
  }
  const ps = view.players;
  const round = view.round;
  const playing = !!(round && round.status === 'playing');
  const finished = !!(s.finished || view.finished_at);
  const shareFirst = s.showShare && !round && !finished;
  const board = renderBoard(s);
  const actions = s.table.token || finished ? actionBar(s, A, playing, finished) : null; // (an onlooker: the summary only)
  return [
    top(s, A, presetName(view.ruleset.preset)),
    h('main', { class: 'page', key: 'table' },
      h('p', { class: 'round-line', testid: 'round-line', key: 'round-line' }, finished ? t('finished')
        : round ? `${t('round_n', { n: round.number })} · ${t('dealer')} ${seatName(ps, round.dealer)}${playing ? '' : ` · ${t('round_ended')}`}` : t('no_round')),
      shareFirst ? [actions, shareSection(s, A, true), board] : [board, actions],
      h('section', { id: 'pending', class: 'pending', key: 'pending' }, pendingParts(s, A)),
      historySection(s, A),
      shareFirst ? null : shareSection(s, A, false)),
  ];
}

function renderBoard(s) {
  const view = s.view;
  const ps = view.players;
  const round = view.round;
  const playing = !!(round && round.status === 'playing');
  const wins = round ? winsBySeat(standingEvents(s.records, round.number).map((x) => x.event), ps.length) : [];
  return h('section', { class: `board seats-${ps.length}`, 'aria-label': t('balance'), key: 'board' }, ps.map((name, i) => {
    const tags = [];
    if (i === s.mySeat) tags.push(t('me'));
    if (round && round.dealer === i && playing) tags.push(t('dealer'));
    if (round && round.won.includes(i)) tags.push(wins[i] > 1 ? t('won_n', { n: wins[i] }) : t('won'));
    if (round && round.left.includes(i)) tags.push(t('left'));
    const delta = round ? round.deltas[i] : 0;
    return h('div', { class: `seat${round && round.dealer === i && playing ? ' dealer' : ''}${i === s.mySeat ? ' mine' : ''}`, testid: `seat-card-${i}` },
      h('div', { class: 'name' }, name, tags.map((x) => h('span', { class: 'tag' }, x))),
      h('div', { class: 'balance', 'aria-label': `${name} ${t('balance')}` },
        h('span', { testid: `balance-${i}` }, String(view.balances[i]))),
      round ? h('div', { class: 'delta', testid: `delta-${i}` }, `${t('this_round')} ${delta > 0 ? '+' : ''}${delta}`) : null,
      view.coins ? h('div', { class: 'coins', 'aria-label': `${name} ${t('coins')}` },
        h('span', { testid: `coins-${i}` }, String(view.coins[i])), ` ${t('coins')}`) : null);
  }));
}

function actionBar(s, A, playing, finished) {
  const btn = (testid, label, onclick, cls = '') => h('button', { type: 'button', class: `act ${cls}`, testid, onclick, key: testid }, label);
  if (finished) {
    return h('section', { class: 'actions', key: 'actions' }, btn('open-summary', t('open_summary'), () => A.openSummary(), 'primary wide'));
  }
  const undo = h('button', { type: 'button', class: 'act secondary', testid: 'undo', key: 'undo', disabled: !lastUndoable(s.records),
    onclick: () => A.askUndo() }, t('undo'));
  if (!playing) {
    return h('section', { class: 'actions', key: 'actions' }, btn('round-start', t('round_start'), () => A.openDialog('roundStart'), 'primary wide'),
      s.view.coins ? btn('buy-in', t('buy_in'), () => A.openDialog('buyIn'), 'secondary') : null, undo,
      s.view.round ? btn('record-adjust', t('adjust'), () => A.openDialog('adjust'), 'secondary') : null,
      s.view.round ? btn('finish', t('finish'), () => A.askFinish(), 'secondary wide') : null);
  }
  return h('section', { class: 'actions', key: 'actions' },
    btn('record-hu', t('hu'), () => A.openDialog('hu'), 'primary'),
    btn('record-kong', t('kong'), () => A.openDialog('kong')),
    btn('record-peng', t('peng'), () => A.openDialog('peng')),
    btn('record-draw', t('draw'), () => A.openDialog('draw')),
    btn('record-escape', t('escape'), () => A.openDialog('escape')),
    btn('record-penalty', t('penalty'), () => A.openDialog('penalty')),
    undo,
    btn('round-end', t('end_round'), () => A.askRoundEnd(), 'secondary wide-2'));
}

function pendingParts(s, A) {
  const out = [];
  if (s.pending.length) {
    out.push(h('h3', {}, t('pending_list')), h('ul', { testid: 'pending-list' }, s.pending.map((i, n) => h('li', { key: i.key }, i.label,
      !(n === 0 && A.sending()) ? h('button', { type: 'button', class: 'small', testid: `pending-cancel-${n}`,
        'aria-label': `${t('cancel')}: ${i.label}`, onclick: () => A.cancelPending(i.key) }, t('cancel')) : null))));
  }
  if (s.drafts.length && s.table.token) {
    out.push(h('h3', {}, t('drafts')), h('ul', { class: 'drafts', testid: 'drafts' }, s.drafts.map((d, n) => h('li', { key: d.key, testid: `draft-${n}` },
      h('span', {}, d.label),
      h('span', { class: 'row-buttons' },
        h('button', { type: 'button', class: 'small primary', testid: `draft-resubmit-${n}`, 'aria-label': `${t('resubmit')}: ${d.label}`,
          onclick: () => A.resubmit(d.key) }, t('resubmit')),
        h('button', { type: 'button', class: 'small', testid: `draft-discard-${n}`, 'aria-label': `${t('discard')}: ${d.label}`,
          onclick: () => A.discardDraft(d.key) }, t('discard')))))));
  }
  return out;
}

// -- what each record paid, in words --------------------------------------------------------------
// winInfo(rec)(seat) → the winner's fan info: declared (the cap applied here) or scored
function winInfo(s, rec) {
  return (seat) => {
    const w = (rec.winners || []).find((x) => x.seat === seat);
    if (!w) return null;
    if (w.hand) return rec.seq == null ? null : s.scores[`${rec.seq}:${seat}`] || null;
    return fanInfo(w.fan, w.patterns, s.view.ruleset.cap);
  };
}

// one record as a list item: its words, what it paid (from `transfers`), and for a void what it took back;
// a correction lists its events, each with what it paid (keyed "seq.index"); `replaced`: the seqs of
// records a correction replaced (shown as such: they pay nothing now)
function recordItem(s, r, transfers, testid, replaced = new Set()) {
  const ps = s.view.players;
  const lines = [];
  let words = describe(r, ps);
  if (replaced.has(r.seq)) {
    return h('li', { testid, key: r.seq, class: 'replaced' }, h('div', { class: 'ev' }, h('span', { class: 'seq' }, `#${r.seq}`), words,
      h('span', { class: 'tag' }, t('replaced'))));
  }
  if (r.type === 'correction') {
    const evs = (r.events || []).map((e, i) => {
      const trs = transfers[`${r.seq}.${i}`];
      return h('li', { testid: `${testid}-${i}` }, describe(e, ps),
        trs ? h('ul', { class: 'transfers' }, trs.length ? trs.map((tr) => h('li', {}, transferWords(tr, ps, winInfo(s, e))))
          : h('li', {}, t('nothing_paid'))) : null);
    });
    return h('li', { testid, key: r.seq }, h('div', { class: 'ev' }, h('span', { class: 'seq' }, `#${r.seq}`), words),
      evs.length ? h('ol', { class: 'transfers corrected' }, evs) : h('ul', { class: 'transfers' }, h('li', {}, t('mend_emptied'))));
  }
  if (r.type === 'adjust') { // (its transfers are the record's own)
    for (const tr of r.transfers || []) lines.push(h('li', {}, transferWords({ ...tr, reason: 'adjust' }, ps, null)));
  } else if (r.type === 'void') {
    const target = s.records.find((x) => x.seq === r.target);
    if (target) words = t('ev_void_of', { target: r.target, what: describe(target, ps) });
    const removed = transfers[`v${r.seq}`];
    if (removed && removed.length) {
      for (const tr of removed) lines.push(h('li', { class: 'undone' }, t('removed', { what: transferWords(tr, ps, winInfo(s, target)) })));
    } else if (target && target.type === 'round_end') lines.push(h('li', {}, t('reopened')));
  } else {
    const trs = transfers[r.seq];
    for (const tr of trs || []) lines.push(h('li', {}, transferWords(tr, ps, winInfo(s, r))));
    if (trs && !trs.length && ROUND_EVENTS.includes(r.type)) lines.push(h('li', {}, t('nothing_paid')));
    if (r.type === 'draw' || (r.type === 'escape' && r.seats)) {
      for (const st of drawStatuses(r)) lines.push(h('li', { class: 'status-line', testid: `${testid}-seat-${st.seat}` }, `${seatName(ps, st.seat)}: ${statusWords(st)}`));
    }
  }
  return h('li', { testid, key: r.seq }, h('div', { class: 'ev' }, h('span', { class: 'seq' }, `#${r.seq}`), words),
    lines.length ? h('ul', { class: 'transfers' }, lines) : null);
}

function statusWords(st) {
  if (st.status === 'ting') return st.dajiao_fan ? t('st_done_ting', { fan: st.dajiao_fan }) : t('st_done_ting_nofan');
  return t(`st_done_${st.status}`);
}

function historySection(s, A) {
  const view = s.view;
  const ps = view.players;
  const round = view.round;
  let recs = [];
  if (round) {
    const startSeq = (s.records.find((r) => r.type === 'round_start' && r.round === round.number && !r.voided) || {}).seq || 0;
    // (with the voids and the corrections made since it started: a correction of an earlier round too)
    recs = s.records.filter((r) => (r.round === round.number || (['void', 'correction'].includes(r.type) && r.seq > startSeq)) && !r.voided);
  }
  const replaced = round ? replacedSeqs(s.records, round.number) : new Set();
  const items = recs.slice().reverse().map((r) => recordItem(s, r, s.transfers, `event-${r.seq}`, replaced));
  const canMend = !!(s.table.token && !(s.finished || view.finished_at));
  const head = h('tr', {}, h('th', { scope: 'col' }, t('rounds')), ps.map((n) => h('th', { scope: 'col' }, n)));
  const rows = [];
  for (const r of view.rounds) {
    const open = s.expanded === r.number;
    rows.push(h('tr', { class: `ended${open ? ' open' : ''}`, key: `r${r.number}` },
      h('th', { scope: 'row' }, h('button', { type: 'button', class: 'link-btn', testid: `round-row-${r.number}`, 'aria-expanded': String(open),
        onclick: () => A.expandRound(r.number) }, t('round_n', { n: r.number }))),
      r.deltas.map((d) => h('td', { class: d < 0 ? 'neg' : d > 0 ? 'pos' : '' }, String(d)))));
    if (open) rows.push(h('tr', { class: 'detail', key: `d${r.number}` }, h('td', { colspan: ps.length + 1 }, roundDetails(s, r, canMend ? A : null))));
  }
  if (round && round.status === 'playing') {
    rows.push(h('tr', { class: 'current', key: 'current' }, h('th', { scope: 'row' }, t('this_round')), round.deltas.map((d) => h('td', {}, String(d)))));
  }
  rows.push(h('tr', { class: 'total', key: 'total' }, h('th', { scope: 'row' }, t('totals')), view.balances.map((b) => h('td', {}, String(b)))));
  if (view.coins) rows.push(h('tr', { class: 'coins', key: 'coins' }, h('th', { scope: 'row' }, t('coins')), view.coins.map((c) => h('td', {}, String(c)))));
  return h('section', { class: 'history', key: 'history' },
    h('div', { class: 'history-head' }, h('h2', {}, t('history')),
      round && canMend ? h('button', { type: 'button', class: 'small', testid: `mend-round-${round.number}`, onclick: () => A.openMend(round.number) },
        t('mend_this_round', { n: round.number })) : null),
    items.length ? h('ol', { class: 'events', testid: 'events', reversed: true }, items) : h('p', { class: 'muted', testid: 'no-events' }, t('no_events')),
    h('div', { class: 'scroll' }, h('table', { class: 'rounds', testid: 'rounds' }, h('thead', {}, head), h('tbody', {}, rows))),
    view.rounds.length ? h('p', { class: 'muted small' }, t('rounds_hint')) : null);
}

// an ended round: its records with what each paid, the draw's standings, the round's deltas
// (A: the actions, when this phone may correct it)
function roundDetails(s, r, A) {
  const ps = s.view.players;
  const d = s.details[r.number] || { transfers: {} };
  const recs = roundLog(s.records, r.number).filter((x) => !x.voided);
  const replaced = replacedSeqs(s.records, r.number);
  return h('div', { class: 'round-detail', testid: `round-detail-${r.number}` },
    h('div', { class: 'history-head' }, h('h3', {}, t('round_detail', { n: r.number })),
      A ? h('button', { type: 'button', class: 'small', testid: `mend-round-${r.number}`, onclick: () => A.openMend(r.number) }, t('mend_round')) : null),
    recs.length ? h('ol', { class: 'events' }, recs.map((x) => recordItem(s, x, d.transfers, `round-${r.number}-event-${x.seq}`, replaced))) : h('p', { class: 'muted' }, t('loading')),
    h('p', { class: 'deltas', testid: `round-${r.number}-deltas` }, `${t('deltas')}: `,
      r.deltas.map((x, i) => `${seatName(ps, i)} ${x > 0 ? '+' : ''}${x}`).join(t('and'))));
}

// -- sharing -------------------------------------------------------------------------------------
export function shareLinks(s, origin) {
  const { id, token, read } = s.table;
  return {
    write: token ? `${origin}/#t=${id}&k=${token}${read ? `&r=${read}` : ''}` : null,
    read: read ? `${origin}/#t=${id}&r=${read}` : null,
  };
}

function shareSection(s, A, first) {
  const { write, read } = shareLinks(s, A.origin());
  return h('section', { class: `share${first ? ' first' : ''}`, 'aria-labelledby': 'share-h', key: 'share' },
    h('h2', { id: 'share-h' }, t('share')),
    write ? h('div', { class: 'qr' }, s.qr
      ? h('img', { src: s.qr, alt: t('qr_alt'), testid: 'share-qr', width: 176, height: 176 })
      : h('button', { type: 'button', testid: 'show-qr', onclick: () => A.showQr() }, t('show_qr'))) : null,
    h('div', { class: 'share-links' },
      write ? h('p', {}, h('a', { href: write, testid: 'share-link', class: 'link' }, t('share_write'))) : null,
      read ? h('p', {}, h('a', { href: read, testid: 'share-read-link', class: 'link' }, t('share_read'))) : null),
    h('p', { class: 'muted small' }, t('share_hint')),
    A.loopback() ? h('p', { class: 'muted small' }, t('qr_local')) : null);
}
