// The sheets that mend the record (docs/rules.md §15): the correction of a round (改记录), a penalty
// (诈胡 / 相公) and an adjustment between rounds (调账). Each kind is a dialog as dialogs.js describes
// them (form / title / body / confirm); the correction sheet's logic is mend.js, its requests are
// made by the app (A.mend: mendapp.js).
import { h, field } from './dom.js';
import { t } from './i18n.js';
import { describe, seatName, transferWords, fanInfo } from './words.js';
import { seatButtons } from './picker.js';
import { pointsFor } from './round.js';
import { ROUND_EVENTS } from './state.js';
import { moveEntry, removeEntry, payments, afterKey, changed } from './mend.js';

const missing = (names) => t('missing', { what: names.join(t('and')) });
const signed = (x) => (x > 0 ? `+${x}` : String(x));

// a winner's fan as given (for the words of a 自摸 / 点炮 transfer)
const winInfoOf = (event, cap) => (seat) => {
  const w = (event.winners || []).find((x) => x.seat === seat);
  return w && w.fan != null ? fanInfo(w.fan, w.patterns, cap) : null;
};

// the kinds of entry the sheet can add, each entered on its own recording sheet
const ADDABLE = ROUND_EVENTS;

// -- the correction of a round -------------------------------------------------------------------
const mend = {
  form: (ctx, extra) => extra, // ({number, loading: true}: app.js reads the round, then fills it in)
  title: (f) => t('mend_title', { n: f.number }),
  confirmLabel: () => t('mend_save'),
  body: (f, ctx, A) => {
    if (f.loading || !f.entries) return [h('p', { class: 'muted', testid: 'mend-loading' }, f.loadError || t('loading'))];
    const ps = ctx.players;
    const fresh = f.after && f.after.for === afterKey(f);
    const entries = f.entries.map((e, i) => {
      const trs = fresh ? f.after.transfers[i] : e.was != null ? f.before.transfers[e.was] : null;
      const btn = (testid, label, aria, onclick, disabled = false) => h('button', { type: 'button', class: 'small', testid, 'aria-label': aria, disabled, onclick }, label);
      const what = describe(e.event, ps);
      return h('li', { key: `e${e.id}`, testid: `mend-entry-${i}`, class: `${e.was == null ? 'new' : ''}${f.at === i ? ' here' : ''}` },
        h('div', { class: 'ev' }, h('span', { class: 'seq' }, `${i + 1}.`), what, e.was == null ? h('span', { class: 'tag' }, t('mend_new')) : null),
        trs ? h('ul', { class: 'transfers' }, trs.length ? trs.map((tr) => h('li', {}, transferWords(tr, ps, winInfoOf(e.event, ctx.ruleset.cap))))
          : h('li', {}, t('nothing_paid'))) : null,
        h('div', { class: 'row-buttons' },
          btn(`mend-up-${i}`, '↑', `${t('mend_up')}: ${what}`, () => A.edit((x) => moveEntry(x, i, -1)), i === 0),
          btn(`mend-down-${i}`, '↓', `${t('mend_down')}: ${what}`, () => A.edit((x) => moveEntry(x, i, 1)), i === f.entries.length - 1),
          btn(`mend-edit-${i}`, t('mend_edit'), `${t('mend_edit')}: ${what}`, () => A.mend.sheet(e.event.type, i, true)),
          btn(`mend-insert-${i}`, t('mend_insert'), `${t('mend_insert')}: ${what}`, () => A.edit((x) => { x.at = x.at === i ? null : i; })),
          btn(`mend-delete-${i}`, t('remove'), `${t('remove')}: ${what}`, () => A.edit((x) => removeEntry(x, i)))));
    });
    const rows = payments(f).map((p) => h('tr', { key: `p${p.seat}` },
      h('th', { scope: 'row' }, seatName(ps, p.seat)),
      h('td', { testid: `mend-before-${p.seat}` }, signed(p.before)),
      h('td', { testid: `mend-after-${p.seat}` }, p.after == null ? '…' : signed(p.after)),
      h('td', { testid: `mend-change-${p.seat}`, class: p.change > 0 ? 'pos' : p.change < 0 ? 'neg' : '' }, p.change == null ? '' : signed(p.change))));
    return [
      h('p', { class: 'muted small' }, t(f.status === 'playing' ? 'mend_hint_playing' : 'mend_hint')),
      f.entries.length ? h('ol', { class: 'events mend', testid: 'mend-entries' }, entries) : h('p', { class: 'muted', testid: 'mend-empty' }, t('mend_empty')),
      h('div', { class: 'group', role: 'group', 'aria-labelledby': 'g-mend-add' },
        h('div', { class: 'group-label', id: 'g-mend-add' }, f.at == null ? t('mend_add_end') : t('mend_add_before', { n: f.at + 1 })),
        h('div', { class: 'chips' }, ADDABLE.map((k) => h('button', { type: 'button', class: 'chip', testid: `mend-add-${k}`,
          onclick: () => A.mend.sheet(k, f.at, false) }, t(k === 'penalty' ? 'penalty' : k))))),
      h('div', { class: 'scroll' }, h('table', { class: 'rounds mend-pay', testid: 'mend-payments' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, ''), h('th', { scope: 'col' }, t('mend_before')),
          h('th', { scope: 'col' }, t('mend_after')), h('th', { scope: 'col' }, t('mend_change')))),
        h('tbody', {}, rows))),
      f.afterError ? h('p', { class: 'bad small', testid: 'mend-after-error' }, f.afterError) : null,
      field(t('mend_note'), h('input', { type: 'text', testid: 'mend-note', maxlength: 500, value: f.note,
        placeholder: t('mend_note_hint'), oninput: (e) => A.edit((x) => { x.note = e.target.value; }) })),
    ];
  },
  confirm: (f, ctx, A) => {
    if (f.loading || !f.entries) return f.loadError || t('loading');
    if (!changed(f)) return t('mend_unchanged');
    return A.mend.save();
  },
};

