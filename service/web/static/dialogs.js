// The recording dialogs: one sheet at a time, re-rendered from its own state on every tap.
// Each dialog's confirm() returns true (done: close), a string (a message to show), or
// nothing (it moved to its next step). Recording goes through ctx.record (the outbox).
import { h, field } from '/web/dom.js';
import { t } from '/web/i18n.js';
import { tileName } from '/web/tiles.js';
import { describe, patternList, patternName, seatName } from '/web/words.js';
import { seatButtons, tilePicker, handEditor, handJson, breakdown, scoreHand, tingHand } from '/web/picker.js';

let active = null;
let returnFocus = null;

const overlay = () => document.getElementById('overlay');

export const dialogOpen = () => active !== null;

export function openDialog(dlg) {
  const toast = document.getElementById('toast'); // the player has moved on from the last message
  if (toast) toast.hidden = true;
  returnFocus = document.activeElement;
  active = dlg;
  dlg.update = () => { if (active === dlg) render(); };
  render();
  const first = overlay().querySelector('button, input, select');
  if (first) first.focus();
}

export function closeDialog() {
  active = null;
  const o = overlay();
  o.hidden = true;
  o.replaceChildren();
  if (returnFocus && returnFocus.isConnected) returnFocus.focus();
}

function render() {
  const d = active;
  const o = overlay();
  const old = o.querySelector('.sheet');
  const scroll = old ? old.scrollTop : 0;
  const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.testid : null;
  const sheet = h('div', { class: 'sheet', role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': 'dlg-title' },
    h('h2', { id: 'dlg-title' }, d.title()),
    h('div', { class: 'dlg-body' }, d.body()),
    h('p', { class: 'dlg-msg', role: 'status', testid: 'dialog-message' }, d.msg || ''),
    h('div', { class: 'dlg-actions' },
      h('button', { type: 'button', testid: 'cancel', onclick: closeDialog }, t('cancel')),
      h('button', { type: 'button', class: 'primary', testid: 'confirm', onclick: () => confirm(d) },
        d.confirmLabel ? d.confirmLabel() : t('confirm'))));
  o.replaceChildren(sheet);
  o.hidden = false;
  sheet.scrollTop = scroll;
  if (focused) {
    const again = sheet.querySelector(`[data-testid="${focused}"]`);
    if (again) again.focus();
  }
}

async function confirm(d) {
  if (d.busy) return;
  d.busy = true;
  d.msg = '';
  let r;
  try { r = await d.confirm(); } finally { d.busy = false; }
  if (active !== d) return;
  if (r === true) closeDialog();
  else { if (typeof r === 'string') d.msg = r; render(); }
}

document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && active) closeDialog(); });

// -- helpers over the table context --------------------------------------------------------
// ctx: {view, players, ruleset, voids, xueliu, roundRecords(), record(body), out(i), won(i),
//       claims(i) (may 碰/直杠), melds(i), kept(i) (血流: a winner's kept hand, or null)}
const missing = (names) => t('missing', { what: names.join(t('and')) });
const toggle = (v) => !v;

function fanInput(entry, label, onInput) {
  const input = h('input', {
    type: 'number', min: 1, max: 99, step: 1, inputmode: 'numeric', testid: 'fan-input', value: String(entry.fan ?? 1),
    oninput: (e) => { entry.fan = Number(e.target.value); if (onInput) onInput(); },
  });
  return field(label, input);
}

