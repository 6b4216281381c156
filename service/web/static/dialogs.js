// The recording dialogs, one sheet at a time. Each kind has:
//   form(ctx, extra)       → its first form (a plain value kept in the store: state.dialog.form)
//   title / body / confirmLabel (form, ctx, A) → what it shows (pure: vnodes, no side effects)
//   confirm(form, ctx, A)  → true (done: close), a string (a message to show: the sheet stays open,
//                             the message above its buttons), or nothing (it moved on with A.edit);
//                             may be async (A.record answers once the service has: see app.js).
//   cancel(form, ctx, A)   (optional) what the cancel button does before the sheet closes
//   edit(event, ctx)       (optional) the form of an event entered again (a correction: mending.js)
// A (the app's actions for a dialog): edit(fn) changes the form; record(body) and
// voidRecord(rec) go through the outbox (record answers as confirm does); checkHand(path, how)
// asks the server about the hand at form[path…] once it is whole; setSeat(seat).
// ctx (derived from the state): {view, players, ruleset, voids, xueliu, suits, out(i), won(i),
//   claims(i) (may 碰/直杠), melds(i), pengs(i), kept(i) (血流: a winner's kept hand), mySeat,
//   round: {last, events, claims, dealer} (the round so far, this phone's unsent entries included)}
import { h, field } from './dom.js';
import { t } from './i18n.js';
import { tileName } from './tiles.js';
import { describe, patternList, patternName, seatName, shantenWords } from './words.js';
import { seatButtons, tilePicker, handEditor, handJson, handSize, breakdown } from './picker.js';
import { pointsFor, roomPatterns } from './round.js';
import { SPECIALS, SPECIAL_IDS, FLAGS, specialOn, toggleSpecial, fitFlags, roomFan, roomImplied, defaultFan, refan,
  entryPatterns, pickChip, patternsContradiction, specialProblem } from './wins.js';
import { parseTiles } from './round.js';
import { MEND_DIALOGS } from './mending.js';

const missing = (names) => t('missing', { what: names.join(t('and')) });
const mine = (ctx, ok = () => true) => (ctx.mySeat != null && ctx.mySeat >= 0 && ctx.mySeat < ctx.players.length && ok(ctx.mySeat) ? ctx.mySeat : null);

