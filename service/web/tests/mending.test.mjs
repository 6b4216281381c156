// The sheets that mend the record (mending.js) and their words (words.js, i18n.js), as a player reads them.
import './setup.mjs';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setLang, t } from '../static/i18n.js';
import { textOf, h } from '../static/dom.js';
import { describe } from '../static/words.js';
import { DIALOGS } from '../static/dialogs.js';
import { zhahuFan } from '../static/mending.js';
import { mendForm, roundCtx } from '../static/mend.js';

const PLAYERS = ['东', '南', '西', '北'];
const RULESET = { preset: 'xuezhan', mode: 'xuezhan', scoring: 'exponential', base: 6, cap: null, zhahu_fan: null };
const ctx = (ruleset = RULESET, events = []) => roundCtx({ view: { players: PLAYERS, ruleset }, mySeat: 0, events });
const recorder = () => { const sent = []; return { sent, A: { record: (b) => { sent.push(b); return true; }, edit() {} } }; };

test('penalty: who and which; 诈胡 pays a win of zhahu_fan fan (else the cap, else 3)', () => {
  setLang('zh');
  assert.deepEqual([zhahuFan(RULESET), zhahuFan({ ...RULESET, cap: 4 }), zhahuFan({ ...RULESET, cap: 4, zhahu_fan: 2 })], [3, 4, 2]);
  const { sent, A } = recorder();
  const p = DIALOGS.penalty;
  assert.equal(p.confirm(p.form(ctx()), ctx(), A), t('missing', { what: `${t('who_penalty')}、${t('penalty_kind')}` }));
  assert.equal(p.confirm({ seat: 3, kind: 'zhahu' }, ctx(), A), true);
  assert.deepEqual(sent, [{ type: 'penalty', seat: 3, kind: 'zhahu' }]);
  const text = textOf(h('div', {}, p.body({ seat: 3, kind: 'zhahu' }, ctx({ ...RULESET, cap: 4 }), A)));
  assert.ok(text.includes('一把 4 番的胡，每家 48 分'), text);
  assert.deepEqual(p.edit({ type: 'penalty', seat: 2, kind: 'xianggong' }), { seat: 2, kind: 'xianggong' });
});

test('adjust: from, to, whole points and an optional note', () => {
  setLang('en');
  const { sent, A } = recorder();
  const a = DIALOGS.adjust;
  assert.equal(a.confirm({ from: 1, to: 0, points: '2.5', note: '' }, ctx(), A), t('adjust_points_bad'));
  assert.equal(a.confirm({ from: 1, to: 0, points: '', note: '' }, ctx(), A), t('adjust_points_bad'));
  assert.equal(a.confirm({ from: 1, to: 0, points: '10', note: ' tea ' }, ctx(), A), true);
  assert.equal(a.confirm({ from: 1, to: 0, points: '10', note: '' }, ctx(), A), true);
  assert.deepEqual(sent, [{ type: 'adjust', transfers: [{ from: 1, to: 0, points: 10 }], note: 'tea' },
    { type: 'adjust', transfers: [{ from: 1, to: 0, points: 10 }] }]);
});

test('the records of mending in words, zh and en', () => {
  const recs = [{ type: 'penalty', seat: 3, kind: 'zhahu' }, { type: 'penalty', seat: 2, kind: 'xianggong' },
    { type: 'adjust', transfers: [], note: '茶水' }, { type: 'adjust', transfers: [] },
    { type: 'correction', round: 1, events: [], note: '漏了暗杠' }, { type: 'correction', round: 2, events: [] }];
  setLang('zh');
  assert.deepEqual(recs.map((r) => describe(r, PLAYERS)), ['北 诈胡', '西 相公', '调账：茶水', '调账', '改了第 1 局的记录：漏了暗杠', '改了第 2 局的记录']);
  setLang('en');
  assert.deepEqual(recs.map((r) => describe(r, PLAYERS)), ['北: false win (诈胡)', '西: wrong tile count (相公)', 'Adjustment: 茶水',
    'Adjustment', 'Round 1 corrected: 漏了暗杠', 'Round 2 corrected']);
  for (const lang of ['zh', 'en']) {
    setLang(lang);
    for (const code of ['correction_conflict', 'round_not_found', 'xianggong', 'patterns_contradict_win', 'store_full']) {
      assert.notEqual(t(`codes.${code}`), `codes.${code}`, `${lang} ${code}`);
    }
    assert.ok(t('mend_conflict', { round: 2 }).includes('2'));
  }
});

test('the correction sheet: each entry with what it pays, before and after per seat, nothing confirmed unchanged', () => {
  setLang('en');
  const round = { number: 1, dealer: 0, status: 'ended', voids: null, deltas: [36, -12, -12, -12],
    events: [{ seq: 2, type: 'hu', from: null, tile: '5p', winners: [{ seat: 0, fan: 2 }],
      transfers: [1, 2, 3].map((s) => ({ from: s, to: 0, points: 12, reason: 'zimo', event: 2 })) }] };
  const m = DIALOGS.mend;
  const f = mendForm(round, 4);
  const A = { edit() {}, mend: { sheet() {}, save: () => 'saved' } };
  const text = textOf(h('div', {}, m.body(f, ctx(), A)));
  assert.ok(text.includes('东 self-drawn on 5 Dots') && text.includes('南 pays 东 12 — self-drawn (自摸), 2 fan'), text);
  assert.ok(text.includes('+36') && text.includes('Add at the end:'), text);
  assert.equal(m.title(f), 'Correct round 1');
  assert.equal(m.confirm(f, ctx(), A), t('mend_unchanged'));
  assert.equal(m.confirm({ ...f, entries: [] }, ctx(), A), 'saved');
  assert.equal(m.confirm({ number: 1, loading: true }, ctx(), A), t('loading'));
});
