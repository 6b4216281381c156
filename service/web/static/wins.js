// A win as the 胡 sheet builds it (pure: no DOM, no network; node-tested).
//
// The special wins (docs/rules.md §5.2, §6, §15.1) are each ONE control: 抢杠胡, 杠上花, 杠上炮,
// 海底, 天胡, 地胡 set the `hu` event's flag, and the pattern that flag implies is counted in the
// fan and listed with the winner's patterns, together — a chip that set only the pattern paid a
// 抢杠胡 as a plain win with the kong kept. From a win's flags this module derives the patterns
// they imply (impliedPatterns), the fan a winner's entry adds up to (refan, entryPatterns), the
// check that a winner's patterns agree with the flags (patternsContradiction: what the service
// refuses as `patterns_contradict_win`), and what each special win needs of the round so far
// (specialProblem: the event just before it, the dealer).
//
// A form (the sheet's value): {selfDrawn, from, winners: [seats], tile, flags: {after_kong, …}, …};
// an entry (one winner given by fan): {mode: 'fan', fan: the total fan, picked: {pattern id: count}}
// where `picked` holds the chips tapped (never a special win's pattern: those follow the flags).
// A round (what the sheet knows of it): {last: the last standing event of the round or null,
// events: how many stand, claims: whether any 碰 or 杠 stands, dealer}.
import { roomPatterns } from './round.js';

export const FLAGS = ['after_kong', 'robbing_kong', 'last_tile', 'heavenly', 'earthly'];

// each special win: its pattern, the flag it sets, the self-drawn it needs (null: either; 地胡 is
// self-drawn, or under the chengdu fan table also on the dealer's discard)
export const SPECIALS = [
  { id: 'qiangganghu', flag: 'robbing_kong', self: false },
  { id: 'gangshanghua', flag: 'after_kong', self: true },
  { id: 'gangshangpao', flag: 'after_kong', self: false },
  { id: 'haidi', flag: 'last_tile', self: null },
  { id: 'tianhu', flag: 'heavenly', self: true },
  { id: 'dihu', flag: 'earthly', self: null },
];
export const SPECIAL_IDS = new Set(SPECIALS.map((s) => s.id));
const ALONE = new Set(['tianhu', 'dihu']); // (天胡 and 地胡 carry no other flag)

// the event's flags of a form: {self_drawn, after_kong: true, …}
export function winFlags(f) {
  const w = { self_drawn: !!f.selfDrawn };
  for (const k of FLAGS) if (f.flags && f.flags[k]) w[k] = true;
  return w;
}

// the patterns a win's flags imply (ids; `win` as winFlags gives it, or a hu event)
export function impliedPatterns(win) {
  const self = win.self_drawn ?? win.from == null;
  const out = [];
  if (win.robbing_kong) out.push('qiangganghu');
  if (win.after_kong) out.push(self ? 'gangshanghua' : 'gangshangpao');
  if (win.last_tile) out.push('haidi');
  if (win.heavenly) out.push('tianhu');
  if (win.earthly) out.push('dihu');
  return out;
}

// is special win `id` on in form f?
export function specialOn(f, id) {
  const sp = SPECIALS.find((s) => s.id === id);
  return !!(sp && f.flags[sp.flag]) && (sp.self == null || sp.self === !!f.selfDrawn);
}

// the room's patterns by id, with the fan of the room's table: {id: {base, fan}}
export function roomFan(patterns, ruleset) {
  const table = (ruleset && ruleset.fan_table) || 'qq';
  return Object.fromEntries(roomPatterns(patterns, ruleset).map((p) => [p.id, { base: !!p.base, fan: p.fan[table] || 0 }]));
}

// the implied patterns of form f that count in the room (a pattern worth 0 there is never listed)
export const roomImplied = (f, fans) => impliedPatterns(winFlags(f)).filter((id) => id in fans);

const baseOf = (ids, fans) => ids.find((id) => fans[id] && fans[id].base) || null;

// the fan the implied patterns add to a 平胡 (1番): their extras, and a base one (天胡) in place of 平胡
function added(ids, fans) {
  let n = 0;
  for (const id of ids) n += fans[id].base ? fans[id].fan - 1 : fans[id].fan;
  return n;
}

// the fan of a winner whose hand is not said: 平胡 with what the flags imply
export const defaultFan = (implied, fans) => 1 + added(implied, fans);

