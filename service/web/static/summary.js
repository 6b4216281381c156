// The evening's summary (GET /v1/tables/{id}/summary) in words, as plain text and as a picture's
// drawing commands (pure: no DOM; node-tested). The end screen draws the commands on a canvas.
//
// summary = {id, players, rounds, finished_at, seats: [{seat, name, total, rank, wins, zimo,
//   dianpao_paid, kongs: {direct, added, concealed}, huazhu_paid, dajiao_paid, escapes,
//   biggest_win: {round, fan, patterns, points} | null, coins?}], settle_up: [{from, to, points, coins?}]}
import { t } from './i18n.js';
import { patternName } from './words.js';

const nameOf = (summary, seat) => {
  const s = (summary.seats || []).find((x) => x.seat === seat);
  return (s && s.name) || (summary.players || [])[seat] || t('player_n', { n: seat + 1 });
};
const signed = (n) => (n > 0 ? `+${n}` : String(n));
const grouped = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

// "小李 付给 老王 84" (with stakes: "… 84（1,680 游戏币）"), one line per payment
export function settleUpWords(summary) {
  return (summary.settle_up || []).map((p) => (p.coins != null
    ? t('pays_to_coins', { from: nameOf(summary, p.from), to: nameOf(summary, p.to), points: p.points, coins: grouped(p.coins) })
    : t('pays_to', { from: nameOf(summary, p.from), to: nameOf(summary, p.to), points: p.points })));
}

// the seats best first (by rank, then seat)
export const ranked = (summary) => [...(summary.seats || [])].sort((a, b) => a.rank - b.rank || a.seat - b.seat);

// one seat's facts in words: ["胡 3 次", "自摸 1", …] (a fact that is zero is left out)
export function factWords(seat) {
  const out = [];
  if (seat.wins) out.push(t('wins_n', { n: seat.wins }));
  if (seat.zimo) out.push(t('zimo_n', { n: seat.zimo }));
  if (seat.dianpao_paid) out.push(t('dianpao_n', { n: seat.dianpao_paid }));
  const k = seat.kongs || {};
  const kongs = (k.direct || 0) + (k.added || 0) + (k.concealed || 0);
  if (kongs) out.push(t('kongs_n', { n: kongs, direct: k.direct || 0, added: k.added || 0, concealed: k.concealed || 0 }));
  if (seat.huazhu_paid) out.push(t('huazhu_n', { n: seat.huazhu_paid }));
  if (seat.dajiao_paid) out.push(t('dajiao_n', { n: seat.dajiao_paid }));
  if (seat.escapes) out.push(t('escapes_n', { n: seat.escapes }));
  const b = seat.biggest_win;
  if (b) {
    const pats = (b.patterns || []).map((p) => patternName(typeof p === 'string' ? p : p.id)).join(' ');
    out.push(pats ? t('biggest_pats', { round: b.round, pats, fan: b.fan, points: b.points }) : t('biggest', { round: b.round, fan: b.fan, points: b.points }));
  }
  return out;
}

// "第1名 老王 +120 分" (with stakes: " · 2,400 游戏币")
export function rankLine(seat) {
  const coins = seat.coins != null ? ` · ${grouped(seat.coins)} ${t('coins')}` : '';
  return `${t('rank_n', { n: seat.rank })} ${seat.name} ${t('total_pts', { points: signed(seat.total) })}${coins}`;
}

const when = (iso) => (iso ? String(iso).slice(0, 16).replace('T', ' ') : '');

// the whole summary as plain text (to copy into a chat)
export function summaryText(summary) {
  const lines = [`${t('end_title')} · ${t('summary_rounds', { n: summary.rounds })}${summary.finished_at ? ` · ${when(summary.finished_at)}` : ''}`, ''];
  lines.push(`${t('ranking')}:`);
  for (const s of ranked(summary)) {
    lines.push(rankLine(s));
    const facts = factWords(s);
    if (facts.length) lines.push(`  ${facts.join(t('list_sep'))}`);
  }
  lines.push('', `${t('settle_up')}:`);
  const pay = settleUpWords(summary);
  lines.push(...(pay.length ? pay : [t('settle_none')]));
  return lines.join('\n');
}

// The picture: drawing commands for a canvas `width` CSS px wide (the height follows):
// {op: 'rect', x, y, w, h, fill} and {op: 'text', x, y, text, size, weight, fill, align}; fonts
// are the system's (the end screen names a family list, never a file).
export function summaryDrawing(summary, { width = 360 } = {}) {
  const ops = [];
  const pad = 16;
  let y = 0;
  const text = (x, text, size, { weight = 400, fill = '#1d2421', align = 'left', dy = 0 } = {}) => {
    ops.push({ op: 'text', x, y: y + size + dy, text, size, weight, fill, align });
  };
  ops.push({ op: 'rect', x: 0, y: 0, w: width, h: 0, fill: '#f4f1e8' }); // (its height set below)
  ops.push({ op: 'rect', x: 0, y: 0, w: width, h: 64, fill: '#0b5d45' });
  y = 10;
  text(pad, t('end_title'), 20, { weight: 700, fill: '#ffffff' });
  y += 28;
  text(pad, `${t('summary_rounds', { n: summary.rounds })}${summary.finished_at ? ` · ${when(summary.finished_at)}` : ''}`, 13, { fill: '#e1efe8' });
  y = 76;
  for (const s of ranked(summary)) {
    ops.push({ op: 'rect', x: pad, y, w: width - 2 * pad, h: 46, fill: s.rank === 1 ? '#e1efe8' : '#ffffff' });
    text(pad + 10, t('rank_n', { n: s.rank }), 14, { weight: 700, fill: '#0b5d45', dy: 6 });
    text(pad + 70, s.name, 17, { weight: 700, dy: 4 });
    text(width - pad - 10, signed(s.total), 20, { weight: 700, fill: s.total < 0 ? '#b0302a' : '#0b5d45', align: 'right', dy: 3 });
    y += 50;
    const facts = factWords(s).join(t('list_sep'));
    if (facts) { text(pad + 10, facts, 11, { fill: '#5d6661' }); y += 18; }
  }
  y += 8;
  text(pad, t('settle_up'), 15, { weight: 700 });
  y += 24;
  const pay = settleUpWords(summary);
  for (const line of pay.length ? pay : [t('settle_none')]) { text(pad + 10, line, 15); y += 22; }
  y += 12;
  ops[0].h = y;
  return { width, height: y, ops };
}

// every piece of text a drawing shows, in order (what a test compares with the summary)
export const drawingText = (drawing) => drawing.ops.filter((o) => o.op === 'text').map((o) => o.text);
