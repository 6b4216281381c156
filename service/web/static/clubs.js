// A club's effects: its requests (the public API only) and what the phone keeps of it, so that the
// standings, the roster and a player's page last seen are read again without a network (the service
// worker keeps the app itself). The screens are club.js's.
import { call, uuid4, ApiError, apiKey, requestId } from './api.js';
import { t } from './i18n.js';
import { blankClub, clubHash, clubLinks, seatCount, seatWho, tableBody } from './club.js';

const CLUBS = 'mj.clubs';             // the clubs this phone knows: [{id, token, read, name, at}]
const enc = encodeURIComponent;

export function clubActions({ S, dispatch, toast, errorText, saved, openCreated, rulesets }) {
  const club = () => S().club || blankClub();
  const auth = () => club().token || club().read;
  const cacheKey = (what, extra = '') => `mj.club.${club().id}.${what}${extra}`;
  let createKey = { key: null, body: null };
  let tableKey = { key: null, body: null };

  function remember(entry) {
    const all = saved.get(CLUBS, []);
    const old = all.find((x) => x.id === entry.id) || {};
    const list = all.filter((x) => x.id !== entry.id);
    list.unshift({ ...old, ...Object.fromEntries(Object.entries(entry).filter(([, v]) => v != null)), at: Date.now() });
    saved.set(CLUBS, list.slice(0, 20));
  }

  // GET `path` into s.club[what], kept on the phone under `key`: what was kept is shown at once, the
  // answer replaces it; without a network, what was kept stays, said to be as last seen
  async function load(what, path, key) {
    const id = club().id;
    const kept = saved.get(key, null);
    if (kept && !club()[what]) dispatch('club/loaded', { what, body: kept.body, at: kept.at });
    try {
      const res = await call('GET', path, { token: auth() });
      if (club().id !== id) return null;
      const at = Date.now();
      saved.set(key, { body: res.data, at });
      dispatch('club/loaded', { what, body: res.data, at });
      return res.data;
    } catch (e) {
      if (club().id !== id) return null;
      if (e.offline && kept) {
        dispatch('club/loaded', { what, body: kept.body, at: kept.at, offline: true });
        return kept.body;
      }
      if (e.offline) dispatch('club/offline', true);
      else toast(errorText(e));
      return null;
    }
  }

  const loadClub = async () => {
    const data = await load('data', `/v1/clubs/${enc(club().id)}`, cacheKey('data'));
    if (data) remember({ id: data.id, name: data.name, token: club().token, read: club().read });
    return data;
  };
  const loadStandings = () => {
    const order = club().order;
    return load('standings', `/v1/clubs/${enc(club().id)}/seasons/current/standings` + (order ? `?order=${order}` : ''),
      cacheKey('standings', order ? `.${order}` : ''));
  };
  const loadPlayer = (pid) => load('page', `/v1/clubs/${enc(club().id)}/players/${enc(pid)}`, cacheKey('player.', pid));

  // POST with an Idempotency-Key (the same body retried keeps its key: a retry is the same request)
  async function post(path, body, keyed) {
    const text = JSON.stringify([path, body]);
    if (keyed && keyed.body !== text) { keyed.body = text; keyed.key = uuid4(); }
    return call('POST', path, { body, token: club().token, headers: keyed ? { 'Idempotency-Key': keyed.key } : {} });
  }

  // as many seats as the club's room has (the seats tapped so far kept, when they are as many)
  function seatsOfRoom() {
    const n = seatCount(club().data, rulesets());
    if (club().seating.seats.length !== n) dispatch('club/seating', n);
  }

  const actions = {
    knownClubs: () => saved.get(CLUBS, []),
    clubSeats: () => { if (club().data) seatsOfRoom(); },
    editClub: (fn) => dispatch('club/edit', fn),

    openClubRoute(route) {
      if (S().table) dispatch('route/start'); // (the table left behind: none while a club is shown)
      if (route.home) { dispatch('club/home'); return; }
      const before = S().club;
      const fresh = !before || before.id !== route.id || S().route !== 'club';
      dispatch('club/open', route);
      if (fresh || !club().data) loadClub().then((data) => { if (data) seatsOfRoom(); });
      if (route.view === 'standings') loadStandings();
      if (route.view === 'player') loadPlayer(route.player);
      if (club().data) seatsOfRoom();
      if (route.view === 'share' && !club().qr) actions.clubQr(club().token ? 'write' : 'read');
    },

    async createClub() {
      const f = club().form;
      const name = f.name.trim();
      if (!name) { toast(t('club.err_name')); return; }
      const body = { name, order: f.order };
      const min = String(f.min_rounds).trim();
      if (min !== '') {
        const n = Number(min);
        if (!Number.isSafeInteger(n) || n < 0) { toast(t('club.err_min_rounds')); return; }
        body.min_rounds = n;
      }
      dispatch('club/edit', (x) => { x.form.busy = true; });
      try {
        const res = await post('/v1/clubs', body, createKey);
        const c = res.data;
        remember({ id: c.id, name: c.name, token: c.token, read: c.read_token });
        saved.set(`mj.club.${c.id}.data`, { body: c, at: Date.now() });
        dispatch('club/edit', (x) => { x.form = blankClub().form; });
        location.hash = clubHash({ id: c.id, token: c.token, read: c.read_token }, 'roster');
      } catch (e) {
        dispatch('club/edit', (x) => { x.form.busy = false; });
        toast(errorText(e));
      }
    },

    async clubOrder(order) {
      dispatch('club/order', order);
      await loadStandings();
    },

    async addPlayer() {
      const name = club().newPlayer.trim();
      if (!name) return;
      try {
        await post(`/v1/clubs/${enc(club().id)}/players`, { name });
        dispatch('club/edit', (x) => { x.newPlayer = ''; });
        await loadClub();
      } catch (e) { toast(errorText(e)); }
    },

    async renamePlayer() {
      const r = club().rename;
      if (!r || !r.name.trim()) return;
      try {
        await call('PATCH', `/v1/clubs/${enc(club().id)}/players/${enc(r.id)}`, { body: { name: r.name.trim() }, token: club().token });
        dispatch('club/edit', (x) => { x.rename = null; });
        await loadClub();
      } catch (e) { toast(errorText(e)); }
    },

    seat: (who) => dispatch('club/edit', (x) => { x.seating = seatWho(x.seating, who); }),

    async startClubTable() {
      const c = club();
      const body = tableBody(c.seating, c.data);
      if (!body) return;
      dispatch('club/edit', (x) => { x.seating.busy = true; });
      let res = null;
      let err = null;
      for (let attempt = 0; attempt < 3 && !res; attempt += 1) {
        try {
          res = await post(`/v1/clubs/${enc(c.id)}/tables`, body, tableKey);
        } catch (e) {
          err = e;
          if (!e.retryable) break;
          await new Promise((r) => setTimeout(r, 1000 * (attempt + 1)));
        }
      }
      dispatch('club/edit', (x) => { x.seating.busy = false; });
      if (!res) { toast(t('err.create_failed') + errorText(err)); return; }
      dispatch('club/seating', c.seating.seats.length);
      openCreated(res.data, { ...body, players: res.data.players });
    },

    async clubQr(of) {
      const c = club();
      const link = clubLinks(c, location.origin)[of];
      if (!link) return;
      try {
        const res = await fetch('/web/qr', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ text: link }), cache: 'no-store' });
        if (!res.ok) throw new ApiError(res.status, {});
        const url = URL.createObjectURL(await res.blob());
        if (club().id !== c.id) return;
        const old = club().qr;
        dispatch('club/qr', { url, of });
        if (old) URL.revokeObjectURL(old);
      } catch (e) { toast(errorText(e instanceof ApiError ? e : new ApiError(0, {}))); }
    },

    // the standings as the service writes them for a spreadsheet (UTF-8 with a BOM), saved as a file
    async standingsCsv() {
      const c = club();
      try {
        const res = await fetch(`/v1/clubs/${enc(c.id)}/seasons/current/standings` + (c.order ? `?order=${c.order}` : ''), {
          headers: { Accept: 'text/csv', Authorization: `Bearer ${auth()}`, 'X-Request-ID': requestId(), ...(apiKey() ? { 'X-API-Key': apiKey() } : {}) },
          cache: 'no-store', credentials: 'omit' });
        if (!res.ok) throw new ApiError(res.status, {});
        const blob = await res.blob();
        const a = document.createElement('a');
        a.href = URL.createObjectURL(blob);
        a.download = `${(c.data && c.data.name) || c.id}-standings.csv`;
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(a.href), 10000);
      } catch (e) { toast(errorText(e instanceof ApiError ? e : new ApiError(0, {}))); }
    },
  };
  return actions;
}
