// The 胡 sheet's special wins: one control sets the flag and the pattern together (wins.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { servedPatterns } from './setup.mjs';
import { impliedPatterns, winFlags, specialOn, toggleSpecial, fitFlags, roomFan, roomImplied, defaultFan, refan,
  entryPatterns, pickChip, patternsContradiction, specialProblem, SPECIALS } from '../static/wins.js';

const PATTERNS = servedPatterns();
const XUEZHAN = { preset: 'xuezhan', mode: 'xuezhan', fan_table: 'qq', scoring: 'exponential', base: 6, cap: null, zimo: 'none',
  haidi: false, jingoudiao: false, menqing: false, zhongzhang: false, jiaxinwu: false, kaertiao: false, yitiaolong: false };
const HAIDI = { ...XUEZHAN, haidi: true, zimo: 'fan' };
const CHENGDU = { ...XUEZHAN, preset: 'chengdu-points', mode: 'normal', fan_table: 'chengdu', scoring: 'linear', base: 1 };

const form = (more = {}) => ({ step: 0, selfDrawn: false, from: null, winners: [], tile: null, flags: {}, entries: {}, ...more });
const addedKong = { type: 'kong', seat: 1, kind: 'added', tile: '5m' };
const round = (last = null, more = {}) => ({ last, events: last ? 2 : 0, claims: !!last, dealer: 0, ...more });

// the hu event the sheet sends for form f with one winner given by `entry` (as dialogs.js builds it)
function event(f, entry, ruleset) {
  const fans = roomFan(PATTERNS, ruleset);
  const w = { seat: f.winners[0] ?? 3, fan: entry.fan };
  const patterns = entryPatterns(entry, roomImplied(f, fans), fans);
  if (patterns) w.patterns = patterns;
  return { type: 'hu', from: f.selfDrawn ? null : f.from, tile: f.tile, winners: [w], ...Object.fromEntries(Object.entries(winFlags(f)).filter(([k]) => k !== 'self_drawn')) };
}

test('the patterns a win’s flags imply', () => {
  assert.deepEqual(impliedPatterns({ from: 2, robbing_kong: true }), ['qiangganghu']);
  assert.deepEqual(impliedPatterns({ from: null, after_kong: true, last_tile: true }), ['gangshanghua', 'haidi']);
  assert.deepEqual(impliedPatterns({ self_drawn: false, after_kong: true }), ['gangshangpao']);
  assert.deepEqual(impliedPatterns({ self_drawn: true, heavenly: true }), ['tianhu']);
  assert.deepEqual(impliedPatterns({ self_drawn: true }), []);
});

test('抢杠胡, one tap after an added kong: the flag, the robbed seat as discarder, its tile; a second tap takes it off', () => {
  const f = form({ winners: [1], guess: true });
  toggleSpecial(f, 'qiangganghu', round(addedKong));
  assert.equal(specialOn(f, 'qiangganghu'), true);
  assert.deepEqual([f.flags.robbing_kong, f.selfDrawn, f.from, f.tile, f.winners], [true, false, 1, '5m', []]);
  toggleSpecial(f, 'qiangganghu', round(addedKong));
  assert.equal(specialOn(f, 'qiangganghu'), false);
  assert.equal(f.flags.robbing_kong, false);
});

test('杠上花 and 杠上炮 follow the kong just before; 天胡 the dealer, 地胡 another seat; each special excludes what cannot go with it', () => {
  const kong = { type: 'kong', seat: 2, kind: 'concealed', tile: '7s' };
  const f = form({ winners: [0] });
  toggleSpecial(f, 'gangshanghua', round(kong));
  assert.deepEqual([f.flags.after_kong, f.selfDrawn, f.from, f.winners], [true, true, null, [2]]);
  assert.equal(specialOn(f, 'gangshangpao'), false);
  const g = form({ winners: [2, 3] });
  toggleSpecial(g, 'gangshangpao', round(kong));
  assert.deepEqual([g.flags.after_kong, g.selfDrawn, g.from, g.winners], [true, false, 2, [3]]);
  toggleSpecial(g, 'qiangganghu', round(kong)); // (抢杠胡 in place of 杠上炮: one or the other)
  assert.deepEqual([g.flags.after_kong, g.flags.robbing_kong], [false, true]);
  const h = form({ winners: [3], flags: { last_tile: true } });
  toggleSpecial(h, 'tianhu', round(null, { dealer: 1 }));
  assert.deepEqual([h.flags.heavenly, h.flags.last_tile, h.selfDrawn, h.winners], [true, false, true, [1]]);
  toggleSpecial(h, 'dihu', round(null, { dealer: 1 }));
  assert.deepEqual([h.flags.heavenly, h.flags.earthly, h.winners], [false, true, []]);
  const k = form({ winners: [0], flags: { heavenly: true }, selfDrawn: true });
  toggleSpecial(k, 'haidi', round());
  assert.deepEqual([k.flags.heavenly, k.flags.last_tile], [false, true]);
});