// -- the sheet -----------------------------------------------------------------------------------
export function renderDialog(dialog, ctx, A) {
  const def = DIALOGS[dialog.kind];
  const f = dialog.form;
  return h('div', { class: 'sheet', role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': 'dlg-title', key: `dlg-${dialog.id}`, testid: `dlg-${dialog.kind}` },
    h('h2', { id: 'dlg-title' }, def.title(f, ctx)),
    h('div', { class: 'dlg-body' }, def.body(f, ctx, A)),
    // (the message and the buttons stay at the bottom of the screen together: a message is never
    // drawn under the buttons, however long the sheet)
    h('div', { class: 'dlg-foot' },
      h('p', { class: 'dlg-msg', role: 'alert', testid: 'dialog-message' }, dialog.msg || ''),
      h('div', { class: 'dlg-actions' },
        h('button', { type: 'button', testid: 'cancel', onclick: () => { if (def.cancel) def.cancel(f, ctx, A); A.close(); } },
          def.cancelLabel ? def.cancelLabel(f, ctx) : t('cancel')),
        h('button', { type: 'button', class: 'primary', testid: 'confirm', disabled: dialog.busy, onclick: () => A.confirm() },
          dialog.busy ? t('saving') : def.confirmLabel ? def.confirmLabel(f, ctx) : t('confirm')))));
}

// a number of fan: 1–6 as buttons (fan-1 … fan-6), more typed in (fan-input)
function fanPicker(value, onPick, { label, disabled = () => false } = {}) {
  return h('div', { class: 'group', role: 'group', 'aria-labelledby': 'g-fan' },
    h('div', { class: 'group-label', id: 'g-fan' }, label || t('fan')),
    h('div', { class: 'fans' }, [1, 2, 3, 4, 5, 6].map((n) => h('button', {
      type: 'button', class: 'choice', testid: `fan-${n}`, 'aria-pressed': String(value === n), disabled: disabled(n),
      onclick: () => onPick(n),
    }, t('fan_n', { fan: n }))),
    h('input', { type: 'number', min: 1, max: 64, step: 1, inputmode: 'numeric', testid: 'fan-input', class: 'fan-more',
      'aria-label': t('fan_more'), value: value == null ? '' : String(value),
      oninput: (e) => onPick(e.target.value.trim() === '' ? null : Number(e.target.value)) })));
}

// -- round start -----------------------------------------------------------------------------
const roundStart = {
  form: (ctx) => {
    const last = ctx.view.round; // the dealer after the round just ended (§10), else the table's next one
    const dealer = last && last.status === 'ended' && last.next_dealer != null ? last.next_dealer : ctx.view.dealer;
    return { dealer: dealer ?? 0, voids: Array(ctx.players.length).fill(null) };
  },
  title: () => t('round_start'),
  body: (f, ctx, A) => [
    seatButtons({ prefix: 'seat', players: ctx.players, label: t('dealer_q'), pressed: (i) => i === f.dealer,
      onPick: (i) => A.edit((x) => { x.dealer = i; }) }),
    ctx.players.length === 4 ? h('fieldset', {}, h('legend', {}, t('voids_opt')), ctx.players.map((_, i) => field(seatName(ctx.players, i),
      h('select', { testid: `void-${i}`, onchange: (e) => A.edit((x) => { x.voids[i] = e.target.value || null; }) },
        h('option', { value: '', selected: !f.voids[i] }, t('void_none')),
        ['m', 'p', 's'].map((s) => h('option', { value: s, selected: f.voids[i] === s }, t(`suits.${s}`).trim())))))) : null,
  ],
  confirm: (f, ctx, A) => {
    const body = { type: 'round_start', dealer: f.dealer };
    if (f.voids.some((v) => v)) body.voids = f.voids;
    return A.record(body);
  },
};

// -- peng ------------------------------------------------------------------------------------
const peng = {
  form: (ctx) => ({ seat: mine(ctx, (i) => !ctx.out(i) && ctx.claims(i)), from: null, tile: null }),
  edit: (e) => ({ seat: e.seat ?? null, from: e.from ?? null, tile: e.tile || null }),
  title: () => t('peng'),
  body: (f, ctx, A) => [
    seatButtons({ prefix: 'seat', players: ctx.players, label: t('who_peng'), pressed: (i) => i === f.seat,
      disabled: (i) => ctx.out(i) || !ctx.claims(i), onPick: (i) => A.edit((x) => { x.seat = i; if (x.from === i) x.from = null; }) }),
    ctx.xueliu && ctx.players.some((_, i) => !ctx.out(i) && !ctx.claims(i)) ? h('p', { class: 'muted small' }, t('xueliu_no_claims')) : null,
    seatButtons({ prefix: 'from', players: ctx.players, label: t('from_whom'), pressed: (i) => i === f.from,
      disabled: (i) => i === f.seat || ctx.out(i), onPick: (i) => A.edit((x) => { x.from = i; }) }),
    tilePicker({ suits: ctx.suits, label: t('tile'), pressed: (x) => x === f.tile, onPick: (tile) => A.edit((x) => { x.tile = tile; }) }),
  ],
  confirm: (f, ctx, A) => {
    const miss = [f.seat == null && t('who_peng'), f.from == null && t('from_whom'), !f.tile && t('tile')].filter(Boolean);
    if (miss.length) return missing(miss);
    if (!ctx.claims(f.seat)) return t('codes.claim_after_win');
    return A.record({ type: 'peng', seat: f.seat, tile: f.tile, from: f.from });
  },
};

// -- kong ------------------------------------------------------------------------------------
// an added kong's tile is the seat's peng when it has only one: no tile to tap
const addedTile = (ctx, seat) => { const p = seat == null ? [] : ctx.pengs(seat); return p.length === 1 ? p[0] : null; };

const kong = {
  form: (ctx) => ({ seat: mine(ctx, (i) => !ctx.out(i)), kind: null, from: null, tile: null }),
  edit: (e) => ({ seat: e.seat ?? null, kind: e.kind || null, from: e.from ?? null, tile: e.tile || null, tileAuto: false }),
  title: () => t('kong'),
  body: (f, ctx, A) => {
    const pick = (fn) => A.edit((x) => {
      fn(x);
      if (x.kind === 'direct' && x.seat != null && !ctx.claims(x.seat)) x.kind = null; // 血流: a winner kongs only what it draws
      if (x.kind === 'added' && x.tileAuto !== false) { const p = addedTile(ctx, x.seat); if (p) x.tile = p; }
    });
    return [
      seatButtons({ prefix: 'seat', players: ctx.players, label: t('who_kong'), pressed: (i) => i === f.seat,
        disabled: ctx.out, onPick: (i) => pick((x) => { x.seat = i; if (x.from === i) x.from = null; }) }),
      h('div', { class: 'group', role: 'group', 'aria-label': t('kind') }, h('div', { class: 'group-label' }, t('kind')),
        h('div', { class: 'seats' }, ['concealed', 'direct', 'added'].map((k) => h('button', {
          type: 'button', class: 'choice', testid: `kind-${k}`, 'aria-pressed': String(f.kind === k),
          disabled: k === 'direct' && f.seat != null && !ctx.claims(f.seat),
          onclick: () => pick((x) => { x.kind = k; }),
        }, t(`kind_${k}`)))),
        f.seat != null && !ctx.claims(f.seat) ? h('p', { class: 'muted small' }, t('xueliu_no_claims')) : null),
      f.kind === 'direct' ? seatButtons({ prefix: 'from', players: ctx.players, label: t('from_whom'),
        pressed: (i) => i === f.from, disabled: (i) => i === f.seat || ctx.out(i),
        onPick: (i) => A.edit((x) => { x.from = i; }) }) : null,
      tilePicker({ suits: ctx.suits, label: f.kind === 'added' && addedTile(ctx, f.seat) ? t('tile_of_peng') : t('tile'),
        pressed: (x) => x === f.tile, onPick: (tile) => A.edit((x) => { x.tile = tile; x.tileAuto = false; }) }),
    ];
  },
  confirm: (f, ctx, A) => {
    const miss = [f.seat == null && t('who_kong'), !f.kind && t('kind'),
      f.kind === 'direct' && f.from == null && t('from_whom'), !f.tile && t('tile')].filter(Boolean);
    if (miss.length) return missing(miss);
    if (f.kind === 'direct' && !ctx.claims(f.seat)) return t('codes.claim_after_win');
    const body = { type: 'kong', seat: f.seat, kind: f.kind, tile: f.tile };
    if (f.kind === 'direct') body.from = f.from;
    return A.record(body);
  },
};

// -- hu --------------------------------------------------------------------------------------
// The special wins (抢杠胡, 杠上花, 杠上炮, 海底, 天胡, 地胡) are each one control that sets the event's
// flag and its pattern together (wins.js); the pattern chips are the others. A winner's fan is the
// total: a number tapped or typed, or the chips' sum, with what the special wins add.
const fansOf = (ctx) => roomFan(patternList(), ctx.ruleset);

const newEntry = (ctx, seat, f) => ({
  mode: ctx.kept(seat) ? 'hand' : 'fan', fan: defaultFan(roomImplied(f, fansOf(ctx)), fansOf(ctx)), picked: {},
  hand: { tiles: [], melds: ctx.melds(seat), score: null, error: null, checking: false },
});
const entryOf = (f, seat, ctx) => f.entries[seat] || newEntry(ctx, seat, f);

// an edit of the win (who, from whom, self-drawn, the special wins): the flags that no longer fit
// are taken off, and each winner's fan follows what the special wins now add
function winEdit(ctx, A, fn) {
  const fans = fansOf(ctx);
  A.edit((x) => {
    const before = roomImplied(x, fans);
    const tile = x.tile;
    fn(x);
    fitFlags(x, ctx.ruleset);
    const after = roomImplied(x, fans);
    for (const e of Object.values(x.entries)) refan(e, before, after, fans);
    if (x.tile !== tile) for (const e of Object.values(x.entries)) Object.assign(e.hand, { tiles: [], score: null, error: null, checking: false });
  });
}

function patternPicker(f, entry, ctx, onEdit) {
  const table = ctx.ruleset.fan_table || 'qq';
  const fans = fansOf(ctx);
  const implied = roomImplied(f, fans);
  const baseImplied = implied.some((id) => fans[id].base);
  const pats = roomPatterns(patternList(), ctx.ruleset).filter((p) => !SPECIAL_IDS.has(p.id) && (p.id !== 'zimo' || f.selfDrawn));
  return h('div', { class: 'group patterns', role: 'group', 'aria-label': t('by_patterns') },
    h('div', { class: 'group-label' }, t('by_patterns')),
    h('div', { class: 'chips' }, pats.map((p) => h('button', {
      type: 'button', class: `chip${p.base ? '' : ' extra'}`, testid: `pattern-${p.id}`, disabled: p.base && baseImplied,
      'aria-pressed': String(!!entry.picked[p.id]), onclick: () => onEdit((e) => pickChip(e, p.id, roomImplied(f, fans), fans)),
    }, `${patternName(p.id)} ${t('fan_n', { fan: p.fan[table] })}${entry.picked[p.id] > 1 ? ` ${t('times', { n: entry.picked[p.id] })}` : ''}`))));
}

// the special wins: one button each, pressed when its flag is set (杠上花 / 杠上炮: after_kong,
// self-drawn or not); its label says what it adds in this room
function specialPicker(f, ctx, A) {
  const fans = fansOf(ctx);
  const label = (sp) => {
    const words = sp.id === 'gangshanghua' ? t('after_kong_self') : sp.id === 'gangshangpao' ? t('after_kong_discard') : t(sp.flag);
    const p = fans[sp.id];
    if (!p || !p.fan) return words;
    return `${words} ${p.base ? t('fan_n', { fan: p.fan }) : t('plus_fan', { fan: p.fan })}`;
  };
  return h('div', { class: 'group specials', role: 'group', 'aria-labelledby': 'g-specials' },
    h('div', { class: 'group-label', id: 'g-specials' }, t('flags')),
    h('div', { class: 'chips' }, SPECIALS.map((sp) => h('button', {
      type: 'button', class: 'chip special', testid: `special-${sp.id}`, 'aria-pressed': String(specialOn(f, sp.id)),
      onclick: () => winEdit(ctx, A, (x) => toggleSpecial(x, sp.id, ctx.round)),
    }, label(sp)))));
}

function winnerValue(f, entry, seat, ctx) {
  if (entry.mode === 'hand') {
    if (!entry.hand.score) return null;
    return { seat, hand: handJson(entry.hand, ctx.voids[seat]) };
  }
  if (!Number.isInteger(entry.fan) || entry.fan < 1) return null;
  const w = { seat, fan: entry.fan };
  const fans = fansOf(ctx);
  const patterns = entryPatterns(entry, roomImplied(f, fans), fans);
  if (patterns) w.patterns = patterns;
  return w;
}

// what the API would refuse about one winner, in words (or null)
function winnerProblem(f, entry, seat, ctx) {
  if (winnerValue(f, entry, seat, ctx) === null) {
    return entry.mode === 'hand' ? (entry.hand.error || t('hand_tiles', { n: handSize(entry.hand), size: 14 })) : t('fan');
  }
  const raw = entry.mode === 'hand' ? entry.hand.score.raw_fan ?? entry.hand.score.fan : entry.fan;
  if (!f.selfDrawn && f.from != null && raw === 1 && ctx.ruleset.dianpao_pinghu === false) return t('codes.dianpao_pinghu');
  return null;
}

// the event of the sheet
function huBody(f, ctx) {
  const body = { type: 'hu', from: f.selfDrawn ? null : f.from, tile: f.tile,
    winners: f.winners.map((s) => winnerValue(f, entryOf(f, s, ctx), s, ctx)) };
  for (const k of FLAGS) if (f.flags[k]) body[k] = true;
  return body;
}

// what the special wins need of the round, and the patterns' agreement with the flags, in words
function huProblem(body, ctx) {
  const need = specialProblem(body, ctx.round, ctx.ruleset);
  if (need) return t(`sp_need.${need.special}`, { name: need.seat == null ? '' : seatName(ctx.players, need.seat) });
  if (patternsContradiction(body, ctx.ruleset, patternList())) return t('codes.patterns_contradict_win');
  return null;
}

// one winner's fan, in the first step (a single winner) or its own step
function fanSection(f, seat, ctx, A) {
  const e = entryOf(f, seat, ctx);
  const onEdit = (fn) => A.edit((x) => { x.entries[seat] ||= newEntry(ctx, seat, x); fn(x.entries[seat]); });
  const modes = h('div', { class: 'seats' }, ['fan', 'hand'].map((m) => h('button', {
    type: 'button', class: 'choice', testid: `mode-${m}`, 'aria-pressed': String(e.mode === m),
    onclick: () => onEdit((x) => { x.mode = m; }),
  }, t(m === 'fan' ? 'by_fan' : 'by_hand'))));
  if (e.mode === 'hand') return [modes, f.step === 0 ? h('p', { class: 'muted small' }, t('hand_next')) : null];
  const pinghuBarred = !f.selfDrawn && f.from != null && ctx.ruleset.dianpao_pinghu === false;
  const pts = pointsFor(e.fan, ctx.ruleset, { selfDrawn: f.selfDrawn });
  return [
    modes,
    fanPicker(e.fan, (n) => onEdit((x) => { x.fan = n; x.picked = {}; }), { disabled: (n) => n === 1 && pinghuBarred }),
    pinghuBarred ? h('p', { class: 'muted small' }, t('codes.dianpao_pinghu')) : null,
    pts ? h('p', { class: 'lead points', testid: 'fan-points' }, pts.capped
      ? t(f.selfDrawn ? 'equals_capped_each' : 'equals_capped', { raw: e.fan, fan: pts.fan, points: pts.points })
      : t(f.selfDrawn ? 'equals_each' : 'equals', { points: pts.points })) : null,
    patternPicker(f, e, ctx, onEdit),
  ];
}

const hu = {
  // (the phone's own seat is a guess: the first other winner tapped takes its place)
  form: (ctx) => {
    const me = mine(ctx, (i) => !ctx.out(i));
    return { step: 0, selfDrawn: false, from: null, winners: me == null ? [] : [me], guess: me != null, tile: null, flags: {}, entries: {} };
  },
  // (a win entered again: as it was given — its flags, and each winner's fan and chips, or its hand)
  edit: (e, ctx) => {
    const f = { step: 0, selfDrawn: e.from == null, from: e.from ?? null, winners: (e.winners || []).map((w) => w.seat), guess: false,
      tile: e.tile || null, flags: {}, entries: {} };
    for (const k of FLAGS) if (e[k]) f.flags[k] = true;
    for (const w of e.winners || []) {
      const entry = newEntry(ctx, w.seat, f);
      if (w.hand) Object.assign(entry, { mode: 'hand', hand: { ...entry.hand, tiles: parseTiles(w.hand.tiles), melds: (w.hand.melds || []).map((m) => ({ ...m })) } });
      else {
        Object.assign(entry, { mode: 'fan', fan: w.fan });
        for (const id of w.patterns || []) if (!SPECIAL_IDS.has(id)) entry.picked[id] = (entry.picked[id] || 0) + 1;
      }
      f.entries[w.seat] = entry;
    }
    return f;
  },
  title: (f, ctx) => (f.step === 0 ? t('hu') : t('fan_for', { name: seatName(ctx.players, f.winners[f.step - 1]) })),
  confirmLabel: (f, ctx) => {
    if (f.step > 0) return f.step < f.winners.length ? t('next') : t('confirm');
    const byFan = f.winners.length === 1 && entryOf(f, f.winners[0], ctx).mode === 'fan';
    return byFan || !f.winners.length ? t('confirm') : t('next');
  },
  body: (f, ctx, A) => (f.step === 0 ? huMain(f, ctx, A) : huWinner(f, f.winners[f.step - 1], ctx, A)),
  confirm: (f, ctx, A) => {
    const record = () => {
      const body = huBody(f, ctx);
      return huProblem(body, ctx) || A.record(body);
    };
    if (f.step === 0) {
      const miss = [!f.selfDrawn && f.from == null && t('discarder'), !f.winners.length && t('winner'),
        !f.tile && t('win_tile')].filter(Boolean);
      if (miss.length) return missing(miss);
      const need = huProblem({ ...huBody(f, ctx), winners: f.winners.map((seat) => ({ seat })) }, ctx);
      if (need) return need; // (said at once, before any winner's own step)
      const seat = f.winners[0];
      const e = entryOf(f, seat, ctx);
      if (f.winners.length === 1 && e.mode === 'fan') { // one winner by fan: all on one sheet
        const bad = winnerProblem(f, e, seat, ctx);
        return bad || record();
      }
      toWinner(f, 1, ctx, A);
      return undefined;
    }
    const seat = f.winners[f.step - 1];
    const bad = winnerProblem(f, entryOf(f, seat, ctx), seat, ctx);
    if (bad) return bad;
    if (f.step < f.winners.length) { toWinner(f, f.step + 1, ctx, A); return undefined; }
    return record();
  },
};

// to the step of winner number `step`: its hand starts from the tile won (血流: from the hand it
// kept, which is whole at once and scored straight away)
function toWinner(f, step, ctx, A) {
  const seat = f.winners[step - 1];
  A.edit((x) => {
    x.step = step;
    const e = (x.entries[seat] ||= newEntry(ctx, seat, x));
    if (!e.hand.tiles.length) {
      const kept = ctx.kept(seat);
      e.hand.tiles = kept ? [x.tile, ...kept.tiles] : [x.tile];
      if (kept) e.hand.melds = kept.melds.map((m) => ({ ...m }));
    }
  });
  A.checkHand(['entries', String(seat), 'hand'], 'score');
}

function huMain(f, ctx, A) {
  const one = f.winners.length === 1 ? f.winners[0] : null;
  return [
    h('div', { class: 'group' }, h('button', {
      type: 'button', class: 'choice wide', testid: 'self-drawn', 'aria-pressed': String(f.selfDrawn),
      onclick: () => winEdit(ctx, A, (x) => { x.selfDrawn = !x.selfDrawn; if (x.selfDrawn) { x.from = null; x.winners = x.winners.slice(0, 1); } }),
    }, t('self_drawn'))),
    // (the phone's own seat, only guessed as the winner, may be the discarder: tapping it there takes it off the winners)
    seatButtons({ prefix: 'from', players: ctx.players, label: t('discarder'), pressed: (i) => i === f.from,
      disabled: (i) => ctx.out(i) || (f.winners.includes(i) && !f.guess),
      onPick: (i) => winEdit(ctx, A, (x) => {
        x.from = x.from === i ? null : i;
        if (x.from !== null) { x.selfDrawn = false; x.winners = x.winners.filter((w) => w !== i); }
      }) }),
    seatButtons({ prefix: 'seat', players: ctx.players, label: f.selfDrawn ? t('winner') : t('winners'),
      pressed: (i) => f.winners.includes(i), disabled: (i) => ctx.out(i) || i === f.from,
      onPick: (i) => winEdit(ctx, A, (x) => {
        if (x.winners.includes(i)) x.winners = x.winners.filter((s) => s !== i);
        else x.winners = x.selfDrawn || x.guess ? [i] : [...x.winners, i]; // (another winner replaces the guess)
        x.guess = false;
      }) }),
    tilePicker({ suits: ctx.suits, label: t('win_tile'), pressed: (x) => x === f.tile, onPick: (tile) => winEdit(ctx, A, (x) => { x.tile = tile; }) }),
    specialPicker(f, ctx, A),
    one != null ? h('div', { class: 'group win-fan' }, h('div', { class: 'group-label' }, t('fan_for', { name: seatName(ctx.players, one) })),
      fanSection(f, one, ctx, A)) : null,
  ];
}

function huWinner(f, seat, ctx, A) {
  const e = entryOf(f, seat, ctx);
  const kept = ctx.kept(seat); // 血流: a seat that won with a hand wins again with that hand (§13.2)
  const head = h('p', { class: 'lead' }, `${seatName(ctx.players, seat)} · ${tileName(f.tile)}`);
  if (e.mode !== 'hand') return [head, fanSection(f, seat, ctx, A)];
  const modes = fanSection(f, seat, ctx, A)[0];
  return [head, modes, kept ? h('p', { class: 'muted small', testid: 'kept-hand' }, t('kept_hand')) : null, handEditor({
    hand: e.hand, size: 14, fixed: f.tile, suits: ctx.suits,
    result: e.hand.score ? breakdown(e.hand.score) : '',
    change: (fn, check = true) => {
      A.edit((x) => { const hd = x.entries[seat].hand; fn(hd); if (check) Object.assign(hd, { score: null, error: null }); });
      if (check) A.checkHand(['entries', String(seat), 'hand'], 'score');
    },
  })];
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

const newReport = (ctx, seat) => ({ status: ctx.won(seat) ? 'unlisted' : 'not_ting', fan: 1,
  hand: { tiles: [], melds: ctx.melds(seat), ting: null, error: null, checking: false } });

function statusStep(f, seat, ctx, A) {
  const e = f.entries[seat] || newReport(ctx, seat);
  const winner = ctx.won(seat);
  const pigs = ctx.ruleset.huazhu !== 0 && ctx.players.length === 4; // no 花猪 with huazhu = 0, nor with three players (§14)
  const statuses = winner ? ['unlisted', 'ting', 'hand'] : ['ting', 'hand', 'not_ting', ...(pigs ? ['huazhu'] : [])];
  const onEdit = (fn) => A.edit((x) => { x.entries[seat] ||= newReport(ctx, seat); fn(x.entries[seat]); });
  const parts = [h('div', { class: 'seats' }, statuses.map((s) => h('button', {
    type: 'button', class: 'choice', testid: `status-${s}`, 'aria-pressed': String(e.status === s),
    onclick: () => onEdit((x) => { x.status = s; }),
  }, t(`st_${s}`))))];
  if (e.status === 'ting') parts.push(fanPicker(e.fan, (n) => onEdit((x) => { x.fan = n; }), { label: t('dajiao_fan') }));
  if (e.status === 'hand') {
    const r = e.hand.ting;
    parts.push(handEditor({
      hand: e.hand, size: 13, suits: ctx.suits,
      result: r ? (r.ting ? t('ting_waits', { tiles: r.waits.map((w) => tileName(w.tile)).join(' '), fan: r.dajiao ? r.dajiao.fan : '' }) : shantenWords(e.hand.shanten)) : '',
      change: (fn, check = true) => {
        A.edit((x) => { x.entries[seat] ||= newReport(ctx, seat); const hd = x.entries[seat].hand; fn(hd); if (check) Object.assign(hd, { ting: null, error: null }); });
        if (check) A.checkHand(['entries', String(seat), 'hand'], 'ting', seat);
      },
    }));
  }
  return parts;
}

function reportProblem(f, seat, ctx) {
  const e = f.entries[seat] || newReport(ctx, seat);
  if (seatReport(e, seat, ctx) === null) return t('dajiao_fan');
  if (e.status === 'hand' && handSize(e.hand) !== 13) return t('hand_tiles', { n: handSize(e.hand), size: 13 });
  return null;
}

const reports = (f, seats, ctx) => seats.map((s) => seatReport(f.entries[s] || newReport(ctx, s), s, ctx)).filter((r) => r !== undefined);
const drawTitle = (ctx, seat) => t(ctx.won(seat) ? 'draw_for_winner' : 'draw_for', { name: seatName(ctx.players, seat) });

// The seats a draw asks about are worked out afresh at every step from the round as it stands, so
// that a seat that wins (on another phone) while the sheet is open is no longer asked about; the
// form keeps the seats already answered (`done`), each answer by seat (`entries`).
const asking = (f, seats) => seats.find((s) => !f.done.includes(s));
const lastAsked = (f, seats) => seats.filter((s) => !f.done.includes(s)).length <= 1;

const draw = {
  form: () => ({ done: [], entries: {} }), // (血流: a seat that has won need not be listed, §13.5)
  title: (f, ctx) => { const seat = asking(f, reportSeats(ctx)); return seat == null ? t('draw') : drawTitle(ctx, seat); },
  confirmLabel: (f, ctx) => (lastAsked(f, reportSeats(ctx)) ? t('confirm') : t('next')),
  body: (f, ctx, A) => { const seat = asking(f, reportSeats(ctx)); return seat == null ? [h('p', { class: 'lead' }, t('draw_none'))] : statusStep(f, seat, ctx, A); },
  confirm: (f, ctx, A) => {
    const seats = reportSeats(ctx);
    const seat = asking(f, seats);
    if (seat != null) {
      const bad = reportProblem(f, seat, ctx);
      if (bad) return bad;
      if (!lastAsked(f, seats)) { A.edit((x) => { x.done.push(seat); }); return undefined; }
    }
    return A.record({ type: 'draw', seats: reports(f, seats, ctx) });
  },
};

const escape = {
  form: () => ({ step: 0, seat: null, lastFour: false, done: [], entries: {} }),
  title: (f, ctx) => { const seat = f.step === 0 ? null : asking(f, reportSeats(ctx, f.seat)); return seat == null ? t('escape') : drawTitle(ctx, seat); },
  confirmLabel: (f, ctx) => ((f.step === 0 && !f.lastFour) || (f.step > 0 && lastAsked(f, reportSeats(ctx, f.seat))) ? t('confirm') : t('next')),
  body: (f, ctx, A) => (f.step === 0 ? [
    seatButtons({ prefix: 'seat', players: ctx.players, label: t('who_escapes'), pressed: (i) => i === f.seat,
      disabled: ctx.out, onPick: (i) => A.edit((x) => { x.seat = i; }) }),
    h('label', { class: 'check' }, h('input', { type: 'checkbox', testid: 'last-four', checked: f.lastFour,
      onchange: (e) => A.edit((x) => { x.lastFour = e.target.checked; }) }), t('last_four')),
  ] : (() => { const seat = asking(f, reportSeats(ctx, f.seat)); return seat == null ? [] : statusStep(f, seat, ctx, A); })()),
  confirm: (f, ctx, A) => {
    const others = f.seat == null ? [] : reportSeats(ctx, f.seat);
    if (f.step === 0) {
      if (f.seat == null) return missing([t('who_escapes')]);
      if (!f.lastFour || !others.length) return A.record({ type: 'escape', seat: f.seat, last_four: f.lastFour });
      A.edit((x) => { x.step = 1; x.done = []; });
      return undefined;
    }
    const seat = asking(f, others);
    if (seat != null) {
      const bad = reportProblem(f, seat, ctx);
      if (bad) return bad;
      if (!lastAsked(f, others)) { A.edit((x) => { x.done.push(seat); }); return undefined; }
    }
    return A.record({ type: 'escape', seat: f.seat, last_four: true, seats: reports(f, others, ctx) });
  },
};

// -- buy-in (a table with stakes, between rounds) -----------------------------------------------
const buyIn = {
  form: (ctx) => ({ seat: mine(ctx), coins: '' }),
  title: () => t('buy_in'),
  body: (f, ctx, A) => [
    seatButtons({ prefix: 'seat', players: ctx.players, label: t('who_buys'), pressed: (i) => i === f.seat,
      onPick: (i) => A.edit((x) => { x.seat = i; }) }),
    field(t('buy_coins'), h('input', { type: 'number', min: 1, step: 1, inputmode: 'numeric', testid: 'coins-input',
      value: f.coins, oninput: (e) => A.edit((x) => { x.coins = e.target.value; }) })),
  ],
  confirm: (f, ctx, A) => {
    if (f.seat == null) return missing([t('who_buys')]);
    const coins = Number(f.coins);
    if (!Number.isSafeInteger(coins) || coins < 1) return t('coins_bad');
    return A.record({ type: 'buy_in', seat: f.seat, coins });
  },
};

// -- which seat is this phone's ------------------------------------------------------------------
const whoAmI = {
  form: (ctx) => ({ seat: ctx.mySeat != null && ctx.mySeat >= 0 ? ctx.mySeat : null }),
  title: () => t('my_seat_q'),
  cancelLabel: () => t('my_seat_none'),
  cancel: (f, ctx, A) => A.setSeat(-1), // "just watching", also when a seat was said before (Escape keeps it)
  body: (f, ctx, A) => [
    h('p', { class: 'muted' }, t('my_seat_hint')),
    seatButtons({ prefix: 'me', players: ctx.players, label: t('my_seat'), pressed: (i) => i === f.seat,
      onPick: (i) => A.edit((x) => { x.seat = i; }) }),
  ],
  confirm: (f, ctx, A) => {
    if (f.seat == null) return missing([t('my_seat')]);
    A.setSeat(f.seat);
    return true;
  },
};

// -- confirmations ---------------------------------------------------------------------------
// form: {title, text, confirm: the label} + what to do, named: {then: 'round_end' | 'void' | 'again' | 'finish'}
const ask = {
  form: (ctx, extra) => extra,
  title: (f) => f.title,
  confirmLabel: (f) => f.confirmLabel || t('confirm'),
  cancelLabel: (f) => f.cancelLabel || t('cancel'),
  body: (f) => [h('p', { class: 'lead', testid: 'confirm-text' }, f.text)],
  confirm: (f, ctx, A) => A.answer(f),
};

const glossary = {
  form: () => ({}),
  title: () => t('glossary'),
  confirmLabel: () => t('close'),
  cancelLabel: () => t('close'),
  body: () => [h('dl', { class: 'glossary', testid: 'glossary' }, ['fan', 'ting', 'dajiao', 'huazhu', 'zimo', 'dianpao', 'gang', 'xueliu'].map((k) => [
    h('dt', {}, t(`gl.${k}`)), h('dd', {}, t(`gl.${k}_d`))]))],
  confirm: () => true,
};

export const DIALOGS = { roundStart, peng, kong, hu, draw, escape, buyIn, whoAmI, ask, glossary, ...MEND_DIALOGS };

export function undoForm(rec, players) {
  return { title: t('undo'), text: `${t('undo_q')} #${rec.seq}: ${describe(rec, players)}`, then: 'void', seq: rec.seq };
}