// -- round start -----------------------------------------------------------------------------
export function roundStartDialog(ctx) {
  const n = ctx.players.length;
  const last = ctx.view.round; // the dealer after the round just ended (§10), else the table's next one
  const dealer = last && last.status === 'ended' && last.next_dealer != null ? last.next_dealer : ctx.view.dealer;
  const st = { dealer: dealer ?? 0, voids: Array(n).fill(null) };
  const withVoids = n === 4;
  const d = {
    title: () => t('round_start'),
    body: () => [
      seatButtons({ prefix: 'seat', players: ctx.players, label: t('dealer_q'), pressed: (i) => i === st.dealer,
        onPick: (i) => { st.dealer = i; d.update(); } }),
      withVoids ? h('fieldset', {}, h('legend', {}, t('voids_opt')), ctx.players.map((_, i) => field(seatName(ctx.players, i),
        h('select', { testid: `void-${i}`, onchange: (e) => { st.voids[i] = e.target.value || null; } },
          h('option', { value: '', selected: !st.voids[i] }, t('void_none')),
          ['m', 'p', 's'].map((s) => h('option', { value: s, selected: st.voids[i] === s }, t(`suits.${s}`).trim())))))) : null,
    ],
    confirm: () => {
      const body = { type: 'round_start', dealer: st.dealer };
      if (st.voids.some((v) => v)) body.voids = st.voids;
      ctx.record(body);
      return true;
    },
  };
  return d;
}

// -- peng ------------------------------------------------------------------------------------
export function pengDialog(ctx) {
  const st = { seat: null, from: null, tile: null };
  const d = {
    title: () => t('peng'),
    body: () => [
      seatButtons({ prefix: 'seat', players: ctx.players, label: t('who_peng'), pressed: (i) => i === st.seat,
        disabled: (i) => ctx.out(i) || !ctx.claims(i), onPick: (i) => { st.seat = i; if (st.from === i) st.from = null; d.update(); } }),
      ctx.xueliu && ctx.players.some((_, i) => !ctx.out(i) && !ctx.claims(i)) ? h('p', { class: 'muted small' }, t('xueliu_no_claims')) : null,
      seatButtons({ prefix: 'from', players: ctx.players, label: t('from_whom'), pressed: (i) => i === st.from,
        disabled: (i) => i === st.seat || ctx.out(i), onPick: (i) => { st.from = i; d.update(); } }),
      tilePicker({ suits: ctx.suits, label: t('tile'), pressed: (x) => x === st.tile, onPick: (x) => { st.tile = x; d.update(); } }),
    ],
    confirm: () => {
      const miss = [st.seat == null && t('who_peng'), st.from == null && t('from_whom'), !st.tile && t('tile')].filter(Boolean);
      if (miss.length) return missing(miss);
      ctx.record({ type: 'peng', seat: st.seat, tile: st.tile, from: st.from });
      return true;
    },
  };
  return d;
}

// -- kong ------------------------------------------------------------------------------------
export function kongDialog(ctx) {
  const st = { seat: null, kind: null, from: null, tile: null };
  const d = {
    title: () => t('kong'),
    body: () => [
      seatButtons({ prefix: 'seat', players: ctx.players, label: t('who_kong'), pressed: (i) => i === st.seat,
        disabled: ctx.out, onPick: (i) => {
          st.seat = i;
          if (st.from === i) st.from = null;
          if (st.kind === 'direct' && !ctx.claims(i)) st.kind = null; // 血流: a winner kongs only what it draws
          d.update();
        } }),
      h('div', { class: 'group', role: 'group', 'aria-label': t('kind') }, h('div', { class: 'group-label' }, t('kind')),
        h('div', { class: 'seats' }, ['direct', 'added', 'concealed'].map((k) => h('button', {
          type: 'button', class: 'choice', testid: `kind-${k}`, 'aria-pressed': String(st.kind === k),
          disabled: k === 'direct' && st.seat != null && !ctx.claims(st.seat),
          onclick: () => { st.kind = k; d.update(); },
        }, t(`kind_${k}`)))),
        st.seat != null && !ctx.claims(st.seat) ? h('p', { class: 'muted small' }, t('xueliu_no_claims')) : null),
      st.kind === 'direct' ? seatButtons({ prefix: 'from', players: ctx.players, label: t('from_whom'),
        pressed: (i) => i === st.from, disabled: (i) => i === st.seat || ctx.out(i),
        onPick: (i) => { st.from = i; d.update(); } }) : null,
      tilePicker({ suits: ctx.suits, label: t('tile'), pressed: (x) => x === st.tile, onPick: (x) => { st.tile = x; d.update(); } }),
    ],
    confirm: () => {
      const miss = [st.seat == null && t('who_kong'), !st.kind && t('kind'),
        st.kind === 'direct' && st.from == null && t('from_whom'), !st.tile && t('tile')].filter(Boolean);
      if (miss.length) return missing(miss);
      const body = { type: 'kong', seat: st.seat, kind: st.kind, tile: st.tile };
      if (st.kind === 'direct') body.from = st.from;
      ctx.record(body);
      return true;
    },
  };
  return d;
}