test('what cannot go with self-drawn or a discard is taken off', () => {
  const f = form({ flags: { robbing_kong: true }, selfDrawn: true });
  assert.equal(fitFlags(f, XUEZHAN).flags.robbing_kong, false);
  const g = form({ flags: { heavenly: true, earthly: true }, selfDrawn: false, entries: { 0: { mode: 'fan', fan: 2, picked: { zimo: 1, pinghu: 1 } } } });
  fitFlags(g, XUEZHAN);
  assert.deepEqual([g.flags.heavenly, g.flags.earthly, g.entries[0].picked], [false, false, { pinghu: 1 }]);
  assert.equal(fitFlags(form({ flags: { earthly: true } }), CHENGDU).flags.earthly, true); // (成都计番: 地胡 on the dealer's discard)
});

test('a winner’s fan follows the special wins: a number moves by what they add, chips add up with them', () => {
  const fans = roomFan(PATTERNS, XUEZHAN);
  assert.equal(defaultFan(['qiangganghu'], fans), 2);
  assert.equal(defaultFan(['tianhu'], fans), 6);
  const typed = { mode: 'fan', fan: 3, picked: {} };
  assert.equal(refan(typed, [], ['qiangganghu'], fans).fan, 4);
  assert.equal(refan(typed, ['qiangganghu'], [], fans).fan, 3);
  assert.equal(refan(typed, [], ['tianhu'], fans).fan, 6); // (天胡 is the base: from its own 6 fan)
  assert.equal(refan(typed, ['tianhu'], [], fans).fan, 1);
  assert.equal(entryPatterns(typed, ['qiangganghu'], fans), null); // (a number alone: no patterns sent)
  const chips = pickChip({ mode: 'fan', fan: 1, picked: {} }, 'qingyise', [], fans);
  assert.equal(chips.fan, 3);
  refan(chips, [], ['qiangganghu'], fans);
  assert.equal(chips.fan, 4);
  assert.deepEqual(entryPatterns(chips, ['qiangganghu'], fans), ['qingyise', 'qiangganghu']);
  assert.equal(pickChip(chips, 'qiangganghu', ['qiangganghu'], fans).fan, 4); // (a special win is no chip)
  const chengdu = roomFan(PATTERNS, CHENGDU);
  assert.equal(refan({ mode: 'fan', fan: 1, picked: {} }, [], roomImplied(form({ selfDrawn: true, flags: { after_kong: true } }), chengdu), chengdu).fan, 3);
  assert.deepEqual(roomImplied(form({ flags: { after_kong: true } }), chengdu), []); // (杠上炮 is worth 0 there: never listed)
});

test('a winner’s patterns against the flags, as the service checks them (docs/rules.md §15.1)', () => {
  const robbed = { type: 'hu', from: 2, tile: '5m', winners: [{ seat: 0, fan: 2, patterns: ['qiangganghu'] }] };
  assert.deepEqual(patternsContradiction(robbed, XUEZHAN, PATTERNS), { seat: 0, pattern: 'qiangganghu', flag: 'robbing_kong' });
  assert.equal(patternsContradiction({ ...robbed, robbing_kong: true, winners: [{ seat: 0, fan: 2, patterns: ['pinghu', 'qiangganghu'] }] }, XUEZHAN, PATTERNS), null);
  assert.equal(patternsContradiction({ ...robbed, robbing_kong: true, winners: [{ seat: 0, fan: 1, patterns: ['pinghu'] }] }, XUEZHAN, PATTERNS).pattern, 'qiangganghu');
  assert.equal(patternsContradiction({ ...robbed, robbing_kong: true, winners: [{ seat: 0, fan: 2 }] }, XUEZHAN, PATTERNS), null); // (fan only)
  const pao = { type: 'hu', from: 1, tile: '3p', after_kong: true, winners: [{ seat: 3, fan: 1, patterns: ['pinghu'] }] };
  assert.equal(patternsContradiction(pao, XUEZHAN, PATTERNS).pattern, 'gangshangpao');
  assert.equal(patternsContradiction(pao, CHENGDU, PATTERNS), null); // (worth 0 under chengdu)
  assert.equal(patternsContradiction({ ...pao, after_kong: false, winners: [{ seat: 3, fan: 2, patterns: ['pinghu', 'zimo'] }] }, HAIDI, PATTERNS).pattern, 'zimo');
  assert.equal(patternsContradiction({ ...pao, after_kong: false, winners: [{ seat: 3, fan: 2, patterns: ['pinghu', 'haidi'] }] }, HAIDI, PATTERNS).pattern, 'haidi');
  assert.equal(patternsContradiction({ ...pao, after_kong: false, last_tile: true, winners: [{ seat: 3, fan: 1, patterns: ['pinghu'] }] }, HAIDI, PATTERNS), null); // (haidi: only-if)
});

