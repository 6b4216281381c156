// A club's screens, pure: the routes of the URL fragment, the seating by taps, a table's body,
// the standings' rows, the state's transitions and what the screens show.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import './setup.mjs';
import { setLang } from '../static/i18n.js';
import { textOf } from '../static/dom.js';
import { parseClubHash, clubHash, clubLinks, blankSeating, seatWho, tableBody, seatCount, standingsRows, clubTransitions,
  blankClub, renderClub, renderClubHome, figureWords } from '../static/club.js';

setLang('en');

test('a club\'s route: its id and tokens, its screen, a player; anything else is not a club\'s', () => {
  assert.deepEqual(parseClubHash('#clubs'), { home: true });
  assert.deepEqual(parseClubHash('#c=abc&k=W&r=R'), { id: 'abc', token: 'W', read: 'R', view: 'standings', player: null });
  assert.deepEqual(parseClubHash('#c=abc&r=R&v=player&p=p1'), { id: 'abc', token: null, read: 'R', view: 'player', player: 'p1' });
  assert.equal(parseClubHash('#c=abc&r=R&v=player').view, 'standings'); // (a player's page without a player)
  assert.equal(parseClubHash('#c=abc&r=R&v=nonsense').view, 'standings');
  assert.equal(parseClubHash('#c=abc'), null); // (no token)
  assert.equal(parseClubHash('#t=abc&k=W'), null); // (a table's)
  assert.equal(parseClubHash(''), null);
  const club = { id: 'abc', token: 'W', read: 'R' };
  for (const [view, player] of [['standings', null], ['roster', null], ['player', 'p1'], ['share', null]]) {
    assert.deepEqual(parseClubHash(clubHash(club, view, player)), { ...club, view, player });
  }
  assert.deepEqual(clubLinks(club, 'http://h:1'), { write: 'http://h:1/#c=abc&k=W&r=R', read: 'http://h:1/#c=abc&r=R' });
  assert.deepEqual(clubLinks({ id: 'abc', token: null, read: 'R' }, 'http://h:1'), { write: null, read: 'http://h:1/#c=abc&r=R' });
});

test('seating by taps: the seat being filled, then the next empty one; a player seated again moves', () => {
  let s = blankSeating(4);
  s = seatWho(s, { player: 'p1', name: '老王' });
  assert.equal(s.at, 1);
  s = seatWho(s, { player: 'p2', name: '小李' });
  s = seatWho(s, { guest: '客人' });
  assert.equal(s.at, 3);
  assert.equal(tableBody(s, {}), null); // (a seat still empty)
  s = seatWho(s, { player: 'p1', name: '老王' }); // 老王 moves from 东 to 北
  assert.deepEqual(s.seats.map((x) => x && (x.player || x.guest)), [null, 'p2', '客人', 'p1']);
  assert.equal(s.at, 0);
  s = seatWho(s, { player: 'p3', name: '阿珍' });
  assert.deepEqual(tableBody(s, { ruleset: null, stakes: null }),
    { players: [{ player: 'p3' }, { player: 'p2' }, { guest: '客人' }, { player: 'p1' }] });
  assert.deepEqual(tableBody(s, { ruleset: 'normal', stakes: { coin_per_point: 1 } }).ruleset, 'normal');
  // a tap on a filled seat makes it the one being filled: whoever is tapped next replaces who sat there
  s = seatWho({ ...s, at: 2 }, { guest: '小张' });
  assert.deepEqual(s.seats[2], { guest: '小张' });
  assert.equal(s.guest, '');
});

test('seats of the club\'s room', () => {
  const rulesets = { default: 'xuezhan', presets: { xuezhan: { players: 4 }, 'sanren-liangfang': { players: 3 } } };
  assert.equal(seatCount({ ruleset: null }, rulesets), 4);
  assert.equal(seatCount({ ruleset: 'sanren-liangfang' }, rulesets), 3);
  assert.equal(seatCount({ ruleset: { preset: 'sanren-liangfang', cap: 3 } }, rulesets), 3);
  assert.equal(seatCount({ ruleset: 'unknown' }, null), 4);
});

const STANDINGS = { season: 's1', name: '1', min_rounds: 2, order: 'total', players: [
  { player: 'p1', name: '老王', rank: 1, ranked: true, evenings: 2, rounds: 4, total: 72, wins: 2, zimo: 2, dianpao_paid: 0, rating: { mu: 28, sigma: 7, ordinal: 7.04 } },
  { player: 'p2', name: '小李', rank: 2, ranked: true, evenings: 2, rounds: 4, total: -24, wins: 0, zimo: 0, dianpao_paid: 1, rating: { mu: 24, sigma: 7, ordinal: 3 } },
  { player: 'p3', name: '阿珍', rank: null, ranked: false, evenings: 1, rounds: 1, total: 12, wins: 0, zimo: 0, dianpao_paid: 0, rating: { mu: 25, sigma: 8, ordinal: 1 } },
] };
const DATA = { id: 'c1', name: '周五麻将', order: 'total', ruleset: null, stakes: null, current_season: 's1',
  seasons: [{ id: 's1', name: '1' }], players: [{ id: 'p1', name: '老王' }, { id: 'p2', name: '小李' }, { id: 'p3', name: '阿珍' }] };