// -- hu --------------------------------------------------------------------------------------
const FLAGS = ['after_kong', 'robbing_kong', 'last_tile', 'heavenly', 'earthly'];

function patternPicker(entry, ctx, update) {
  const table = ctx.ruleset.fan_table || 'qq';
  const pats = patternList().filter((p) => (p.fan[table] || 0) > 0);
  const fanOf = (p) => p.fan[table];
  const sum = () => {
    let f = 0;
    for (const [id, c] of Object.entries(entry.picked)) f += c * fanOf(pats.find((p) => p.id === id));
    return f;
  };
  const pick = (p) => {
    if (p.base) {
      for (const q of pats) if (q.base && q.id !== p.id) delete entry.picked[q.id];
      if (entry.picked[p.id]) delete entry.picked[p.id]; else entry.picked[p.id] = 1;
    } else if (p.id === 'gen') {
      entry.picked.gen = ((entry.picked.gen || 0) + 1) % 5;
      if (!entry.picked.gen) delete entry.picked.gen;
    } else if (entry.picked[p.id]) delete entry.picked[p.id]; else entry.picked[p.id] = 1;
    const f = sum();
    if (f > 0) entry.fan = f;
    update();
  };
  return h('div', { class: 'group patterns', role: 'group', 'aria-label': t('by_patterns') },
    h('div', { class: 'group-label' }, t('by_patterns')),
    h('div', { class: 'chips' }, pats.map((p) => h('button', {
      type: 'button', class: `chip${p.base ? '' : ' extra'}`, testid: `pattern-${p.id}`,
      'aria-pressed': String(!!entry.picked[p.id]), onclick: () => pick(p),
    }, `${patternName(p.id)} ${t('fan_n', { fan: fanOf(p) })}${entry.picked[p.id] > 1 ? ` ${t('times', { n: entry.picked[p.id] })}` : ''}`))));
}

function winnerValue(entry, seat, ctx) {
  if (entry.mode === 'hand') {
    if (!entry.hand.score) return null;
    return { seat, hand: handJson(entry.hand, ctx.voids[seat]) };
  }
  if (!Number.isInteger(entry.fan) || entry.fan < 1) return null;
  const w = { seat, fan: entry.fan };
  const table = ctx.ruleset.fan_table || 'qq';
  const ids = Object.keys(entry.picked);
  let total = 0;
  for (const p of patternList()) if (entry.picked[p.id]) total += entry.picked[p.id] * (p.fan[table] || 0);
  if (ids.length && total === entry.fan) w.patterns = ids.flatMap((id) => Array(entry.picked[id]).fill(id));
  return w;
}