test('whatever is tapped, in any order, the sheet never sends patterns that contradict its flags, and they add up to the fan', () => {
  const taps = [...SPECIALS.map((s) => s.id), 'self', 'chip:qingyise', 'chip:gen', 'chip:zimo', 'fan:3'];
  const kong = { type: 'kong', seat: 1, kind: 'added', tile: '5m' };
  let checked = 0;
  for (const ruleset of [XUEZHAN, HAIDI, CHENGDU]) {
    const fans = roomFan(PATTERNS, ruleset);
    for (const a of taps) for (const b of taps) for (const c of taps) {
      const f = form({ winners: [3], from: 1 });
      for (const tap of [a, b, c]) {
        const before = roomImplied(f, fans);
        if (tap === 'self') f.selfDrawn = !f.selfDrawn;
        else if (tap.startsWith('chip:')) {
          const id = tap.slice(5);
          f.entries[3] ||= { mode: 'fan', fan: defaultFan(before, fans), picked: {} };
          if (id !== 'zimo' || f.selfDrawn) pickChip(f.entries[3], id, before, fans);
        } else if (tap.startsWith('fan:')) {
          f.entries[3] = { mode: 'fan', fan: Number(tap.slice(4)), picked: {} };
        } else toggleSpecial(f, tap, round(kong));
        fitFlags(f, ruleset);
        const after = roomImplied(f, fans);
        for (const e of Object.values(f.entries)) refan(e, before, after, fans);
      }
      if (!f.winners.length) f.winners = [3];
      if (!f.selfDrawn && f.from == null) f.from = 1;
      const entry = f.entries[f.winners[0]] || f.entries[3] || { mode: 'fan', fan: defaultFan(roomImplied(f, fans), fans), picked: {} };
      const ev = event(f, entry, ruleset);
      assert.equal(patternsContradiction(ev, ruleset, PATTERNS), null, JSON.stringify([ruleset.fan_table, a, b, c, ev]));
      const listed = ev.winners[0].patterns;
      if (listed) assert.equal(listed.reduce((s, id) => s + fans[id].fan, 0), ev.winners[0].fan, JSON.stringify([a, b, c, ev]));
      checked += 1;
    }
  }
  assert.equal(checked, 3 * taps.length ** 3);
});

test('what each special win needs of the round', () => {
  const rob = { type: 'hu', from: 1, tile: '5m', robbing_kong: true, winners: [{ seat: 0 }] };
  assert.equal(specialProblem(rob, round(addedKong), XUEZHAN), null);
  assert.deepEqual(specialProblem({ ...rob, tile: '6m' }, round(addedKong), XUEZHAN), { special: 'qiangganghu', seat: 1 });
  assert.deepEqual(specialProblem(rob, round({ ...addedKong, kind: 'concealed' }), XUEZHAN), { special: 'qiangganghu', seat: 1 });
  assert.deepEqual(specialProblem(rob, round(null), XUEZHAN), { special: 'qiangganghu', seat: 1 });
  const kong = { type: 'kong', seat: 2, kind: 'concealed', tile: '7s' };
  const hua = { type: 'hu', from: null, tile: '3s', after_kong: true, winners: [{ seat: 2 }] };
  assert.equal(specialProblem(hua, round(kong), XUEZHAN), null);
  assert.deepEqual(specialProblem({ ...hua, winners: [{ seat: 3 }] }, round(kong), XUEZHAN), { special: 'gangshanghua', seat: 3 });
  const pao = { type: 'hu', from: 2, tile: '3s', after_kong: true, winners: [{ seat: 0 }] };
  assert.equal(specialProblem(pao, round(kong), XUEZHAN), null);
  assert.equal(specialProblem({ ...pao, from: 1 }, round(kong), XUEZHAN).special, 'gangshangpao');
  const tian = { type: 'hu', from: null, tile: '1m', heavenly: true, winners: [{ seat: 0 }] };
  assert.equal(specialProblem(tian, round(null), XUEZHAN), null);
  assert.equal(specialProblem(tian, round(kong), XUEZHAN).special, 'tianhu');
  assert.equal(specialProblem({ ...tian, winners: [{ seat: 1 }] }, round(null), XUEZHAN).special, 'tianhu');
  const di = { type: 'hu', from: null, tile: '1m', earthly: true, winners: [{ seat: 1 }] };
  assert.equal(specialProblem(di, round(null), XUEZHAN), null);
  assert.equal(specialProblem(di, round(kong), XUEZHAN).special, 'dihu');
  assert.equal(specialProblem({ ...di, from: 0 }, round(null), XUEZHAN).special, 'dihu');
  assert.equal(specialProblem({ ...di, from: 0 }, round(null), CHENGDU), null);
});
