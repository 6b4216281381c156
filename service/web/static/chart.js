// Line charts drawn by the app (pure: no DOM, node-tested): each seat's balance across an evening's
// rounds (the end screen and its picture), a player's total across a club's evenings (their page).
//
//   const g = chartGeometry(balanceSeries(view.rounds, 4, summaryTotals), { width: 340, height: 190 });
//   chartSvg(g, { names, label })      → a vnode (<svg>) for the page
//   chartOps(g, { x, y, names })       → drawing commands for the share picture's canvas
//
// The geometry is plain numbers: the plot's box, the y ticks (round steps: 1, 2 or 5 × 10ⁿ, zero
// among them), the x ticks (round numbers), and per series its points in px.
import { h } from './dom.js';

// one colour per seat (東 南 西 北 order), told apart by hue and by lightness
export const SEAT_COLORS = ['#0b5d45', '#b0302a', '#1f5fbf', '#b07800'];

// each seat's balance before the first round (0) and after each ended round: the round's deltas
// summed, with the adjusts recorded before it (a round summary's `adjusted`); when `totals` (the
// balances as they stand) differ from the last point (an adjust after the last round), one point more
export function balanceSeries(rounds, n, totals = null) {
  const ended = (rounds || []).filter((r) => r.status !== 'playing' && Array.isArray(r.deltas))
    .sort((a, b) => a.number - b.number);
  const sums = new Array(n).fill(0);
  const series = Array.from({ length: n }, () => [0]);
  const labels = [0];
  for (const r of ended) {
    for (let i = 0; i < n; i += 1) {
      sums[i] += r.deltas[i] || 0;
      series[i].push(sums[i] + ((r.adjusted && r.adjusted[i]) || 0));
    }
    labels.push(r.number);
  }
  if (totals && totals.length === n && totals.some((v, i) => v !== series[i][series[i].length - 1])) {
    totals.forEach((v, i) => series[i].push(v));
    labels.push(null); // (after the last round: an adjust)
  }
  return { labels, series };
}

// a player's total across their evenings (a club history, oldest first): 0, then after each evening
export function trendSeries(history) {
  const list = [...(history || [])].sort((a, b) => String(a.finished_at).localeCompare(String(b.finished_at)));
  let sum = 0;
  const points = [0];
  for (const e of list) { sum += e.total; points.push(sum); }
  return { labels: points.map((_, i) => i), series: [points] };
}