export function huDialog(ctx) {
  const st = { step: 0, selfDrawn: false, from: null, winners: [], tile: null, flags: {}, entries: {} };
  const entry = (seat) => (st.entries[seat] ||= {
    mode: ctx.kept(seat) ? 'hand' : 'fan', fan: 1, picked: {}, hand: { tiles: [], melds: ctx.melds(seat), result: null },
  });
  const winFlags = () => {
    const f = { self_drawn: st.selfDrawn };
    for (const k of FLAGS) if (st.flags[k]) f[k] = true;
    return f;
  };
  const d = {
    title: () => (st.step === 0 ? t('hu') : t('fan_for', { name: seatName(ctx.players, st.winners[st.step - 1]) })),
    confirmLabel: () => (st.step < st.winners.length && st.step > 0) || st.step === 0 ? t('next') : t('confirm'),
    body: () => (st.step === 0 ? mainStep() : winnerStep(st.winners[st.step - 1])),
    confirm: async () => {
      if (st.step === 0) {
        const miss = [!st.selfDrawn && st.from == null && t('discarder'), !st.winners.length && t('winner'),
          !st.tile && t('win_tile')].filter(Boolean);
        if (miss.length) return missing(miss);
        st.step = 1;
        return undefined;
      }
      const seat = st.winners[st.step - 1];
      const e = entry(seat);
      if (winnerValue(e, seat, ctx) === null) {
        return e.mode === 'hand' ? (e.hand.error || t('hand_tiles', { n: e.hand.tiles.length + 3 * e.hand.melds.length, size: 14 })) : t('fan');
      }
      if (st.step < st.winners.length) { st.step += 1; return undefined; }
      const body = { type: 'hu', from: st.selfDrawn ? null : st.from, tile: st.tile,
        winners: st.winners.map((s) => winnerValue(entry(s), s, ctx)) };
      for (const k of FLAGS) if (st.flags[k]) body[k] = true;
      ctx.record(body);
      return true;
    },
  };
  const mainStep = () => [
    h('div', { class: 'group' }, h('button', {
      type: 'button', class: 'choice wide', testid: 'self-drawn', 'aria-pressed': String(st.selfDrawn),
      onclick: () => { st.selfDrawn = toggle(st.selfDrawn); if (st.selfDrawn) { st.from = null; st.winners = st.winners.slice(0, 1); } d.update(); },
    }, t('self_drawn'))),
    seatButtons({ prefix: 'from', players: ctx.players, label: t('discarder'), pressed: (i) => i === st.from,
      disabled: (i) => ctx.out(i) || st.winners.includes(i),
      onPick: (i) => { st.from = st.from === i ? null : i; if (st.from !== null) st.selfDrawn = false; d.update(); } }),
    seatButtons({ prefix: 'seat', players: ctx.players, label: st.selfDrawn ? t('winner') : t('winners'),
      pressed: (i) => st.winners.includes(i), disabled: (i) => ctx.out(i) || i === st.from,
      onPick: (i) => {
        if (st.winners.includes(i)) st.winners = st.winners.filter((x) => x !== i);
        else st.winners = st.selfDrawn ? [i] : [...st.winners, i];
        d.update();
      } }),
    tilePicker({ suits: ctx.suits, label: t('win_tile'), pressed: (x) => x === st.tile, onPick: (x) => {
      st.tile = x;
      for (const e of Object.values(st.entries)) Object.assign(e.hand, { tiles: [], score: null, result: null, error: null, checked: false });
      d.update();
    } }),
    h('fieldset', { class: 'flags' }, h('legend', {}, t('flags')), FLAGS.map((k) => {
      const label = k === 'after_kong' ? t(st.selfDrawn ? 'after_kong_self' : 'after_kong_discard') : t(k);
      const input = h('input', { type: 'checkbox', testid: `flag-${k}`, checked: !!st.flags[k],
        onchange: (e) => { st.flags[k] = e.target.checked; } });
      return h('label', { class: 'check' }, input, label);
    })),
  ];
  const winnerStep = (seat) => {
    const e = entry(seat);
    const kept = ctx.kept(seat); // 血流: a seat that won with a hand wins again with that hand (§13.2)
    if (!e.hand.tiles.length) {
      e.hand.tiles = kept ? [st.tile, ...kept.tiles] : [st.tile];
      if (kept) e.hand.melds = kept.melds.map((m) => ({ ...m }));
    }
    const modes = h('div', { class: 'seats' }, ['fan', 'hand'].map((m) => h('button', {
      type: 'button', class: 'choice', testid: `mode-${m}`, 'aria-pressed': String(e.mode === m),
      onclick: () => { e.mode = m; d.update(); },
    }, t(m === 'fan' ? 'by_fan' : 'by_hand'))));
    const head = h('p', { class: 'lead' }, `${seatName(ctx.players, seat)} · ${tileName(st.tile)}`);
    if (e.mode === 'hand') {
      return [head, modes, kept ? h('p', { class: 'muted small', testid: 'kept-hand' }, t('kept_hand')) : null, handEditor({
        suits: ctx.suits, entry: e.hand, size: 14, fixed: st.tile, update: d.update,
        check: async (hand) => {
          try {
            hand.score = await scoreHand(hand, { tile: st.tile, win: winFlags(), ruleset: ctx.ruleset, voidSuit: ctx.voids[seat] });
            hand.result = breakdown(hand.score);
          } catch (err) {
            hand.score = null;
            hand.error = ctx.errorText(err);
          }
        },
      })];
    }
    return [head, modes, fanInput(e, t('fan'), null), patternPicker(e, ctx, d.update)];
  };
  return d;
}