const A = { toggleLang() {}, knownClubs: () => [{ id: 'c1', name: '周五麻将', token: 'W', read: 'R' }, { id: 'c2', name: 'Other', read: 'R2' }],
  origin: () => 'http://h', loopback: () => false };

test('the standings: ranked first with their places, the unranked without one', () => {
  assert.deepEqual(standingsRows(STANDINGS).map((r) => [r.name, r.place]), [['老王', '1'], ['小李', '2'], ['阿珍', '–']]);
  let s = { route: 'start', toast: null, dialog: null };
  s = clubTransitions['club/open'](s, { id: 'c1', token: null, read: 'R', view: 'standings', player: null });
  s = clubTransitions['club/loaded'](s, { what: 'data', body: DATA, at: 1 });
  s = clubTransitions['club/loaded'](s, { what: 'standings', body: STANDINGS, at: 2 });
  const text = textOf({ tag: 'x', children: renderClub(s, A) });
  assert.match(text, /Season 1/);
  assert.match(text, /1老王24\+727\.0/);
  assert.match(text, /–阿珍11\+121\.0/);
  assert.doesNotMatch(text, /New table/); // (a read token: no seating)
  assert.doesNotMatch(text, /Offline/);
  s = clubTransitions['club/offline'](s, true);
  assert.match(textOf({ tag: 'x', children: renderClub(s, A) }), /Offline: as seen at/);
  // the organiser's phone: the seating tab
  s = clubTransitions['club/open'](s, { id: 'c1', token: 'W', read: 'R', view: 'seat', player: null });
  assert.equal(s.club.data, DATA); // (the same club: what was read stays)
  const seat = textOf({ tag: 'x', children: renderClub(s, A) });
  assert.match(seat, /Who sits E/);
  assert.match(seat, /老王小李阿珍/);
  // another club: nothing of the first one
  s = clubTransitions['club/open'](s, { id: 'c2', token: null, read: 'R2', view: 'standings', player: null });
  assert.equal(s.club.data, null);
});

test('a player\'s page: figures, the chart of the trend, seasons and history', () => {
  let s = clubTransitions['club/open']({}, { id: 'c1', token: null, read: 'R', view: 'player', player: 'p1' });
  s = clubTransitions['club/loaded'](s, { what: 'data', body: DATA, at: 1 });
  s = clubTransitions['club/loaded'](s, { what: 'page', at: 2, body: { id: 'p1', name: '老王', aliases: ['王哥'],
    lifetime: { evenings: 2, rounds: 4, total: 72, wins: 2, zimo: 2, dianpao_paid: 0, rating: { ordinal: 7.04 } },
    seasons: [{ season: 's1', name: '1', rank: 1, ranked: true, evenings: 2, rounds: 4, total: 72, wins: 2, zimo: 2, dianpao_paid: 0, rating: { ordinal: 7.04 } }],
    history: [{ table: 't2', finished_at: '2026-03-14T22:00:00Z', season: 's1', total: 36, rank: 1 },
      { table: 't1', finished_at: '2026-03-07T22:00:00Z', season: 's1', total: 36, rank: 1 }] } });
  const view = renderClub(s, A);
  const text = textOf({ tag: 'x', children: view });
  assert.match(text, /老王/);
  assert.match(text, /Also known as 王哥/);
  assert.match(text, /2 evenings, 4 rounds, total \+72/);
  assert.match(text, /2026-03-14 22:00 · Season 1 · #1 · \+36/);
  const find = (v, tag) => (typeof v === 'string' ? [] : [...(v.tag === tag ? [v] : []), ...v.children.flatMap((c) => find(c, tag))]);
  const lines = view.flatMap((v) => find(v, 'polyline'));
  assert.equal(lines.length, 1);
  assert.equal(lines[0].props['data-last'], 72);
  assert.equal(lines[0].props.points.split(' ').length, 3);
  assert.deepEqual(figureWords({ evenings: 1, rounds: 1, total: 0 }), ['1 evening', '1 round', 'total 0']);
});

test('the club home: the clubs this phone knows (read only said so), and the form', () => {
  const text = textOf({ tag: 'x', children: renderClubHome({ club: blankClub() }, A) });
  assert.match(text, /My clubs周五麻将Otherread-only/);
  assert.match(text, /Create a club/);
});
