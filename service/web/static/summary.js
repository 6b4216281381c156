// The evening's summary (GET /v1/tables/{id}/summary) in words, as plain text and as a picture's
// drawing commands (pure: no DOM; node-tested). The end screen draws the commands on a canvas.
//
// summary = {id, players, rounds, finished_at, seats: [{seat, name, total, rank, wins, zimo,
//   dianpao_paid, kongs: {direct, added, concealed}, huazhu_paid, dajiao_paid, escapes,
//   biggest_win: {round, fan, patterns, points} | null, coins?}], settle_up: [{from, to, points} | {from, to, coins}]}
// With stakes a seat's `coins` is its coin result over the evening and the settle-up is in coins
// (docs/rules.md §10.1): each person shows one coin figure, and the payments are coins.
import { t } from './i18n.js';
import { patternName } from './words.js';

const nameOf = (summary, seat) => {
  const s = (summary.seats || []).find((x) => x.seat === seat);
  return (s && s.name) || (summary.players || [])[seat] || t('player_n', { n: seat + 1 });
};
const signed = (n) => (n > 0 ? `+${n}` : String(n));
const grouped = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

// "小李 付给 老王 84" (with stakes, in coins: "小李 付给 老王 1,680 游戏币"), one line per payment
export function settleUpWords(summary) {
  return (summary.settle_up || []).map((p) => (p.coins != null
    ? t('pays_to_coins', { from: nameOf(summary, p.from), to: nameOf(summary, p.to), coins: grouped(p.coins) })
    : t('pays_to', { from: nameOf(summary, p.from), to: nameOf(summary, p.to), points: p.points })));
}

// a seat's coin result ("+2,400 游戏币"; a table without stakes: null)
export const coinResult = (seat) => (seat.coins != null ? `${seat.coins > 0 ? '+' : ''}${grouped(seat.coins)} ${t('coins')}` : null);

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

// "第1名 老王 +120 分" (with stakes, its coin result: " · +2,400 游戏币")
export function rankLine(seat) {
  const coins = seat.coins != null ? ` · ${coinResult(seat)}` : '';
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

// The picture, sized for a phone screen: drawing commands for a canvas `width` CSS px wide (a
// phone's width; the end screen paints it at 3 device px per CSS px, 1080 px wide, the width of a
// phone's screen, so that a chat shows it full width and sharp), the height following what it holds:
// {op: 'rect', x, y, w, h, fill} and {op: 'text', x, y, text, size, weight, fill, align, max}. No
// text is smaller than 15 px of the 360 (what a phone shows as body text), and none is squeezed:
// a line longer than its room (`max` px) wraps at a separator, a name too long is cut with "…".
// `measure(text, size, weight)` gives a text's width in px (the end screen measures with the
// system's fonts on a canvas; the default is an estimate: a CJK character is 1 em, others 0.6 em).
export const PICTURE_MIN_TEXT = 15;

export function estimateWidth(text, size) {
  let w = 0;
  for (const ch of String(text)) w += /[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\u3000-\u303f]/.test(ch) ? size : 0.6 * size;
  return w;
}

// `text` in lines that fit (`fits(line)`): broken after a list separator (，、； or ", ") where it
// can, else between words, else between characters
export function wrapText(text, fits) {
  const lines = [];
  let line = '';
  const put = (piece) => { if (!fits((line + piece).trimEnd())) return false; line += piece; return true; };
  const newLine = () => { if (line.trim()) lines.push(line.trimEnd()); line = ''; };
  for (const part of String(text).split(/(?<=[，、；]|, |; )/)) {
    if (put(part)) continue;
    newLine();
    for (const word of part.trimStart().split(/(?<= )/)) {
      if (put(word)) continue;
      newLine();
      for (const ch of word) if (!put(ch)) { newLine(); line = ch; }
    }
  }
  newLine();
  // (no word of one or two characters alone on the last line: the word before it joins it, if it fits)
  const n = lines.length;
  if (n > 1 && [...lines[n - 1]].length <= 2 && lines[n - 2].includes(' ')) {
    const at = lines[n - 2].lastIndexOf(' ');
    const joined = `${lines[n - 2].slice(at + 1)} ${lines[n - 1]}`;
    if (at > 0 && fits(joined)) lines.splice(n - 2, 2, lines[n - 2].slice(0, at), joined);
  }
  return lines;
}

// `text` cut to fit `max` (with "…")
function cut(text, fits) {
  if (fits(text)) return text;
  let out = '';
  for (const ch of String(text)) { if (!fits(`${out}${ch}…`)) break; out += ch; }
  return `${out}…`;
}

export function summaryDrawing(summary, { width = 360, measure = (text, size) => estimateWidth(text, size) } = {}) {
  const ops = [];
  const pad = 16;
  let y = 0;
  const text = (x, str, size, { weight = 400, fill = '#1d2421', align = 'left', dy = 0, max = width - x - pad } = {}) => {
    ops.push({ op: 'text', x, y: y + size + dy, text: str, size, weight, fill, align, max });
  };
  const fits = (size, weight, max) => (str) => measure(str, size, weight) <= max;
  ops.push({ op: 'rect', x: 0, y: 0, w: width, h: 0, fill: '#f4f1e8' }); // (its height set below)
  ops.push({ op: 'rect', x: 0, y: 0, w: width, h: 72, fill: '#0b5d45' });
  y = 10;
  text(pad, t('end_title'), 24, { weight: 700, fill: '#ffffff' });
  y += 34;
  text(pad, `${t('summary_rounds', { n: summary.rounds })}${summary.finished_at ? ` · ${when(summary.finished_at)}` : ''}`, 15, { fill: '#e1efe8' });
  y = 84;
  const inner = width - 2 * pad - 20; // (a row's text, inside its card)
  for (const s of ranked(summary)) {
    const facts = [coinResult(s), ...factWords(s)].filter(Boolean).join(t('list_sep'));
    const lines = facts ? wrapText(facts, fits(15, 400, inner)) : [];
    const total = signed(s.total);
    const nameX = pad + 66;
    const nameMax = width - pad - 10 - measure(total, 24, 700) - 10 - nameX;
    ops.push({ op: 'rect', x: pad, y, w: width - 2 * pad, h: 48 + 21 * lines.length + (lines.length ? 6 : 0), fill: s.rank === 1 ? '#e1efe8' : '#ffffff' });
    text(pad + 10, t('rank_n', { n: s.rank }), 16, { weight: 700, fill: '#0b5d45', dy: 6, max: nameX - pad - 14 });
    text(nameX, cut(s.name, fits(20, 700, nameMax)), 20, { weight: 700, dy: 4, max: nameMax });
    text(width - pad - 10, total, 24, { weight: 700, fill: s.total < 0 ? '#b0302a' : '#0b5d45', align: 'right', dy: 2, max: width - 2 * pad - 20 });
    y += 46;
    for (const line of lines) { text(pad + 10, line, 15, { fill: '#4a524e', max: inner }); y += 21; }
    y += lines.length ? 14 : 6;
  }
  y += 8;
  text(pad, t('settle_up'), 18, { weight: 700 });
  y += 28;
  const pay = settleUpWords(summary);
  for (const line of pay.length ? pay : [t('settle_none')]) {
    for (const part of wrapText(line, fits(17, 400, width - 2 * pad - 10))) { text(pad + 10, part, 17); y += 25; }
  }
  y += 14;
  ops[0].h = y;
  return { width, height: y, ops };
}

// every piece of text a drawing shows, in order (what a test compares with the summary)
export const drawingText = (drawing) => drawing.ops.filter((o) => o.op === 'text').map((o) => o.text);
