// Events and transfers in words: "西 付给 东 12 分（点炮，清一色 3番）".
import { t, getLang } from './i18n.js';
import { tileName } from './tiles.js';

let PATTERNS = {};
export function setPatterns(list) { PATTERNS = Object.fromEntries(list.map((p) => [p.id, p])); }
export const patternList = () => Object.values(PATTERNS);
export const patternName = (id) => {
  const p = PATTERNS[id];
  if (!p) return id;
  return getLang() === 'zh' ? p.name : `${p.name_en} ${p.name}`;
};

export function seatName(players, i) {
  if (i == null) return '';
  const name = players && players[i];
  return name || t('player_n', { n: i + 1 });
}

// one record of the log (or an event about to be sent) in words
export function describe(rec, players, roundNumber) {
  const s = (i) => seatName(players, i);
  const tile = rec.tile ? tileName(String(rec.tile)) : '';
  switch (rec.type) {
    case 'round_start':
      return rec.dealer == null ? t('ev_round_start_any', { n: rec.round ?? roundNumber ?? '' })
        : t('ev_round_start', { n: rec.round ?? roundNumber ?? '', dealer: s(rec.dealer) });
    case 'round_end': return t('ev_round_end');
    case 'peng': return t('ev_peng', { seat: s(rec.seat), tile, from: s(rec.from) });
    case 'kong': return t(`ev_kong_${rec.kind}`, { seat: s(rec.seat), tile, from: s(rec.from) });
    case 'hu': {
      const winners = (rec.winners || []).map((w) => s(w.seat)).join(t('and'));
      const flags = ['after_kong', 'robbing_kong', 'last_tile', 'heavenly', 'earthly'].filter((f) => rec[f])
        .map((f) => (f === 'after_kong' ? t(rec.from == null ? 'after_kong_self' : 'after_kong_discard') : t(f)));
      const many = (rec.winners || []).length > 1;
      const base = rec.from == null ? t('ev_hu_self', { winners, tile })
        : t(many ? 'ev_hu_discard_n' : 'ev_hu_discard', { winners, tile, from: s(rec.from) });
      return flags.length ? `${base} · ${flags.join(', ')}` : base;
    }
    case 'draw': return t('ev_draw');
    case 'escape': return t('ev_escape', { seat: s(rec.seat) });
    case 'void': return t('ev_void', { target: rec.target });
    case 'buy_in': return t('ev_buy_in', { seat: s(rec.seat), coins: rec.coins });
    case 'penalty': return t(`ev_penalty_${rec.kind}`, { seat: s(rec.seat) });
    case 'adjust': return rec.note ? t('ev_adjust_note', { note: rec.note }) : t('ev_adjust');
    case 'correction': return rec.note ? t('ev_correction_note', { n: rec.round, note: rec.note }) : t('ev_correction', { n: rec.round });
    default: return rec.type;
  }
}

// a winner's fan as scored: {fan (after the cap), raw_fan, capped, patterns} from the fan it
// was given (declared: the cap applied here) — `cap` the ruleset's (null: none)
// a hand at a draw that is not ting, in words: how far it is (向听) when known — "没听牌（一向听）",
// "Not ting (1 tile from ready)" — else only "没听牌"
const ZH_NUMBERS = ['零', '一', '二', '三', '四', '五', '六', '七', '八', '九', '十'];
export function shantenWords(shanten) {
  if (!Number.isInteger(shanten) || shanten < 1) return t('not_ting');
  return t('not_ting_shanten', { n: shanten, zh: ZH_NUMBERS[shanten] ?? String(shanten) });
}

export function fanInfo(fan, patterns, cap) {
  const capped = cap != null && fan > cap;
  return { fan: capped ? cap : fan, raw_fan: fan, capped, patterns: patterns || [] };
}

// the fan words of one winner: "清一色 3番" (from the winner's patterns, or only the fan);
// a capped fan as "5番 → 封顶 4番"
export function fanWords(info) {
  if (!info) return '';
  const names = (info.patterns || []).map((p) => (typeof p === 'string' ? patternName(p) : patternName(p.id)
    + (p.count > 1 ? ` ${t('times', { n: p.count })}` : '')));
  const fan = info.capped && info.raw_fan != null && info.raw_fan !== info.fan
    ? t('fan_capped', { raw: info.raw_fan, fan: info.fan }) : t('fan_n', { fan: info.fan });
  return names.length ? `${names.join(' + ')} ${fan}` : fan;
}

// one transfer: "西 pays 东 12 — 点炮, 清一色 3番"; winInfo(seat) gives a winner's fan info
export function transferWords(tr, players, winInfo) {
  const head = t('pays', { from: seatName(players, tr.from), to: seatName(players, tr.to), points: tr.points });
  let why = t(`reasons.${tr.reason}`);
  if ((tr.reason === 'dianpao' || tr.reason === 'zimo') && winInfo) {
    const fw = fanWords(winInfo(tr.to));
    if (fw) why += getLang() === 'zh' ? `，${fw}` : `, ${fw}`;
  }
  return getLang() === 'zh' ? `${head}（${why}）` : `${head} — ${why}`;
}