// the patterns tapped plus the implied ones (a base one implied — 天胡 — replaces the base chips)
function listed(entry, implied, fans) {
  const base = baseOf(implied, fans);
  const out = [];
  for (const [id, n] of Object.entries(entry.picked || {})) {
    if (!fans[id] || SPECIAL_IDS.has(id) || (base && fans[id].base)) continue;
    for (let i = 0; i < n; i += 1) out.push(id);
  }
  return [...out, ...implied];
}
const sumFan = (ids, fans) => ids.reduce((s, id) => s + (fans[id] ? fans[id].fan : 0), 0);
const chipsTapped = (entry) => Object.keys(entry.picked || {}).length > 0;

// the entry's fan once the implied patterns changed from `before` to `after`: with chips, their sum
// and the implied ones; given as a number, the number moves by what the implied patterns add (a
// base one — 天胡, 地胡 — coming or going starts again from its own fan)
export function refan(entry, before, after, fans) {
  if (!entry || entry.mode !== 'fan') return entry;
  if (chipsTapped(entry)) {
    entry.fan = sumFan(listed(entry, after, fans), fans);
  } else if (Number.isInteger(entry.fan)) {
    entry.fan = baseOf(before, fans) !== baseOf(after, fans) ? defaultFan(after, fans)
      : Math.max(1, entry.fan + added(after, fans) - added(before, fans));
  }
  return entry;
}

// the patterns to send with a winner given by fan: the chips tapped and the implied ones, when they
// add up to its fan; null (the fan alone) when no chip was tapped
export function entryPatterns(entry, implied, fans) {
  if (!chipsTapped(entry)) return null;
  const ids = listed(entry, implied, fans);
  return ids.length && sumFan(ids, fans) === entry.fan ? ids : null;
}

// a chip tapped: a base pattern replaces the other base chip (again: off), 根 counts up to 4, any
// other toggles; the fan is then the chips' sum with the implied patterns
export function pickChip(entry, id, implied, fans) {
  const p = fans[id];
  if (!p || SPECIAL_IDS.has(id)) return entry;
  if (p.base) {
    for (const q of Object.keys(entry.picked)) if (q !== id && fans[q] && fans[q].base) delete entry.picked[q];
    if (entry.picked[id]) delete entry.picked[id]; else entry.picked[id] = 1;
  } else if (id === 'gen') {
    entry.picked.gen = ((entry.picked.gen || 0) + 1) % 5;
    if (!entry.picked.gen) delete entry.picked.gen;
  } else if (entry.picked[id]) delete entry.picked[id]; else entry.picked[id] = 1;
  const ids = listed(entry, implied, fans);
  if (chipsTapped(entry) && ids.length) entry.fan = sumFan(ids, fans);
  return entry;
}

// the flags that cannot go with the rest of the form, taken off: no 抢杠胡 self-drawn, no 天胡 on a
// discard, no 地胡 on a discard but under the chengdu table; no 自摸加番 chip on a discard
export function fitFlags(f, ruleset) {
  if (f.selfDrawn) f.flags.robbing_kong = false;
  if (!f.selfDrawn) {
    f.flags.heavenly = false;
    if (((ruleset && ruleset.fan_table) || 'qq') !== 'chengdu') f.flags.earthly = false;
    for (const e of Object.values(f.entries || {})) if (e.picked) delete e.picked.zimo;
  }
  return f;
}

