// The end of the evening in words: the settle-up, the plain text, the picture's drawing commands.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { servedPatterns } from './setup.mjs';
import { setLang } from '../static/i18n.js';
import { setPatterns } from '../static/words.js';
import { settleUpWords, summaryText, summaryDrawing, drawingText, factWords, rankLine, ranked, PICTURE_MIN_TEXT, estimateWidth,
  wrapText } from '../static/summary.js';

setPatterns(servedPatterns());

const seat = (n, name, total, rank, more = {}) => ({ seat: n, name, total, rank, wins: 0, zimo: 0, dianpao_paid: 0,
  kongs: { direct: 0, added: 0, concealed: 0 }, huazhu_paid: 0, dajiao_paid: 0, escapes: 0, biggest_win: null, ...more });
const SUMMARY = {
  id: 't1', players: ['老王', '小李', '阿珍', '大刘'], rounds: 6, finished_at: '2026-03-01T23:41:07Z',
  seats: [
    seat(0, '老王', 120, 1, { wins: 3, zimo: 1, kongs: { direct: 1, added: 0, concealed: 1 },
      biggest_win: { round: 4, fan: 4, patterns: ['qingyise', 'gen'], points: 48 } }),
    seat(1, '小李', -84, 4, { dianpao_paid: 2, huazhu_paid: 1 }),
    seat(2, '阿珍', 0, 2),
    seat(3, '大刘', -36, 3, { escapes: 1, dajiao_paid: 1 }),
  ],
  settle_up: [{ from: 1, to: 0, points: 84 }, { from: 3, to: 0, points: 36 }],
};

test('the settle-up in words, both languages', () => {
  setLang('zh');
  assert.deepEqual(settleUpWords(SUMMARY), ['小李 付给 老王 84', '大刘 付给 老王 36']);
  setLang('en');
  assert.deepEqual(settleUpWords(SUMMARY), ['小李 pays 老王 84', '大刘 pays 老王 36']);
});

// a table with stakes (docs/rules.md §10.1): each seat's `coins` is its coin result, the settle-up squares
// them in coins; 小李 ran short (扣尽): down 84 points, it lost only its 1,000 coins
const STAKED = {
  ...SUMMARY,
  seats: SUMMARY.seats.map((x) => ({ ...x, coins: { 0: 2400, 1: -1000, 2: -20, 3: -1380 }[x.seat] })),
  settle_up: [{ from: 1, to: 0, coins: 1000 }, { from: 2, to: 0, coins: 20 }, { from: 3, to: 0, coins: 1380 }],
};

test('with stakes, one coin figure per person and the payments in coins', () => {
  setLang('zh');
  assert.deepEqual(settleUpWords(STAKED), ['小李 付给 老王 1,000 游戏币', '阿珍 付给 老王 20 游戏币', '大刘 付给 老王 1,380 游戏币']);
  assert.deepEqual(ranked(STAKED).map(rankLine), ['第1名 老王 +120 分 · +2,400 游戏币', '第2名 阿珍 0 分 · -20 游戏币',
    '第3名 大刘 -36 分 · -1,380 游戏币', '第4名 小李 -84 分 · -1,000 游戏币']);
  assert.equal(STAKED.seats.reduce((a, x) => a + x.coins, 0), 0);
  const text = summaryText(STAKED);
  assert.ok(!/undefined|null|NaN/.test(text), text);
  assert.ok(text.includes('老王 +120 分 · +2,400 游戏币') && text.includes('小李 付给 老王 1,000 游戏币'), text);
  // the picture: each person's coin result with its facts, the payments in coins
  const words = drawingText(summaryDrawing(STAKED)).join('\n');
  for (const x of ['+2,400 游戏币', '-20 游戏币', '-1,380 游戏币', '-1,000 游戏币', '大刘 付给 老王 1,380 游戏币']) assert.ok(words.includes(x), x);
  setLang('en');
  assert.deepEqual(settleUpWords(STAKED)[0], '小李 pays 老王 1,000 coins');
  assert.equal(rankLine(STAKED.seats[1]), '#4 小李 -84 points · -1,000 coins');
});

test('the ranking and each seat’s facts', () => {
  setLang('zh');
  assert.deepEqual(ranked(SUMMARY).map((s) => s.name), ['老王', '阿珍', '大刘', '小李']);
  assert.equal(rankLine(SUMMARY.seats[0]), '第1名 老王 +120 分');
  assert.deepEqual(factWords(SUMMARY.seats[0]), ['胡 3 次', '自摸 1', '杠 2（明 1 补 0 暗 1）', '最大一把：第 4 局 清一色 根 4番 48 分']);
  assert.deepEqual(factWords(SUMMARY.seats[2]), []);
  setLang('en');
  assert.deepEqual(factWords(SUMMARY.seats[3]), ['1 dajiao paid', '1 escape']);
});

