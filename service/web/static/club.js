// A club's screens (pure: state → vnodes; node-tested): the club home (create one, the clubs this
// phone knows), the standings in either order, the roster, the seating of a new table, a player's
// page with the chart of their trend, and the club's share links and QR. Their state lives in
// `s.club` (transitions below, merged into the app's store by app.js); the effects (requests, what
// the phone keeps for offline reading) are in clubs.js.
//
// Routes (the URL fragment, never sent to the server, as a table's):
//   #clubs                                   the club home
//   #c=<id>&k=<write token>&r=<read token>   a club (k only for the organiser's phones)
//     &v=standings|roster|seat|share         … one of its screens (standings unless said)
//     &v=player&p=<player id>                … a player's page
import { h, field } from './dom.js';
import { t } from './i18n.js';
import { edit } from './store.js';
import { chartGeometry, chartSvg, trendSeries } from './chart.js';

export const VIEWS = ['standings', 'roster', 'seat', 'share', 'player'];

// the club route of a URL fragment, or null
export function parseClubHash(hash) {
  const text = String(hash || '').replace(/^#/, '');
  if (text === 'clubs') return { home: true };
  const p = new URLSearchParams(text);
  const id = p.get('c');
  if (!id || !(p.get('k') || p.get('r'))) return null;
  const v = VIEWS.includes(p.get('v')) ? p.get('v') : 'standings';
  return { id, token: p.get('k') || null, read: p.get('r') || null, view: v === 'player' && !p.get('p') ? 'standings' : v,
    player: v === 'player' ? p.get('p') : null };
}

// the fragment of a club's screen (its tokens as the phone has them)
export function clubHash(club, view = 'standings', player = null) {
  const parts = [`c=${club.id}`];
  if (club.token) parts.push(`k=${club.token}`);
  if (club.read) parts.push(`r=${club.read}`);
  if (view !== 'standings') parts.push(`v=${view}`);
  if (player) parts.push(`p=${player}`);
  return `#${parts.join('&')}`;
}

// the club's links to share: the organiser's (it writes) and the onlookers' (it reads)
export function clubLinks(club, origin) {
  const base = `${origin}/`;
  return {
    write: club.token ? `${base}#c=${club.id}&k=${club.token}${club.read ? `&r=${club.read}` : ''}` : null,
    read: club.read ? `${base}#c=${club.id}&r=${club.read}` : null,
  };
}

// -- state --------------------------------------------------------------------------------------
export const blankSeating = (n = 4) => ({ seats: new Array(n).fill(null), at: 0, guest: '', busy: false });

export const blankClub = () => ({
  id: null, token: null, read: null, view: 'standings', player: null,
  data: null,        // GET /v1/clubs/{id}
  standings: null,   // GET …/seasons/current/standings (of `order`)
  order: null,       // the order asked for (null: the club's)
  page: null,        // GET …/players/{pid}
  seenAt: {},        // what → when it was read from the server (ms); absent: not read this time
  offline: false,    // the last read failed for want of a network: what is shown is what was last seen
  seating: blankSeating(),
  form: { name: '', min_rounds: '16', order: 'total', busy: false },
  newPlayer: '', rename: null, qr: null, qrOf: 'read',
});

const setClub = (s, patch) => ({ ...s, club: { ...(s.club || blankClub()), ...patch } });

export const clubTransitions = {
  'club/home': (s) => ({ ...s, route: 'clubs', dialog: null, club: { ...blankClub(), form: (s.club || blankClub()).form } }),
  'club/open': (s, { id, token, read, view, player }) => {
    const same = s.club && s.club.id === id;
    const base = same ? s.club : blankClub();
    return { ...s, route: 'club', dialog: null, toast: same ? s.toast : null,
      club: { ...base, id, token, read, view, player, page: same && base.page && base.page.id === player ? base.page : null,
        rename: null, qr: view === 'share' ? base.qr : null } };
  },
  'club/loaded': (s, { what, body, at, offline = false }) => setClub(s, {
    [what]: body, seenAt: { ...(s.club || blankClub()).seenAt, [what]: at }, offline }),
  'club/offline': (s, offline) => setClub(s, { offline }),
  'club/order': (s, order) => setClub(s, { order }),
  'club/edit': (s, fn) => ({ ...s, club: edit(s.club || blankClub(), fn) }),
  'club/seating': (s, n) => setClub(s, { seating: blankSeating(n) }),
  'club/qr': (s, { url, of }) => setClub(s, { qr: url, qrOf: of }),
};

// -- seating: tap a seat, then who sits there (a player of the club, or a guest by name) ----------
// the seating with `who` ({player, name} or {guest}) in the seat being filled (a player already
// seated elsewhere moves), then the next empty seat is the one being filled
export function seatWho(seating, who) {
  const seats = seating.seats.map((x) => (x && who.player && x.player === who.player ? null : x));
  seats[seating.at] = who;
  const n = seats.length;
  let at = seating.at;
  for (let k = 1; k <= n; k += 1) if (!seats[(seating.at + k) % n]) { at = (seating.at + k) % n; break; }
  return { ...seating, seats, at, guest: who.guest ? '' : seating.guest };
}

// the body of POST /v1/clubs/{id}/tables, or null while a seat is empty
export function tableBody(seating, club) {
  if (seating.seats.some((x) => !x)) return null;
  const body = { players: seating.seats.map((x) => (x.player ? { player: x.player } : { guest: x.guest })) };
  if (club && club.ruleset) body.ruleset = club.ruleset;
  if (club && club.stakes) body.stakes = club.stakes;
  return body;
}

// how many seats the club's tables have (its ruleset's room; 4 unless the room says otherwise)
export function seatCount(club, rulesets) {
  const rs = club && club.ruleset;
  const name = typeof rs === 'string' ? rs : rs && rs.preset;
  const presets = (rulesets && rulesets.presets) || {};
  const preset = presets[name || (rulesets && rulesets.default)] || {};
  return preset.players || 4;
}

// -- words ---------------------------------------------------------------------------------------
const signed = (n) => (n > 0 ? `+${n}` : String(n));
const when = (iso) => (iso ? String(iso).slice(0, 16).replace('T', ' ') : '');
const clock = (ms) => new Date(ms).toTimeString().slice(0, 5);
export const ordinalText = (rating) => (rating ? (Math.round(rating.ordinal * 10) / 10).toFixed(1) : '');

// -- screens --------------------------------------------------------------------------------------
function bar(title, A, back) {
  return h('header', { class: 'bar', key: 'bar' },
    back ? h('a', { class: 'back', href: back, testid: 'club-back', 'aria-label': t('club.back') }, '‹') : null,
    h('h1', {}, title),
    h('div', { class: 'bar-tools' },
      h('button', { type: 'button', class: 'lang', testid: 'lang', 'aria-label': t('lang_label'), onclick: () => A.toggleLang() }, t('lang_switch'))));
}

export function renderClubHome(s, A) {
  const c = s.club || blankClub();
  const f = c.form;
  const known = A.knownClubs();
  return [
    bar(t('club.home'), A, '#'),
    h('main', { class: 'page club', key: 'clubs' },
      known.length ? h('section', { key: 'known' }, h('h2', {}, t('club.mine')),
        h('ul', { class: 'club-list', testid: 'club-list' }, known.map((k) => h('li', { key: k.id },
          h('a', { class: 'link', href: clubHash(k), testid: `club-${k.id}` }, k.name || k.id),
          k.token ? null : h('span', { class: 'tag' }, t('read_only')))))) : null,
      h('h2', {}, t('club.create')),
      h('form', { class: 'start', onsubmit: (e) => { e.preventDefault(); A.createClub(); } },
        field(t('club.name'), h('input', { type: 'text', testid: 'club-name', maxlength: 60, autocomplete: 'off', value: f.name,
          oninput: (e) => A.editClub((x) => { x.form.name = e.target.value; }) })),
        field(t('club.min_rounds'), h('input', { type: 'number', min: 0, step: 1, inputmode: 'numeric', testid: 'club-min-rounds', value: f.min_rounds,
          oninput: (e) => A.editClub((x) => { x.form.min_rounds = e.target.value; }) }), t('club.min_rounds_hint')),
        field(t('club.order'), h('select', { testid: 'club-order', onchange: (e) => A.editClub((x) => { x.form.order = e.target.value; }) },
          ['total', 'rating'].map((o) => h('option', { value: o, selected: f.order === o }, t(`club.order_${o}`))))),
        h('button', { type: 'submit', class: 'primary big', testid: 'create-club', disabled: f.busy }, f.busy ? t('creating') : t('club.create_btn'))),
      h('p', { class: 'muted small' }, t('club.join_hint'))),
  ];
}

function tabs(c) {
  const items = [['standings', t('club.standings')], ['roster', t('club.roster')], c.token ? ['seat', t('club.new_table')] : null,
    ['share', t('club.share')]].filter(Boolean);
  return h('nav', { class: 'tabs', key: 'tabs' }, items.map(([v, label]) => h('a', { key: v, href: clubHash(c, v), testid: `club-tab-${v}`,
    class: 'tab', 'aria-current': c.view === v ? 'page' : null }, label)));
}

// "offline: as last seen at 21:40" when what is shown was not read from the server now
function seen(c, what) {
  if (!c.offline || !c.seenAt[what]) return null;
  return h('p', { class: 'muted small stale', testid: 'club-stale' }, t('club.last_seen', { time: clock(c.seenAt[what]) }));
}

export function renderClub(s, A) {
  const c = s.club;
  const data = c.data;
  const title = data ? data.name : t('club.club');
  const back = c.view === 'player' ? clubHash(c) : '#clubs';
  let body;
  if (!data) body = h('p', { testid: 'club-loading' }, c.offline ? t('err.offline') : t('loading'));
  else if (c.view === 'roster') body = renderRoster(c, A);
  else if (c.view === 'seat' && c.token) body = renderSeating(s, A); // (the organiser's phone only)
  else if (c.view === 'share') body = renderShare(c, A);
  else if (c.view === 'player') body = renderPlayer(c, A);
  else body = renderStandings(c, A);
  return [bar(title, A, back), h('main', { class: 'page club', key: `club-${c.view}` }, c.view === 'player' ? null : tabs(c), body)];
}

// the season's standings: ranked players first, in the club's order or the other
export function standingsRows(body) {
  return ((body && body.players) || []).map((r) => ({ ...r, place: r.ranked && r.rank != null ? String(r.rank) : '–' }));
}

function renderStandings(c, A) {
  const st = c.standings;
  const order = c.order || (st && st.order) || c.data.order;
  const season = (c.data.seasons || []).find((x) => x.id === (st ? st.season : c.data.current_season));
  return [
    h('h2', {}, season ? t('club.season_n', { name: season.name }) : t('club.standings')),
    h('div', { class: 'chips order', role: 'group', 'aria-label': t('club.order') }, ['total', 'rating'].map((o) => h('button', {
      type: 'button', class: 'chip', key: o, testid: `order-${o}`, 'aria-pressed': String(order === o), onclick: () => A.clubOrder(o) }, t(`club.order_${o}`)))),
    seen(c, 'standings'),
    !st ? h('p', {}, t('loading')) : !st.players.length ? h('p', { testid: 'standings-empty' }, t('club.no_standings')) : h('table', { class: 'standings', testid: 'standings' },
      h('thead', {}, h('tr', {}, ['#', t('club.player'), t('club.evenings'), t('club.rounds'), t('club.total'), t('club.rating')].map((x, i) => h('th', { key: i }, x)))),
      h('tbody', {}, standingsRows(st).map((r) => h('tr', { key: r.player, testid: `standing-${r.player}`, class: r.ranked ? '' : 'unranked' },
        h('td', {}, r.place),
        h('td', {}, h('a', { href: clubHash(c, 'player', r.player), testid: `standing-name-${r.player}` }, r.name)),
        h('td', { class: 'num' }, String(r.evenings)),
        h('td', { class: 'num' }, String(r.rounds)),
        h('td', { class: `num${r.total < 0 ? ' neg' : ''}`, testid: `standing-total-${r.player}` }, signed(r.total)),
        h('td', { class: 'num' }, ordinalText(r.rating)))))),
    st ? h('p', { class: 'muted small' }, t('club.ranked_from', { n: st.min_rounds })) : null,
    st && st.players.length ? h('button', { type: 'button', testid: 'standings-csv', onclick: () => A.standingsCsv() }, t('club.csv')) : null,
  ];
}

function renderRoster(c, A) {
  const players = c.data.players || [];
  return [
    h('h2', {}, t('club.roster')),
    h('ul', { class: 'roster', testid: 'roster' }, players.map((p) => h('li', { key: p.id, testid: `roster-${p.id}` },
      c.rename && c.rename.id === p.id
        ? h('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); A.renamePlayer(); } },
          h('input', { type: 'text', testid: 'rename-input', maxlength: 40, value: c.rename.name, 'aria-label': t('club.rename'),
            oninput: (e) => A.editClub((x) => { x.rename.name = e.target.value; }) }),
          h('button', { type: 'submit', class: 'primary', testid: 'rename-save' }, t('confirm')),
          h('button', { type: 'button', testid: 'rename-cancel', onclick: () => A.editClub((x) => { x.rename = null; }) }, t('cancel')))
        : [h('a', { href: clubHash(c, 'player', p.id), class: 'name' }, p.name),
          c.token ? h('button', { type: 'button', class: 'small', testid: `rename-${p.id}`, onclick: () => A.editClub((x) => { x.rename = { id: p.id, name: p.name }; }) }, t('club.rename')) : null]))),
    c.token ? h('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); A.addPlayer(); } },
      h('input', { type: 'text', testid: 'new-player', maxlength: 40, autocomplete: 'off', value: c.newPlayer, placeholder: t('club.new_player'),
        'aria-label': t('club.new_player'), oninput: (e) => A.editClub((x) => { x.newPlayer = e.target.value; }) }),
      h('button', { type: 'submit', class: 'primary', testid: 'add-player' }, t('club.add'))) : null,
  ];
}

function renderSeating(s, A) {
  const c = s.club;
  const st = c.seating;
  const winds = t('wind');
  const seated = new Set(st.seats.filter((x) => x && x.player).map((x) => x.player));
  const ready = !!tableBody(st, c.data);
  return [
    h('h2', {}, t('club.seat_title')),
    h('p', { class: 'muted small' }, t('club.seat_hint')),
    h('div', { class: 'board seating', testid: 'seating' }, st.seats.map((x, i) => h('button', {
      type: 'button', key: i, class: `seat-pick${st.at === i ? ' at' : ''}`, testid: `club-seat-${i}`, 'aria-pressed': String(st.at === i),
      onclick: () => A.editClub((y) => { y.seating.at = i; }) },
      h('span', { class: 'wind' }, winds[i]), ' ', h('b', {}, x ? (x.player ? x.name : `${x.guest} (${t('club.guest')})`) : '—')))),
    h('h3', {}, t('club.who_sits', { wind: winds[st.at] })),
    h('div', { class: 'chips', testid: 'seat-players' }, (c.data.players || []).map((p) => h('button', {
      type: 'button', class: 'chip', key: p.id, testid: `sit-${p.id}`, 'aria-pressed': String(seated.has(p.id)),
      onclick: () => A.seat({ player: p.id, name: p.name }) }, p.name))),
    h('form', { class: 'inline', onsubmit: (e) => { e.preventDefault(); if (st.guest.trim()) A.seat({ guest: st.guest.trim() }); } },
      h('input', { type: 'text', testid: 'guest-name', maxlength: 40, autocomplete: 'off', value: st.guest, placeholder: t('club.guest_name'),
        'aria-label': t('club.guest_name'), oninput: (e) => A.editClub((x) => { x.seating.guest = e.target.value; }) }),
      h('button', { type: 'submit', testid: 'sit-guest' }, t('club.sit_guest'))),
    h('button', { type: 'button', class: 'primary big', testid: 'club-start-table', disabled: !ready || st.busy, onclick: () => A.startClubTable() },
      st.busy ? t('creating') : t('create')),
  ];
}

function renderShare(c, A) {
  const links = clubLinks(c, A.origin());
  const of = links[c.qrOf] ? c.qrOf : 'read';
  return [
    h('h2', {}, t('club.share')),
    h('p', { class: 'muted small' }, t('club.share_hint')),
    h('div', { class: 'chips', role: 'group' }, ['read', 'write'].filter((k) => links[k]).map((k) => h('button', {
      type: 'button', class: 'chip', key: k, testid: `club-qr-${k}`, 'aria-pressed': String(c.qr && of === k), onclick: () => A.clubQr(k) },
      t(k === 'read' ? 'club.qr_read' : 'club.qr_write')))),
    c.qr ? h('div', { class: 'qr' }, h('img', { src: c.qr, alt: t('qr_alt'), testid: 'club-qr', width: 176, height: 176 })) : null,
    links.write ? h('p', {}, h('a', { href: links.write, testid: 'club-share-link', class: 'link' }, t('club.link_write'))) : null,
    links.read ? h('p', {}, h('a', { href: links.read, testid: 'club-share-read-link', class: 'link' }, t('club.link_read'))) : null,
    A.loopback() ? h('p', { class: 'muted small' }, t('qr_local')) : null,
  ];
}

// a player's figures in words (lifetime or a season's)
export function figureWords(f) {
  return [
    t('club.f_evenings', { n: f.evenings }), t('club.f_rounds', { n: f.rounds }), t('club.f_total', { total: signed(f.total) }),
    f.wins ? t('wins_n', { n: f.wins }) : null, f.zimo ? t('zimo_n', { n: f.zimo }) : null,
    f.dianpao_paid ? t('dianpao_n', { n: f.dianpao_paid }) : null,
    f.rating ? t('club.f_rating', { r: ordinalText(f.rating) }) : null,
  ].filter(Boolean);
}

function renderPlayer(c, A) {
  const p = c.page;
  if (!p) return h('p', { testid: 'player-loading' }, c.offline ? t('err.offline') : t('loading'));
  const history = [...(p.history || [])].sort((a, b) => String(b.finished_at).localeCompare(String(a.finished_at)));
  const trend = trendSeries(p.history);
  const seasons = Object.fromEntries((c.data.seasons || []).map((x) => [x.id, x.name]));
  return [
    h('h2', { testid: 'player-name' }, p.name),
    p.aliases && p.aliases.length ? h('p', { class: 'muted small' }, t('club.aliases', { names: p.aliases.join('、') })) : null,
    seen(c, 'page'),
    h('p', { testid: 'player-lifetime' }, figureWords(p.lifetime).join(t('list_sep'))),
    history.length ? [h('h3', {}, t('club.trend')), chartSvg(chartGeometry(trend, { width: 340, height: 170 }),
      { label: t('club.trend_label', { name: p.name }), testid: 'player-chart' })] : null,
    h('h3', {}, t('club.seasons')),
    h('ul', { class: 'seasons', testid: 'player-seasons' }, (p.seasons || []).map((x) => h('li', { key: x.season },
      h('b', {}, t('club.season_n', { name: x.name })), ' ', x.ranked && x.rank != null ? t('rank_n', { n: x.rank }) : t('club.unranked'), ' · ',
      figureWords(x).join(t('list_sep'))))),
    h('h3', {}, t('club.history')),
    h('ul', { class: 'history', testid: 'player-history' }, history.map((e, i) => h('li', { key: `${e.table || 'i'}-${i}` },
      `${when(e.finished_at)} · ${t('club.season_n', { name: seasons[e.season] || e.season })} · ${t('rank_n', { n: e.rank })} · `,
      h('b', { class: e.total < 0 ? 'neg' : '' }, signed(e.total))))),
  ];
}
