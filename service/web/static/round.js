// What the current round's records say about each seat, for the dialogs: its melds, its wins,
// and (血流成河, RULES.md §13.2) the hand a winner keeps. `recs` are the round's records in
// log order, voided ones left out; `n` the number of seats.

// tiles of a hand string ("123m55p", "1m2m3m") or list (["1m", "2m"]) → ["1m", "2m", ...]
export function parseTiles(tiles) {
  if (Array.isArray(tiles)) return tiles.map(String);
  const out = [];
  let ranks = [];
  for (const ch of String(tiles || '')) {
    if (ch >= '0' && ch <= '9') ranks.push(ch);
    else if ('mps'.includes(ch)) { for (const r of ranks) out.push(`${r}${ch}`); ranks = []; }
  }
  return out;
}

const meldOf = (m) => (m.type === 'peng' ? { type: 'peng', tile: m.tile } : { type: 'kong', kind: m.kind, tile: m.tile });

// each seat's melds as the log shows them (its pengs, and its kongs — an added kong replaces its peng)
export function meldsBySeat(recs, n) {
  const melds = Array.from({ length: n }, () => []);
  for (const r of recs) {
    if (r.seat == null || r.seat >= n) continue;
    if (r.type === 'peng') melds[r.seat].push({ type: 'peng', tile: r.tile });
    if (r.type === 'kong') {
      const list = melds[r.seat];
      const i = r.kind === 'added' ? list.findIndex((m) => m.type === 'peng' && m.tile === r.tile) : -1;
      if (i >= 0) list.splice(i, 1);
      list.push({ type: 'kong', kind: r.kind, tile: r.tile });
    }
  }
  return melds;
}

// how many times each seat has won in the round (血流: any number; 一炮多响 counts once per winner)
export function winsBySeat(recs, n) {
  const wins = Array(n).fill(0);
  for (const r of recs) if (r.type === 'hu') for (const w of r.winners || []) if (w.seat < n) wins[w.seat] += 1;
  return wins;
}

// 血流: the hand each winner keeps once known — a win given with a hand, less the tile won (set
// aside); then its concealed kong takes three of its tiles, its added kong turns its peng into a
// kong, and a robbed added kong gives the peng back. null: not known (wins given as fan only).
export function keptHands(recs, n) {
  const kept = Array(n).fill(null);
  let lastKong = null;
  for (const r of recs) {
    if (r.type === 'hu') {
      if (r.robbing_kong && lastKong && lastKong.kind === 'added' && kept[lastKong.seat]) {
        const k = kept[lastKong.seat];
        k.melds = k.melds.map((m) => (m.type === 'kong' && m.kind === 'added' && m.tile === lastKong.tile ? { type: 'peng', tile: m.tile } : m));
      }
      for (const w of r.winners || []) {
        if (!w.hand || w.seat >= n) continue;
        const tiles = parseTiles(w.hand.tiles);
        const i = tiles.indexOf(r.tile);
        if (i >= 0) tiles.splice(i, 1);
        kept[w.seat] = { tiles, melds: (w.hand.melds || []).map(meldOf) };
      }
    } else if (r.type === 'kong' && r.seat < n && kept[r.seat]) {
      const k = kept[r.seat];
      if (r.kind === 'concealed') {
        for (let c = 0; c < 3; c += 1) { const i = k.tiles.indexOf(r.tile); if (i >= 0) k.tiles.splice(i, 1); }
        k.melds.push({ type: 'kong', kind: 'concealed', tile: r.tile });
      } else if (r.kind === 'added') {
        k.melds = k.melds.map((m) => (m.type === 'peng' && m.tile === r.tile ? { type: 'kong', kind: 'added', tile: r.tile } : m));
      }
    }
    lastKong = r.type === 'kong' ? r : null;
  }
  return kept;
}
