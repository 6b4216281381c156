// The end of the evening: the ranking, who pays whom, each seat's facts, a picture of it drawn on
// the phone (canvas → PNG: no server work, no asset, the system's fonts) to share or save, the
// same as text to copy, the same players again in one tap, and home.
import { h } from './dom.js';
import { t } from './i18n.js';
import { call, tablePath } from './api.js';
import { ranked, rankLine, factWords, settleUpWords, summaryText, summaryDrawing } from './summary.js';
import { balanceSeries, chartGeometry, chartSvg, withChart } from './chart.js';

const FONTS = 'system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", "WenQuanYi Micro Hei", sans-serif';

export function renderEnd(s, A, top) {
  const sum = s.summary;
  if (!sum) {
    return [top, h('main', { class: 'page', key: 'end' }, h('p', { testid: 'end-loading' }, s.online === false ? t('err.offline') : t('loading')),
      h('div', { class: 'end-buttons' }, h('button', { type: 'button', testid: 'home', onclick: () => A.home() }, t('home'))))];
  }
  const pay = settleUpWords(sum);
  const chart = eveningChart(sum, s.view && s.view.rounds);
  return [top, h('main', { class: 'page end', key: 'end' },
    h('h2', {}, t('ranking')),
    h('ol', { class: 'ranking', testid: 'ranking' }, ranked(sum).map((x) => h('li', { key: x.seat, testid: `rank-${x.seat}`, class: x.total < 0 ? 'neg' : '' },
      h('div', { class: 'lead' }, rankLine(x)),
      h('div', { class: 'muted small' }, factWords(x).join(t('list_sep')))))),
    h('h2', {}, t('settle_up')),
    h('ul', { class: 'settle', testid: 'settle-up' }, (pay.length ? pay : [t('settle_none')]).map((line, i) => h('li', { key: i }, line))),
    chart ? [h('h2', {}, t('chart_title')), chartSvg(chart.geometry, { names: chart.names, label: t('chart_label'), testid: 'balance-chart' })] : null,
    s.picture ? h('img', { class: 'end-picture', src: s.picture.url, alt: t('end_pic_alt'), testid: 'end-picture',
      width: s.picture.width, height: s.picture.height }) : null,
    h('div', { class: 'end-buttons' },
      h('button', { type: 'button', class: 'primary', testid: 'share-picture', disabled: !s.picture, onclick: () => A.sharePicture() },
        A.canShareFiles() ? t('share_pic') : t('save_pic')),
      h('button', { type: 'button', testid: 'copy-text', onclick: () => A.copyText() }, t('copy_text')),
      s.view && s.view.next ? h('button', { type: 'button', class: 'primary', testid: 'to-next', onclick: () => A.followNext(s.view.next) }, t('to_next'))
        : s.table && s.table.token ? h('button', { type: 'button', class: 'primary', testid: 'again', onclick: () => A.again() }, t('again')) : null,
      h('button', { type: 'button', testid: 'end-rounds', onclick: () => A.tableScreen() }, t('end_rounds')),
      h('button', { type: 'button', testid: 'home', onclick: () => A.home() }, t('home'))),
    h('pre', { class: 'end-text', testid: 'end-text' }, summaryText(sum)))];
}

// a text's width in CSS px with the system's fonts (what the picture's lines are wrapped by)
let measurer = null;
export function measureText(text, size, weight = 400) {
  measurer ||= document.createElement('canvas').getContext('2d');
  measurer.font = `${weight} ${size}px ${FONTS}`;
  return measurer.measureText(text).width;
}

// the evening's chart: each seat's balance after each round, when the phone holds every ended round
// (the table's view: app.js reads them all); null without rounds
export function eveningChart(summary, rounds, width = 340) {
  const n = (summary.players || []).length;
  const ended = (rounds || []).filter((r) => r.status !== 'playing');
  if (!n || !ended.length || ended.length !== summary.rounds) return null;
  const totals = Array.from({ length: n }, (_, i) => ((summary.seats || []).find((x) => x.seat === i) || {}).total ?? 0);
  const names = Array.from({ length: n }, (_, i) => ((summary.seats || []).find((x) => x.seat === i) || {}).name || summary.players[i]);
  return { geometry: chartGeometry(balanceSeries(ended, n, totals), { width }), names };
}

// the picture of a summary: 360 CSS px wide (a phone's width), its lines wrapped by the system's fonts,
// the evening's chart at its foot (when the rounds are known)
export function pictureDrawing(summary, rounds) {
  const drawing = summaryDrawing(summary, { width: 360, measure: measureText });
  const chart = eveningChart(summary, rounds, 328);
  return chart ? withChart(drawing, chart.geometry, { title: t('chart_title'), names: chart.names }) : drawing;
}