// a round step for a range: 1, 2 or 5 × 10ⁿ, giving at most `most` intervals
export function niceStep(range, most = 4) {
  if (!(range > 0)) return 1;
  const raw = range / most;
  const mag = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

export function chartGeometry({ labels, series }, { width = 340, height = 190, left = 44, right = 10, top = 10, bottom = 24 } = {}) {
  const all = series.flat();
  const lo0 = Math.min(0, ...all);
  const hi0 = Math.max(0, ...all);
  const step = niceStep(hi0 - lo0 || 1);
  const lo = Math.floor(lo0 / step) * step;
  const hi = Math.max(Math.ceil(hi0 / step) * step, lo + step);
  const plot = { x: left, y: top, w: width - left - right, h: height - top - bottom };
  const count = Math.max(labels.length, 2);
  const xAt = (i) => plot.x + (plot.w * i) / (count - 1);
  const yAt = (v) => plot.y + plot.h - (plot.h * (v - lo)) / (hi - lo);
  const round1 = (v) => Math.round(v * 10) / 10;
  const yTicks = [];
  for (let v = lo; v <= hi + step / 2; v += step) yTicks.push({ value: v, y: round1(yAt(v)) });
  const every = Math.max(1, Math.ceil((labels.length - 1) / 8)); // (at most 9 labels under the plot)
  const xTicks = labels.map((label, i) => ({ label, x: round1(xAt(i)) }))
    .filter((tk, i) => tk.label != null && (i % every === 0 || i === labels.length - 1));
  const lines = series.map((values, s) => ({ seat: s, last: values[values.length - 1],
    points: values.map((v, i) => [round1(xAt(i)), round1(yAt(v))]) }));
  return { width, height, plot, lo, hi, step, zeroY: round1(yAt(0)), yTicks, xTicks, lines };
}

const signed = (n) => (n > 0 ? `+${n}` : String(n));
const pointsAttr = (points) => points.map(([x, y]) => `${x},${y}`).join(' ');

// the chart as an <svg> vnode: grid, axes' labels, one line per series (data-seat, its last value
// in data-last), a legend of names in the series' colours under it when `names` are given
export function chartSvg(g, { names = null, label = '', testid = 'chart', colors = SEAT_COLORS } = {}) {
  const legendRows = names ? Math.ceil(names.length / 2) : 0;
  const height = g.height + legendRows * 20;
  return h('svg', { class: 'chart', testid, viewBox: `0 0 ${g.width} ${height}`, width: g.width, height, role: 'img',
    'aria-label': label, xmlns: 'http://www.w3.org/2000/svg' },
    h('title', {}, label),
    g.yTicks.map((tk) => h('g', { key: `y${tk.value}` },
      h('line', { x1: g.plot.x, x2: g.plot.x + g.plot.w, y1: tk.y, y2: tk.y, stroke: tk.value === 0 ? '#7a837e' : '#dcd8cc', 'stroke-width': 1 }),
      h('text', { x: g.plot.x - 6, y: tk.y + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#4a524e' }, signed(tk.value)))),
    g.xTicks.map((tk) => h('text', { key: `x${tk.label}`, x: tk.x, y: g.plot.y + g.plot.h + 16, 'text-anchor': 'middle', 'font-size': 11, fill: '#4a524e' }, String(tk.label))),
    g.lines.map((ln) => h('polyline', { key: `s${ln.seat}`, 'data-seat': ln.seat, 'data-last': ln.last, points: pointsAttr(ln.points),
      fill: 'none', stroke: colors[ln.seat % colors.length], 'stroke-width': 2.5, 'stroke-linejoin': 'round', 'stroke-linecap': 'round' })),
    names ? names.map((name, i) => {
      const x = 8 + (i % 2) * (g.width / 2);
      const y = g.height + 6 + Math.floor(i / 2) * 20;
      return h('g', { key: `l${i}` },
        h('rect', { x, y: y + 3, width: 14, height: 4, fill: colors[i % colors.length] }),
        h('text', { x: x + 20, y: y + 10, 'font-size': 13, fill: '#1d2421' }, `${name} ${signed(g.lines[i] ? g.lines[i].last : 0)}`));
    }) : null);
}

// the chart as drawing commands for the picture's canvas, its top left at (x, y):
// {op: 'rect'}, {op: 'line', points, stroke, width} and {op: 'text'} (as summary.js's); → {ops, height}
export function chartOps(g, { x = 0, y = 0, names = null, colors = SEAT_COLORS } = {}) {
  const ops = [];
  const at = ([px, py]) => [x + px, y + py];
  const text = (tx, ty, str, size, fill, align = 'left', weight = 400) => ops.push({ op: 'text', x: x + tx, y: y + ty, text: str, size, weight, fill, align, max: g.width });
  for (const tk of g.yTicks) {
    ops.push({ op: 'line', points: [at([g.plot.x, tk.y]), at([g.plot.x + g.plot.w, tk.y])], stroke: tk.value === 0 ? '#7a837e' : '#dcd8cc', width: 1 });
    text(g.plot.x - 6, tk.y + 5, signed(tk.value), 15, '#4a524e', 'right');
  }
  for (const tk of g.xTicks) text(tk.x, g.plot.y + g.plot.h + 19, String(tk.label), 15, '#4a524e', 'center');
  for (const ln of g.lines) ops.push({ op: 'line', points: ln.points.map(at), stroke: colors[ln.seat % colors.length], width: 3 });
  let height = g.height;
  if (names) {
    names.forEach((name, i) => {
      const lx = 8 + (i % 2) * (g.width / 2);
      const ly = g.height + 8 + Math.floor(i / 2) * 24;
      ops.push({ op: 'rect', x: x + lx, y: y + ly + 6, w: 16, h: 5, fill: colors[i % colors.length] });
      text(lx + 22, ly + 15, `${name} ${signed(g.lines[i] ? g.lines[i].last : 0)}`, 15, '#1d2421');
    });
    height += 8 + Math.ceil(names.length / 2) * 24;
  }
  return { ops, height };
}

// a drawing (summary.js's summaryDrawing) with a chart and its title added at its foot
export function withChart(drawing, g, { title, names }) {
  const pad = 16;
  const ops = drawing.ops.slice();
  let y = drawing.height;
  ops.push({ op: 'text', x: pad, y: y + 18, text: title, size: 18, weight: 700, fill: '#1d2421', align: 'left', max: drawing.width - 2 * pad });
  y += 28;
  const chart = chartOps(g, { x: (drawing.width - g.width) / 2, y, names });
  ops.push(...chart.ops);
  y += chart.height + 14;
  const height = Math.ceil(y);
  ops[0] = { ...ops[0], h: height }; // (the background)
  return { ...drawing, height, ops };
}
