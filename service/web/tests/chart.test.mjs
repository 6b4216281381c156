// The charts: the series (an evening's balances, a player's trend), round ticks, the geometry in px,
// the SVG and the picture's drawing commands.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { textOf } from '../static/dom.js';
import { balanceSeries, trendSeries, niceStep, chartGeometry, chartSvg, chartOps, withChart, SEAT_COLORS } from '../static/chart.js';

const ROUNDS = [
  { number: 1, status: 'ended', deltas: [36, -12, -12, -12] },
  { number: 3, status: 'ended', deltas: [0, 0, 0, 0], adjusted: [-10, 10, 0, 0] },
  { number: 2, status: 'ended', deltas: [-6, 6, 0, 0] },
  { number: 4, status: 'playing', deltas: [99, -99, 0, 0] },
];

test('an evening: 0, then each seat\'s balance after each ended round (adjusts before a round in it)', () => {
  const { labels, series } = balanceSeries(ROUNDS, 4);
  assert.deepEqual(labels, [0, 1, 2, 3]);
  assert.deepEqual(series, [[0, 36, 30, 20], [0, -12, -6, 4], [0, -12, -12, -12], [0, -12, -12, -12]]);
  // balances as they stand that differ from the last point (an adjust after the last round): one point more
  const more = balanceSeries(ROUNDS, 4, [25, -1, -12, -12]);
  assert.deepEqual(more.labels, [0, 1, 2, 3, null]);
  assert.deepEqual(more.series[0], [0, 36, 30, 20, 25]);
  assert.deepEqual(balanceSeries(ROUNDS, 4, [20, 4, -12, -12]).labels, [0, 1, 2, 3]); // (the same: no point more)
  assert.deepEqual(balanceSeries([], 3).series, [[0], [0], [0]]);
});

test('a player\'s trend: the running total over their evenings in date order', () => {
  const history = [{ finished_at: '2026-03-14T22:00:00Z', total: -30 }, { finished_at: '2026-03-07T22:00:00Z', total: 120 },
    { finished_at: '2026-03-21T22:00:00Z', total: 15 }];
  assert.deepEqual(trendSeries(history), { labels: [0, 1, 2, 3], series: [[0, 120, 90, 105]] });
});

test('round steps: 1, 2 or 5 × 10ⁿ, at most four intervals', () => {
  assert.deepEqual([1, 7, 40, 48, 130, 2600, 0].map((r) => niceStep(r)), [0.5, 2, 10, 20, 50, 1000, 1]);
  for (const range of [3, 17, 99, 1234, 50000]) {
    const step = niceStep(range);
    assert.ok(range / step <= 4, `${range}/${step}`);
    assert.ok(range / step > 1, `${range}/${step}`);
  }
});

test('the geometry: every point inside the plot, zero a tick, higher values higher up', () => {
  const g = chartGeometry(balanceSeries(ROUNDS, 4), { width: 300, height: 200 });
  const { x, y, w, h } = g.plot;
  assert.ok(g.yTicks.some((tk) => tk.value === 0 && tk.y === g.zeroY));
  assert.ok(g.lo <= -12 && g.hi >= 36 && g.lo % g.step === 0 && g.hi % g.step === 0);
  for (const ln of g.lines) {
    for (const [px, py] of ln.points) {
      assert.ok(px >= x && px <= x + w && py >= y - 0.05 && py <= y + h + 0.05, `${px},${py}`);
    }
    assert.equal(ln.points[0][1], g.zeroY); // (everyone starts at 0)
  }
  const east = g.lines[0].points;
  assert.ok(east[1][1] < east[2][1] && east[2][1] < east[3][1]); // 36 > 30 > 20: lower on the screen
  assert.deepEqual(g.lines.map((ln) => ln.last), [20, 4, -12, -12]);
  assert.deepEqual(g.xTicks.map((tk) => tk.label), [0, 1, 2, 3]);
  assert.equal(g.xTicks[0].x, x);
  assert.equal(g.xTicks[3].x, x + w);
  // many rounds: at most nine labels under the plot, the last one among them
  const many = chartGeometry(balanceSeries(Array.from({ length: 40 }, (_, i) => ({ number: i + 1, deltas: [1, -1] })), 2));
  assert.ok(many.xTicks.length <= 9 && many.xTicks.at(-1).label === 40);
  // all zeros: still a plot with a range
  const flat = chartGeometry({ labels: [0, 1], series: [[0, 0]] });
  assert.ok(flat.hi > flat.lo && flat.lines[0].points.every(([, py]) => Number.isFinite(py)));
});

test('the SVG: one polyline per seat in its colour, its last balance, the legend with names', () => {
  const g = chartGeometry(balanceSeries(ROUNDS, 4));
  const svg = chartSvg(g, { names: ['老王', '小李', '阿珍', '客人'], label: 'balances', testid: 'balance-chart' });
  assert.equal(svg.tag, 'svg');
  assert.equal(svg.props.testid, 'balance-chart');
  const all = [];
  const walk = (v) => { if (typeof v !== 'string') { all.push(v); v.children.forEach(walk); } };
  walk(svg);
  const lines = all.filter((v) => v.tag === 'polyline');
  assert.deepEqual(lines.map((v) => [v.props['data-seat'], v.props['data-last'], v.props.stroke]),
    [[0, 20, SEAT_COLORS[0]], [1, 4, SEAT_COLORS[1]], [2, -12, SEAT_COLORS[2]], [3, -12, SEAT_COLORS[3]]]);
  assert.equal(lines[0].props.points.split(' ').length, 4);
  assert.match(textOf(svg), /老王 \+20/);
  assert.match(textOf(svg), /小李 \+4/);
  assert.match(textOf(svg), /阿珍 -12/);
  assert.ok(Number(svg.props.height) > g.height); // (the legend under the plot)
});

test('the picture\'s commands: a line per seat and the legend, added at the foot of a drawing', () => {
  const g = chartGeometry(balanceSeries(ROUNDS, 4), { width: 328 });
  const { ops, height } = chartOps(g, { x: 16, y: 100, names: ['A', 'B', 'C', 'D'] });
  const seatLines = ops.filter((o) => o.op === 'line' && SEAT_COLORS.includes(o.stroke));
  assert.equal(seatLines.length, 4);
  assert.deepEqual(seatLines[0].points[0], [16 + g.lines[0].points[0][0], 100 + g.lines[0].points[0][1]]);
  assert.ok(ops.filter((o) => o.op === 'text').every((o) => o.size >= 15)); // (as the picture's other text)
  assert.ok(height > g.height);
  const drawing = { width: 360, height: 300, ops: [{ op: 'rect', x: 0, y: 0, w: 360, h: 300, fill: '#fff' }] };
  const out = withChart(drawing, g, { title: 'Points', names: ['A', 'B', 'C', 'D'] });
  assert.ok(out.height > 300 + g.height);
  assert.equal(out.ops[0].h, out.height);
  assert.equal(drawing.ops[0].h, 300); // (the drawing given is left as it was)
  assert.ok(out.ops.some((o) => o.op === 'text' && o.text === 'Points'));
  for (const o of out.ops.filter((x) => x.op === 'line')) for (const [px, py] of o.points) assert.ok(px >= 0 && px <= 360 && py > 300 && py < out.height);
});