// -- draw and escape -------------------------------------------------------------------------
function seatReport(entry, seat, ctx) {
  if (entry.status === 'unlisted') return undefined;
  if (entry.status === 'hand') return { seat, hand: handJson(entry.hand, ctx.voids[seat]) };
  if (entry.status === 'ting') return Number.isInteger(entry.fan) && entry.fan >= 1 ? { seat, status: 'ting', dajiao_fan: entry.fan } : null;
  return { seat, status: entry.status };
}

// the seats a draw (or an escape's last-four charge) asks about: every seat still in the round
// that has not won; in 血流 with xueliu_dajiao_winners, also each winner whose hand is not known
// (its 大叫 collects), which may also stay unlisted (§13.5)
export function reportSeats(ctx, except = null) {
  const seats = ctx.players.map((_, i) => i).filter((i) => i !== except && !ctx.out(i));
  return seats.filter((i) => !ctx.won(i) || (ctx.xueliu && ctx.ruleset.xueliu_dajiao_winners && !ctx.kept(i)));
}

function statusStep(ctx, seat, e, update) {
  const winner = ctx.won(seat);
  const pigs = ctx.ruleset.huazhu !== 0 && ctx.players.length === 4; // no 花猪 with huazhu = 0, nor with three players (§14)
  const statuses = winner ? ['unlisted', 'ting', 'hand'] : ['ting', 'hand', 'not_ting', ...(pigs ? ['huazhu'] : [])];
  const parts = [h('div', { class: 'seats' }, statuses.map((s) => h('button', {
    type: 'button', class: 'choice', testid: `status-${s}`, 'aria-pressed': String(e.status === s),
    onclick: () => { e.status = s; update(); },
  }, t(`st_${s}`))))];
  if (e.status === 'ting') parts.push(fanInput(e, t('dajiao_fan'), null));
  if (e.status === 'hand') {
    parts.push(handEditor({
      suits: ctx.suits, entry: e.hand, size: 13, update,
      check: async (hand) => {
        try {
          const r = await tingHand(hand, { ruleset: ctx.ruleset, voidSuit: ctx.voids[seat] });
          hand.result = r.ting ? t('ting_waits', { tiles: r.waits.map((w) => tileName(w.tile)).join(' '), fan: r.dajiao ? r.dajiao.fan : '' }) : t('not_ting');
        } catch (err) {
          hand.error = ctx.errorText(err);
        }
      },
    }));
  }
  return parts;
}

// seats: the seats to report, in order; done(reports) records the event
function reportSteps(ctx, seats, entries, d, stepOffset) {
  const entry = (seat) => (entries[seat] ||= { status: ctx.won(seat) ? 'unlisted' : 'not_ting', fan: 1, hand: { tiles: [], melds: ctx.melds(seat) } });
  return {
    body: (step) => statusStep(ctx, seats[step - stepOffset], entry(seats[step - stepOffset]), d.update),
    title: (step) => t(ctx.won(seats[step - stepOffset]) ? 'draw_for_winner' : 'draw_for', { name: seatName(ctx.players, seats[step - stepOffset]) }),
    check: (step) => {
      const seat = seats[step - stepOffset];
      const e = entry(seat);
      if (seatReport(e, seat, ctx) === null) return t('dajiao_fan');
      if (e.status === 'hand' && e.hand.tiles.length + 3 * e.hand.melds.length !== 13) {
        return t('hand_tiles', { n: e.hand.tiles.length + 3 * e.hand.melds.length, size: 13 });
      }
      return null;
    },
    reports: () => seats.map((s) => seatReport(entry(s), s, ctx)).filter((r) => r !== undefined),
  };
}