// -- a penalty: 诈胡 (pays each other seat still in a win of zhahu_fan fan) or 相公 (pays nothing, may not win)
// the fan of a 诈胡 in this room (docs/rules.md#s15.3: zhahu_fan, else the cap, else 3)
export const zhahuFan = (ruleset) => ruleset.zhahu_fan ?? ruleset.cap ?? 3;

const penalty = {
  form: (ctx) => ({ seat: null, kind: null }),
  edit: (event) => ({ seat: event.seat ?? null, kind: event.kind ?? null }),
  title: () => t('penalty'),
  body: (f, ctx, A) => {
    const pts = pointsFor(zhahuFan(ctx.ruleset), ctx.ruleset);
    return [
      seatButtons({ prefix: 'seat', players: ctx.players, label: t('who_penalty'), pressed: (i) => i === f.seat,
        disabled: ctx.out, onPick: (i) => A.edit((x) => { x.seat = i; }) }),
      h('div', { class: 'group', role: 'group', 'aria-label': t('penalty_kind') }, h('div', { class: 'group-label' }, t('penalty_kind')),
        h('div', { class: 'seats' }, ['zhahu', 'xianggong'].map((k) => h('button', {
          type: 'button', class: 'choice', testid: `penalty-${k}`, 'aria-pressed': String(f.kind === k),
          onclick: () => A.edit((x) => { x.kind = k; }) }, t(`penalty_${k}`))))),
      f.kind ? h('p', { class: 'lead', testid: 'penalty-what' }, f.kind === 'zhahu'
        ? t('penalty_zhahu_d', { fan: zhahuFan(ctx.ruleset), points: pts ? pts.points : '?' }) : t('penalty_xianggong_d')) : null,
    ];
  },
  confirm: (f, ctx, A) => {
    const miss = [f.seat == null && t('who_penalty'), !f.kind && t('penalty_kind')].filter(Boolean);
    if (miss.length) return missing(miss);
    return A.record({ type: 'penalty', seat: f.seat, kind: f.kind });
  },
};

// -- an adjustment between rounds: points from one seat to another, with a note (茶水, a side bet…)
const adjust = {
  form: () => ({ from: null, to: null, points: '', note: '' }),
  title: () => t('adjust'),
  body: (f, ctx, A) => [
    h('p', { class: 'muted small' }, t('adjust_hint')),
    seatButtons({ prefix: 'from', players: ctx.players, label: t('adjust_from'), pressed: (i) => i === f.from,
      onPick: (i) => A.edit((x) => { x.from = i; if (x.to === i) x.to = null; }) }),
    seatButtons({ prefix: 'to', players: ctx.players, label: t('adjust_to'), pressed: (i) => i === f.to,
      disabled: (i) => i === f.from, onPick: (i) => A.edit((x) => { x.to = i; }) }),
    field(t('adjust_points'), h('input', { type: 'number', min: 1, step: 1, inputmode: 'numeric', testid: 'adjust-points',
      value: f.points, oninput: (e) => A.edit((x) => { x.points = e.target.value; }) })),
    field(t('mend_note'), h('input', { type: 'text', testid: 'adjust-note', maxlength: 500, value: f.note,
      placeholder: t('adjust_note_hint'), oninput: (e) => A.edit((x) => { x.note = e.target.value; }) })),
  ],
  confirm: (f, ctx, A) => {
    const miss = [f.from == null && t('adjust_from'), f.to == null && t('adjust_to')].filter(Boolean);
    if (miss.length) return missing(miss);
    const points = Number(f.points);
    if (String(f.points).trim() === '' || !Number.isSafeInteger(points) || points < 1) return t('adjust_points_bad');
    const body = { type: 'adjust', transfers: [{ from: f.from, to: f.to, points }] };
    const note = f.note.trim();
    if (note) body.note = note;
    return A.record(body);
  },
};

export const MEND_DIALOGS = { mend, penalty, adjust };