test('English counts agree with their number: 1 kong, 2 kongs', () => {
  setLang('en');
  const one = seat(0, 'A', 6, 1, { wins: 1, escapes: 1, huazhu_paid: 1, kongs: { direct: 1, added: 0, concealed: 0 } });
  assert.deepEqual(factWords(one), ['1 win', '1 kong (1 direct, 0 added, 0 concealed)', '1 flower pig', '1 escape']);
  const two = seat(0, 'A', 6, 1, { wins: 2, escapes: 2, huazhu_paid: 2, kongs: { direct: 1, added: 1, concealed: 0 } });
  assert.deepEqual(factWords(two), ['2 wins', '2 kongs (1 direct, 1 added, 0 concealed)', '2 flower pigs', '2 escapes']);
  assert.ok(summaryText({ ...SUMMARY, rounds: 1 }).startsWith('Tonight\u2019s result · 1 round ·'));
  assert.ok(summaryText(SUMMARY).startsWith('Tonight\u2019s result · 6 rounds ·'));
  setLang('zh');
  assert.deepEqual(factWords(one).slice(0, 2), ['胡 1 次', '杠 1（明 1 补 0 暗 0）']);
});

test('the plain text to copy', () => {
  setLang('zh');
  const text = summaryText(SUMMARY);
  assert.equal(text.split('\n')[0], '今晚结算 · 6 局 · 2026-03-01 23:41');
  assert.ok(text.includes('第1名 老王 +120 分\n  胡 3 次，自摸 1'));
  assert.ok(text.endsWith('怎么给钱:\n小李 付给 老王 84\n大刘 付给 老王 36'));
  assert.ok(summaryText({ ...SUMMARY, settle_up: [] }).endsWith('不用给钱：大家持平。'));
});

test('the picture’s drawing: the same words as the summary, inside the picture', () => {
  setLang('zh');
  const d = summaryDrawing(SUMMARY, { width: 360 });
  const words = drawingText(d);
  assert.equal(words[0], '今晚结算');
  for (const w of ['老王', '小李', '+120', '-84', '小李 付给 老王 84', '大刘 付给 老王 36']) assert.ok(words.includes(w), w);
  assert.ok(d.height > 300 && d.height < 1200, d.height);
  for (const o of d.ops) {
    assert.ok(o.x >= 0 && o.x <= d.width && o.y >= 0 && o.y <= d.height, JSON.stringify(o));
    if (o.op === 'text') assert.ok(o.size >= PICTURE_MIN_TEXT && /^#[0-9a-f]{6}$/.test(o.fill));
  }
  assert.equal(d.ops[0].h, d.height); // (the background covers it all)
  // ranked in order, top to bottom
  const ys = ['老王', '阿珍', '大刘', '小李'].map((n) => d.ops.find((o) => o.text === n).y);
  assert.deepEqual([...ys].sort((a, b) => a - b), ys);
});

test('the picture is sized for a phone: no text under 15 px of its 360, none wider than its room (a long line wraps)', () => {
  for (const lang of ['zh', 'en']) {
    setLang(lang);
    const busy = seat(0, '欧阳娜娜的表姐夫', 120, 1, { wins: 12, zimo: 5, dianpao_paid: 3, huazhu_paid: 2, dajiao_paid: 2, escapes: 1,
      kongs: { direct: 3, added: 2, concealed: 4 }, biggest_win: { round: 14, fan: 6, patterns: ['qingyise', 'qidui', 'gen'], points: 192 } });
    const d = summaryDrawing({ ...SUMMARY, seats: [busy, ...SUMMARY.seats.slice(1)] }, { width: 360 });
    const texts = d.ops.filter((o) => o.op === 'text');
    for (const o of texts) {
      assert.ok(o.size >= PICTURE_MIN_TEXT, JSON.stringify(o));
      const left = o.align === 'right' ? o.x - estimateWidth(o.text, o.size) : o.x;
      assert.ok(estimateWidth(o.text, o.size) <= o.max + 0.01 && left >= 0 && left + estimateWidth(o.text, o.size) <= d.width, JSON.stringify(o));
    }
    // the busy seat's facts take several lines, all of them in the picture, in order
    const facts = factWords(busy).join(lang === 'zh' ? '，' : ', ');
    const lines = texts.filter((o) => o.size === 15 && o.y > texts.find((x) => x.text.startsWith('欧阳')).y).slice(0, 6).map((o) => o.text);
    assert.ok(lines.length >= 2, lines);
    assert.ok(facts.replace(/\s/g, '').startsWith(lines.join('').replace(/\s/g, '').slice(0, 40)), [facts, lines]);
    assert.ok(texts.find((o) => o.text.startsWith('欧阳')).text.length <= busy.name.length + 1);
  }
});

test('wrapping: at a separator where it can, between characters where it must', () => {
  const fits = (max) => (s) => s.length <= max;
  assert.deepEqual(wrapText('胡 3 次，自摸 1，点炮 2', fits(12)), ['胡 3 次，自摸 1，', '点炮 2']);
  assert.deepEqual(wrapText('2 wins, 1 self-drawn, 3 fed', fits(16)), ['2 wins,', '1 self-drawn,', '3 fed']);
  assert.deepEqual(wrapText('Biggest win: round 4', fits(12)), ['Biggest win:', 'round 4']);
  assert.deepEqual(wrapText('一二三四五六七八九十', fits(4)), ['一二三四', '五六七八', '九十']);
  assert.deepEqual(wrapText('short', fits(10)), ['short']);
  assert.deepEqual(wrapText('第 14 局 6番 192 分', fits(14)), ['第 14 局 6番', '192 分']); // (not "分" alone)
});