// draw the commands of summaryDrawing on a canvas; → a PNG blob (at 3 px per CSS px: 1080 px wide,
// a phone screen's width in device pixels, so that the picture is sharp shown full width)
export function paint(drawing, scale = 3) {
  const canvas = document.createElement('canvas');
  canvas.width = Math.round(drawing.width * scale);
  canvas.height = Math.round(drawing.height * scale);
  const g = canvas.getContext('2d');
  g.scale(scale, scale);
  for (const o of drawing.ops) {
    if (o.op === 'rect') { g.fillStyle = o.fill; g.fillRect(o.x, o.y, o.w, o.h); continue; }
    if (o.op === 'line') {
      g.strokeStyle = o.stroke;
      g.lineWidth = o.width;
      g.lineJoin = 'round';
      g.beginPath();
      o.points.forEach(([x, y], i) => (i ? g.lineTo(x, y) : g.moveTo(x, y)));
      g.stroke();
      continue;
    }
    g.fillStyle = o.fill;
    g.font = `${o.weight} ${o.size}px ${FONTS}`;
    g.textAlign = o.align;
    g.textBaseline = 'alphabetic';
    g.fillText(o.text, o.x, o.y, o.max); // (the lines fit: `max` only guards against a font wider than measured)
  }
  return new Promise((resolve) => canvas.toBlob((b) => resolve(b), 'image/png'));
}

// the end screen's actions (effects: requests, the canvas, sharing, the clipboard)
export function endActions({ S, dispatch, toast, errorText, saved, startNext }) {
  let blob = null;
  let drawn = 0; // (the drawings asked for)
  const actions = {
    canShareFiles: () => {
      try {
        return !!(navigator.canShare && blob && navigator.canShare({ files: [new File([blob], 'x.png', { type: 'image/png' })] }));
      } catch { return false; }
    },
    async loadSummary() {
      const s = S();
      if (!s.table) return;
      try {
        const res = await call('GET', tablePath(s.table.id, '/summary'), { token: s.table.token || s.table.read });
        if (!S().table || S().table.id !== s.table.id) return;
        saved.set(`mj.summary.${s.table.id}`, res.data);
        dispatch('summary/loaded', res.data);
      } catch (e) {
        const kept = saved.get(`mj.summary.${s.table.id}`, null); // (offline: the one this phone had)
        if (kept) dispatch('summary/loaded', kept);
        else toast(t('summary_failed') + errorText(e));
      }
    },
    // the picture of the summary shown, in the phone's language: drawn again when either changes
    // (app.js calls it then); the last one asked for wins, the one it replaces is let go
    async drawPicture() {
      const sum = S().summary;
      if (!sum) return;
      const seq = ++drawn;
      const lang = S().lang;
      const drawing = pictureDrawing(sum, S().view && S().view.rounds);
      const b = await paint(drawing);
      if (seq !== drawn || !b || S().summary !== sum) return;
      const old = S().picture;
      blob = b;
      dispatch('end/picture', { url: URL.createObjectURL(b), width: drawing.width, height: drawing.height, size: b.size, lang });
      if (old) URL.revokeObjectURL(old.url);
    },
    async sharePicture() {
      if (!blob) return;
      const name = `mahjong-${S().table.id}.png`;
      const file = new File([blob], name, { type: 'image/png' });
      if (actions.canShareFiles()) {
        try { await navigator.share({ files: [file], title: t('end_title'), text: summaryText(S().summary) }); return; } catch { /* cancelled: saved instead */ }
      }
      const a = document.createElement('a');
      a.href = S().picture.url;
      a.download = name;
      document.body.append(a);
      a.click();
      a.remove();
    },
    async copyText() {
      const text = summaryText(S().summary);
      try {
        await navigator.clipboard.writeText(text);
      } catch {
        const pre = document.querySelector('[data-testid="end-text"]');
        const r = document.createRange();
        r.selectNodeContents(pre);
        getSelection().removeAllRanges();
        getSelection().addRange(r);
        try { document.execCommand('copy'); } catch { /* selected: the player copies it */ }
      }
      toast(t('copied'));
    },
    // the next table (POST …/next): the same names, room, options and coins, the same tokens; every
    // phone looking at this one follows it (app.js)
    again: () => startNext(),
    // back to the table (its rounds and history), from the end screen
    tableScreen: () => { location.hash = location.hash.replace(/^#/, '').replace(/&end=1/, ''); },
    home: () => { location.hash = ''; },
  };
  return actions;
}