export function drawDialog(ctx) {
  const seats = reportSeats(ctx); // (血流: a seat that has won need not be listed, §13.5)
  const st = { step: 0, entries: {} };
  const d = {};
  const steps = reportSteps(ctx, seats, st.entries, d, 0);
  Object.assign(d, {
    title: () => (seats.length ? steps.title(st.step) : t('draw')),
    confirmLabel: () => (st.step < seats.length - 1 ? t('next') : t('confirm')),
    body: () => (seats.length ? steps.body(st.step) : [h('p', { class: 'lead' }, t('draw_none'))]),
    confirm: () => {
      if (seats.length) {
        const bad = steps.check(st.step);
        if (bad) return bad;
        if (st.step < seats.length - 1) { st.step += 1; return undefined; }
      }
      ctx.record({ type: 'draw', seats: steps.reports() });
      return true;
    },
  });
  return d;
}

export function escapeDialog(ctx) {
  const st = { step: 0, seat: null, lastFour: false, entries: {} };
  const d = {};
  let others = [];
  let steps = null;
  Object.assign(d, {
    title: () => (st.step === 0 ? t('escape') : steps.title(st.step)),
    confirmLabel: () => (st.step === 0 && !st.lastFour) || (st.step > 0 && st.step >= others.length) ? t('confirm') : t('next'),
    body: () => (st.step === 0 ? [
      seatButtons({ prefix: 'seat', players: ctx.players, label: t('who_escapes'), pressed: (i) => i === st.seat,
        disabled: ctx.out, onPick: (i) => { st.seat = i; d.update(); } }),
      h('label', { class: 'check' }, h('input', { type: 'checkbox', testid: 'last-four', checked: st.lastFour,
        onchange: (e) => { st.lastFour = e.target.checked; d.update(); } }), t('last_four')),
    ] : steps.body(st.step)),
    confirm: () => {
      if (st.step === 0) {
        if (st.seat == null) return missing([t('who_escapes')]);
        others = reportSeats(ctx, st.seat);
        steps = reportSteps(ctx, others, st.entries, d, 1);
        if (!st.lastFour || !others.length) {
          ctx.record({ type: 'escape', seat: st.seat, last_four: st.lastFour });
          return true;
        }
        st.step = 1;
        return undefined;
      }
      const bad = steps.check(st.step);
      if (bad) return bad;
      if (st.step < others.length) { st.step += 1; return undefined; }
      ctx.record({ type: 'escape', seat: st.seat, last_four: true, seats: steps.reports() });
      return true;
    },
  });
  return d;
}

// -- buy-in (a table with stakes, between rounds) -----------------------------------------------
export function buyInDialog(ctx) {
  const st = { seat: null, coins: '' };
  const d = {
    title: () => t('buy_in'),
    body: () => [
      seatButtons({ prefix: 'seat', players: ctx.players, label: t('who_buys'), pressed: (i) => i === st.seat,
        onPick: (i) => { st.seat = i; d.update(); } }),
      field(t('buy_coins'), h('input', { type: 'number', min: 1, step: 1, inputmode: 'numeric', testid: 'coins-input',
        value: st.coins, oninput: (e) => { st.coins = e.target.value; } })),
    ],
    confirm: () => {
      if (st.seat == null) return missing([t('who_buys')]);
      const coins = Number(st.coins);
      if (!Number.isSafeInteger(coins) || coins < 1) return t('coins_bad');
      ctx.record({ type: 'buy_in', seat: st.seat, coins });
      return true;
    },
  };
  return d;
}

// -- confirmations ---------------------------------------------------------------------------
export function confirmDialog({ title, text, onConfirm }) {
  return {
    title: () => title,
    body: () => [h('p', { class: 'lead', testid: 'confirm-text' }, text)],
    confirm: () => { onConfirm(); return true; },
  };
}

export function undoDialog(ctx, rec) {
  return confirmDialog({
    title: t('undo'), text: `${t('undo_q')} #${rec.seq}: ${describe(rec, ctx.players)}`,
    onConfirm: () => ctx.voidRecord(rec),
  });
}