// special win `id` tapped on form f: on (its flag set, the other flags that cannot go with it off,
// and what the round tells filled in: the robbed kong's seat and tile, the kong's seat, the
// dealer), or off again. `round` as above.
export function toggleSpecial(f, id, round) {
  const sp = SPECIALS.find((s) => s.id === id);
  if (!sp) return f;
  if (specialOn(f, id)) {
    f.flags[sp.flag] = false;
    return f;
  }
  for (const k of FLAGS) {
    if (ALONE.has(id) || (k === 'heavenly' || k === 'earthly') || (id === 'qiangganghu' && k === 'after_kong')
      || ((id === 'gangshanghua' || id === 'gangshangpao') && k === 'robbing_kong')) f.flags[k] = false;
  }
  f.flags[sp.flag] = true;
  const last = round && round.last;
  const kong = last && last.type === 'kong' ? last : null;
  const others = (seat) => f.winners.filter((w) => w !== seat);
  switch (id) {
    case 'qiangganghu':
      f.selfDrawn = false;
      if (kong && kong.kind === 'added') {
        f.from = kong.seat;
        f.winners = others(kong.seat);
        f.tile = kong.tile;
      }
      break;
    case 'gangshanghua':
      f.selfDrawn = true;
      f.from = null;
      f.winners = kong ? [kong.seat] : f.winners.slice(0, 1);
      break;
    case 'gangshangpao':
      f.selfDrawn = false;
      if (kong) { f.from = kong.seat; f.winners = others(kong.seat); }
      break;
    case 'tianhu':
      f.selfDrawn = true;
      f.from = null;
      if (round && round.dealer != null) f.winners = [round.dealer];
      break;
    case 'dihu':
      f.selfDrawn = true;
      f.from = null;
      f.winners = (round && round.dealer != null ? others(round.dealer) : f.winners).slice(0, 1);
      break;
    default:
  }
  f.guess = false;
  return f;
}

// What the service checks of a winner's patterns against the hu event's flags (docs/rules.md §15.1):
// qiangganghu iff robbing_kong; gangshanghua iff after_kong and self-drawn; gangshangpao iff
// after_kong on a discard; haidi only with last_tile; zimo only self-drawn; tianhu / dihu iff
// heavenly / earthly ("iff" only where the pattern is worth fan in the room). The first winner that
// breaks it: {seat, pattern, flag}; null when every winner's patterns agree (or none lists any).
export function patternsContradiction(hu, ruleset, patterns) {
  const self = hu.from == null;
  const worth = new Set(roomPatterns(patterns, ruleset).map((p) => p.id));
  const rules = [ // [pattern, whether the event says so, "iff", the flag named]
    ['qiangganghu', !!hu.robbing_kong, true, 'robbing_kong'],
    ['gangshanghua', !!hu.after_kong && self, true, 'after_kong'],
    ['gangshangpao', !!hu.after_kong && !self, true, 'after_kong'],
    ['haidi', !!hu.last_tile, false, 'last_tile'],
    ['zimo', self, false, 'self_drawn'],
    ['tianhu', !!hu.heavenly, true, 'heavenly'],
    ['dihu', !!hu.earthly, true, 'earthly'],
  ];
  for (const w of hu.winners || []) {
    if (!w || !Array.isArray(w.patterns)) continue;
    const ids = new Set(w.patterns.map((p) => (typeof p === 'string' ? p : p.id)));
    for (const [id, holds, iff, flag] of rules) {
      if ((ids.has(id) && !holds) || (iff && holds && !ids.has(id) && worth.has(id))) return { seat: w.seat, pattern: id, flag };
    }
  }
  return null;
}

// What a special win needs of the round (docs/rules.md §5.2, §6), checked before it is sent:
// 抢杠胡 right after the discarder's added kong of the tile won; 杠上花 right after the winner's own
// kong; 杠上炮 right after the discarder's kong; 天胡 the dealer's, as the round's first event; 地胡 a
// non-dealer's, before any 碰 or 杠 (on a discard: the dealer's, under the chengdu table only).
// → null, or {special: its id, seat: the seat it is about}
export function specialProblem(hu, round, ruleset) {
  const self = hu.from == null;
  const last = round.last;
  const winner = hu.winners && hu.winners.length ? (typeof hu.winners[0] === 'object' ? hu.winners[0].seat : hu.winners[0]) : null;
  const kongBy = (seat) => !!last && last.type === 'kong' && last.seat === seat;
  if (hu.robbing_kong && !(kongBy(hu.from) && last.kind === 'added' && last.tile === hu.tile)) return { special: 'qiangganghu', seat: hu.from };
  if (hu.after_kong && self && !kongBy(winner)) return { special: 'gangshanghua', seat: winner };
  if (hu.after_kong && !self && !kongBy(hu.from)) return { special: 'gangshangpao', seat: hu.from };
  if (hu.heavenly && (round.events > 0 || !self || winner !== round.dealer)) return { special: 'tianhu', seat: round.dealer };
  const chengdu = ((ruleset && ruleset.fan_table) || 'qq') === 'chengdu';
  if (hu.earthly && (round.claims || winner === round.dealer || (!self && (!chengdu || hu.from !== round.dealer)))) {
    return { special: 'dihu', seat: round.dealer };
  }
  return null;
}
