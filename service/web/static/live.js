// The table as this phone knows it, kept current: the view (GET /v1/tables/{id}), every log
// record, and every ended round.
//
// How it stays current:
//   * first the view and the log so far (GET …/events, 500 records a page);
//   * then the table stream GET /v1/tables/{id}/stream (Server-Sent Events, read with fetch()
//     because EventSource cannot send the Authorization header). Each `record` is the record
//     as …/events lists it plus the table's version, balances and coins after it (a buy-in's own
//     coins as `amount`): the record
//     joins the log and the balances show at once, with no request. The rest of the view (the
//     round: who won, who left, its deltas; the ended rounds) follows with one conditional GET
//     (If-None-Match) per burst of records, at most one every REFRESH_GAP_MS;
//   * a stream that drops (the Wi-Fi, a restarted server, `event: resync`) is opened again
//     with Last-Event-ID = the last seq this phone holds: the server sends what was missed
//     first, from its log, so nothing is lost and nothing comes twice. No polling meanwhile
//     (one view GET tells whether the server answers at all: offline, there is nothing to poll);
//   * only when the stream is unavailable while the server answers does the phone poll: an
//     HTTP answer that is not an event stream (an older service, a proxy that refuses it,
//     429/5xx), a stream that fails twice while the view GET gets through (a proxy that cuts
//     it), or one that goes silent (a proxy that holds it back). Then a conditional GET every
//     POLL_MS while the page is visible (HIDDEN_POLL_MS when hidden), …/events when the version
//     moved; the stream is tried again every STREAM_AGAIN_MS (at once when the page becomes
//     visible or the browser says it is online again).
//
// A finished table (POST …/finish, from any phone) puts no record on the stream and leaves the
// view's version — its ETag — as it was, so neither the stream nor a conditional GET would ever
// tell. While no round is being played (the only time a table can be finished) and the page is
// visible, the phone therefore GETs the view without If-None-Match every FINISH_CHECK_MS (and as
// the page becomes visible again) until it says `finished_at`; so does a write refused with 409
// `table_finished` (refresh({fresh: true})). Between rounds that is 6 reads a minute a phone.
// A finished table is read so on until it names its next table (`next`: another phone started
// it, POST …/next), which its stream also tells (`event: next`, like `event: finished`: the view
// is read at once).
//
// Rate limits (per table, by default 600 reads and 120 events a minute): the stream itself is
// one long request and not a read; streaming, a phone reads at most 60000 / REFRESH_GAP_MS = 60
// times a minute, and only while records arrive; polling, 60000 / POLL_MS = 40 conditional GETs a
// minute while visible (6 hidden), plus one …/events per change. A 429 stops the phone's reads
// for its Retry-After.
import { call, tablePath, ApiError } from './api.js';
import { readStream } from './sse.js';
import { roundAfterRecord } from './round.js';

const POLL_MS = 1500, HIDDEN_POLL_MS = 10000;
const REFRESH_GAP_MS = 1000;
const RETRY_MS = 3000, MAX_RETRY_MS = 10000;   // reconnecting a dropped stream (the server's `retry:` first)
const STALL_MS = 40000;                         // the server comments every 15 s at most
const STREAM_AGAIN_MS = 60000;                  // polling: the stream is tried again this often
const FINISH_CHECK_MS = 10000;                  // between rounds: has another phone finished the table?
const EVENTS_PAGE = 500, ROUNDS_PAGE = 100; // (the server's largest pages: 500 and 500)

// ended rounds a view implies: its round's number (or the one before while it is played)
export const endedRounds = (view) => (!view || !view.round ? 0
  : view.round.status === 'ended' ? view.round.number : view.round.number - 1);

export class TableLive {
  // view, records: the view and the log this phone kept from last time (shown until the server
  // answers; the log is read on from its last record)
  constructor({ id, token, view = null, records = [], onView, onRecords, onStatus, onMode = () => {} }) {
    Object.assign(this, { id, token, onView, onRecords, onStatus, onMode });
    this.view = view;
    this.fullVersion = null;  // version of the last whole view fetched (its ETag)
    this.records = records.slice();
    this.loaded = false;      // the log has been read once
    this.mode = 'connecting'; // 'stream' | 'poll' | 'connecting' | 'stopped' (the table is gone or the link wrong)
    this.stopped = false;
    this.blockedUntil = 0;    // a 429's Retry-After
    this.lastRefresh = 0;
    this.timers = new Set();
    this.busy = {};
  }

  get lastSeq() { return this.records.length ? this.records[this.records.length - 1].seq : 0; }

  start() {
    this.onVisible = () => this.wakeUp(document.visibilityState === 'visible');
    this.onOnline = () => this.wakeUp(true);
    document.addEventListener('visibilitychange', this.onVisible);
    window.addEventListener('online', this.onOnline);
    this.finishTimer = setInterval(() => this.checkFinished(), FINISH_CHECK_MS);
    this.run();
  }

  // between rounds (or finished, until it names its next table), on a visible page: a GET of the
  // view that a 304 cannot answer (see the top)
  checkFinished() {
    const v = this.view;
    if (this.stopped || this.fullVersion == null || !v || v.next || (v.round && v.round.status === 'playing' && !v.finished_at)) return null;
    if (typeof document !== 'undefined' && document.visibilityState === 'hidden') return null;
    return this.refresh({ fresh: true });
  }

  stop() {
    this.stopped = true;
    clearInterval(this.finishTimer);
    for (const t of this.timers) clearTimeout(t);
    if (this.abort) this.abort.abort();
    if (this.wake) this.wake();
    document.removeEventListener('visibilitychange', this.onVisible);
    window.removeEventListener('online', this.onOnline);
  }

  // the table is gone, or the link is wrong: stopped for good, and the page is told
  giveUp() {
    this.stop();
    this.setMode('stopped');
  }

  later(fn, ms) {
    const t = setTimeout(() => { this.timers.delete(t); if (!this.stopped) fn(); }, ms);
    this.timers.add(t);
    return t;
  }

  sleep(ms) {
    return new Promise((resolve) => {
      const t = this.later(() => { this.wake = null; resolve(); }, ms);
      this.wake = () => { clearTimeout(t); this.timers.delete(t); this.wake = null; resolve(); };
    });
  }

  setMode(mode) {
    if (this.mode === mode) return;
    this.mode = mode;
    this.onMode(mode);
    if (mode === 'poll') this.poll();
  }

  // the page is visible again, or the network is back: don't wait for the next try
  wakeUp(now) {
    if (!now || this.stopped) return;
    this.checkFinished();
    if (this.mode === 'stream' && Date.now() - this.heard > 20000 && this.abort) this.abort.abort(); // maybe dead after a sleep
    else if (this.mode === 'connecting' && this.wake) this.wake();
    else if (this.mode === 'poll') { this.refresh(); if (this.wake) this.wake(); } // and the stream again
  }

  // -- one request of each kind at a time; a call meanwhile runs it once more afterwards ----------
  once(name, fn) {
    const b = this.busy[name];
    if (b) { b.again = true; return b.promise; }
    const slot = { again: false };
    slot.promise = (async () => {
      do { slot.again = false; await fn(); } while (slot.again && !this.stopped);
    })().finally(() => { this.busy[name] = null; });
    this.busy[name] = slot;
    return slot.promise;
  }

  // fresh: without If-None-Match (a change the version does not show: the table finished)
  refresh({ fresh = false } = {}) {
    if (fresh) this.fresh = true;
    return this.once('view', () => this.fetchView());
  }
  catchUp() { return this.once('events', () => this.fetchEvents()); }

  // at most one view GET every REFRESH_GAP_MS while records stream in (the first at once)
  scheduleRefresh() {
    if (this.refreshTimer) return;
    const wait = Math.max(0, this.lastRefresh + REFRESH_GAP_MS - Date.now());
    this.refreshTimer = this.later(() => {
      this.refreshTimer = null;
      this.lastRefresh = Date.now();
      this.refresh();
    }, wait);
  }

  failed(e) {
    if (e instanceof ApiError && !e.offline) this.answered = true;
    if (e instanceof ApiError && e.status === 429) this.blockedUntil = Date.now() + 1000 * (e.retryAfter ?? 10);
    if (e instanceof ApiError && [401, 403, 404].includes(e.status)) this.giveUp(); // gone, or a wrong link: nothing to follow
    this.onStatus(!(e instanceof ApiError && e.offline), e);
  }

  // -- the view, with every ended round (rounds_after / rounds_next) ------------------------------
  async fetchView() {
    if (Date.now() < this.blockedUntil) return;
    const whole = this.fullVersion != null && this.view;
    const have = whole ? (this.view.rounds || []).filter((r) => !r.local) : []; // (not the ones made up from records)
    const path = (after) => tablePath(this.id, `?rounds_after=${after}&rounds_limit=${ROUNDS_PAGE}`);
    try {
      const fresh = whole && this.fresh;
      const headers = whole && !fresh ? { 'If-None-Match': `"${this.fullVersion}"` } : {};
      this.fresh = false;
      const res = await call('GET', path(have.length ? have[have.length - 1].number : 0), { token: this.token, headers, timeout: 10000 });
      this.answered = true;
      this.onStatus(true, null);
      if (res.status === 304) return;
      let view = res.data;
      const rounds = new Map(have.map((r) => [r.number, r]));
      for (;;) {
        for (const r of view.rounds) rounds.set(r.number, r);
        if (view.rounds_next == null) break;
        const next = await call('GET', path(view.rounds_next), { token: this.token, timeout: 10000 });
        view = next.data;
      }
      const ended = endedRounds(view);
      const list = [...rounds.values()].filter((r) => r.number <= ended).sort((a, b) => a.number - b.number);
      if (list.length !== ended && whole) { // a round changed under what this phone kept: read them all again
        this.fullVersion = null;
        return this.fetchView();
      }
      view.rounds = list;
      view.rounds_next = null;
      if (fresh && view.version === this.fullVersion && view.finished_at == this.view.finished_at && view.next == this.view.next) return; // (what a 304 would say)
      this.fullVersion = view.version;
      if (this.view && this.view.version > view.version) { // a record seen on the stream is newer
        const last = view.rounds.length ? view.rounds[view.rounds.length - 1].number : 0;
        const later = (this.view.rounds || []).filter((r) => r.number > last);
        Object.assign(view, { version: this.view.version, balances: this.view.balances, round: this.view.round || view.round,
          rounds: [...view.rounds, ...later] }, this.view.coins ? { coins: this.view.coins } : {});
      }
      this.view = view;
      this.onView(view);
      if (this.mode === 'poll' && view.version > this.lastSeq) this.catchUp();
    } catch (e) {
      this.failed(e);
    }
  }

  // -- the log ---------------------------------------------------------------------------------
  async fetchEvents() {
    if (Date.now() < this.blockedUntil) return;
    const added = [];
    try {
      for (;;) {
        const res = await call('GET', tablePath(this.id, `/events?after=${this.lastSeq}&limit=${EVENTS_PAGE}`), { token: this.token });
        for (const r of res.data.events) if (r.seq === this.lastSeq + 1) { this.append(r); added.push(r); }
        if (res.data.next == null || !res.data.events.length) break;
      }
      this.loaded = true;
    } catch (e) {
      this.failed(e);
    }
    if (added.length) this.onRecords(added);
  }

  // (a record is never changed in place: a voided one is replaced by a copy, so that a snapshot
  // of the log handed out before stays as it was)
  append(rec) {
    // a correction rewrites its round: that round (and the ones after it, whose figures a fold may
    // move) is read again with the next view GET
    if (rec.type === 'correction' && this.view && Array.isArray(this.view.rounds)) {
      this.view = { ...this.view, rounds: this.view.rounds.filter((r) => r.number < (rec.round ?? 1)) };
    }
    if (rec.type === 'void') {
      const at = this.records.findIndex((x) => x.seq === rec.target);
      const target = at >= 0 ? this.records[at] : null;
      if (target) {
        this.records[at] = { ...target, voided: true };
        // a void may change an ended round: the rounds from the target's on are read again
        if (this.view && Array.isArray(this.view.rounds)) {
          this.view = { ...this.view, rounds: this.view.rounds.filter((r) => r.number < (target.round ?? 1)) };
        }
      }
    }
    this.records.push(rec);
  }

  // records from the stream (one chunk's worth): in order, none twice; a gap is read from the log
  takeRecords(items) {
    const added = [];
    let gap = false, moved = false;
    for (const item of items) {
      if (item.seq <= this.lastSeq) continue;
      if (item.seq !== this.lastSeq + 1) { gap = true; break; }
      const { version, balances, coins, amount, ...rec } = item;
      if (this.view && version > this.view.version) {
        this.view = { ...this.view, ...this.roundsAfter(rec, balances), version, balances, ...(Array.isArray(coins) ? { coins } : {}) };
        moved = true;
      }
      // the stream's `coins` is the table's after the record; a buy-in's own coins are `amount`
      if (rec.type === 'buy_in') rec.coins = amount;
      this.append(rec);
      added.push(rec);
    }
    if (added.length) this.onRecords(added);
    if (moved) this.onView(this.view);
    if (added.length || moved) this.scheduleRefresh();
    if (gap) this.catchUp();
  }

  // the round (and the ended rounds) as of a stream record, until the next view GET tells: its
  // deltas move with the balances, a round_end ends it, a round_start opens the next one
  roundsAfter(rec, balances) {
    const view = this.view;
    let round = view.round;
    let rounds = view.rounds || [];
    if (!round && rec.type !== 'round_start') return {};
    const target = rec.type === 'void' ? this.records.find((x) => x.seq === rec.target) : null;
    const mine = rec.type === 'void' ? target && round && target.round === round.number && round.status === 'playing'
      : rec.type === 'round_start' || (round && rec.round === round.number);
    if (!mine) return {};
    if (rec.type === 'round_start') {
      if (round && !rounds.some((r) => r.number === round.number)) rounds = [...rounds, { ...round, status: 'ended', local: true }];
      round = roundAfterRecord(round || { number: 0, deltas: balances.map(() => 0) }, rec, view.balances, balances);
    } else {
      round = roundAfterRecord(round, rec, view.balances, balances);
      if (rec.type === 'round_end' && !rounds.some((r) => r.number === round.number)) rounds = [...rounds, { ...round, local: true }];
    }
    return { round, rounds };
  }

  // this phone's own write was answered (201): its balances and round at once (unless the
  // stream has already brought a later record: then the next view GET has the round)
  noteWrite(data) {
    if (!data || !this.view) return;
    if (data.version >= this.view.version) {
      let rounds = this.view.rounds || [];
      if (data.round && data.round.status === 'ended' && !rounds.some((r) => r.number === data.round.number)) {
        rounds = [...rounds, { ...data.round, local: true }];
      }
      this.view = { ...this.view, version: data.version, balances: data.balances, round: data.round, rounds,
        ...(data.coins ? { coins: data.coins } : {}) };
      this.onView(this.view);
    }
    if (this.mode === 'stream') this.scheduleRefresh();
    else this.refresh();
  }

  // -- polling (only while the stream is unavailable) ------------------------------------------
  poll() {
    if (this.pollTimer || this.stopped) return;
    const tick = () => {
      this.pollTimer = null;
      if (this.mode !== 'poll') return;
      this.refresh().finally(() => {
        if (this.mode === 'poll' && !this.pollTimer) {
          this.pollTimer = this.later(tick, document.visibilityState === 'visible' ? POLL_MS : HIDDEN_POLL_MS);
        }
      });
    };
    this.pollTimer = this.later(tick, 0);
  }

  // -- the stream --------------------------------------------------------------------------------
  async run() {
    await this.refresh();
    await this.catchUp();
    let retry = RETRY_MS, delay = RETRY_MS, stalls = 0, cut = 0;
    while (!this.stopped) {
      if (!this.loaded) await this.catchUp();
      this.abort = new AbortController();
      let opened = false, batch = [], stalled = false, resync = false;
      this.heard = Date.now();
      const watchdog = setInterval(() => {
        if (opened && Date.now() - this.heard > STALL_MS) { stalled = true; this.abort.abort(); }
      }, 5000);
      let wait;
      try {
        await readStream(tablePath(this.id, '/stream'), {
          token: this.token, lastEventId: this.lastSeq, signal: this.abort.signal,
          onOpen: () => {
            opened = true;
            this.heard = Date.now();
            this.setMode('stream');
            this.onStatus(true, null);
            if (this.fullVersion == null || (this.view && this.view.version > this.fullVersion)) this.scheduleRefresh();
          },
          onChunk: () => { this.heard = Date.now(); },
          onRetry: (ms) => { retry = Math.min(Math.max(ms, 1000), MAX_RETRY_MS); },
          onEvent: (ev) => {
            if (ev.event === 'record') {
              try { batch.push(JSON.parse(ev.data)); } catch { /* not a record: ignored */ }
            } else if (ev.event === 'deleted') {
              this.giveUp();
              this.onStatus(true, new ApiError(404, { code: 'table_not_found' }));
            } else if (ev.event === 'finished' || ev.event === 'next') { // (the version does not move)
              this.refresh({ fresh: true });
            } else if (ev.event === 'resync') {
              resync = true;
            }
          },
          onBatch: () => {
            if (batch.length) { const b = batch; batch = []; this.takeRecords(b); }
            if (resync) this.abort.abort();
          },
        });
        // the server closed it (a worker restarting): open it again, resuming
        wait = retry;
      } catch (e) {
        if (this.stopped) break;
        if (e && e.status) { // an answer, but no stream
          if ([401, 403, 404].includes(e.status)) {
            await this.refresh(); // is it the table (gone, wrong link: it stops) or only the stream?
            if (this.stopped) break;
          }
          this.setMode('poll');
          wait = e.retryAfter != null ? Math.max(1000, e.retryAfter * 1000)
            : [429, 502, 503, 504].includes(e.status) ? 15000 : STREAM_AGAIN_MS;
        } else if (resync) {
          wait = 0;
        } else if (stalled) { // silent: perhaps a proxy that holds the stream back
          stalls += 1;
          if (stalls >= 2) this.setMode('poll');
          wait = stalls >= 2 ? STREAM_AGAIN_MS : 0;
        } else if (opened && this.abort.signal.aborted) {
          wait = 0; // aborted by us (woken up): at once
        } else { // no answer on the stream: is it the network (offline, server down), or the stream only?
          if (this.mode === 'stream') this.setMode('connecting');
          this.answered = false;
          await this.refresh(); // one conditional GET
          if (this.stopped) break;
          if (this.answered) { // the API answers, the stream does not (a proxy that cuts it): once more, then poll
            cut += 1;
            if (cut >= 2) this.setMode('poll');
            wait = cut >= 2 ? STREAM_AGAIN_MS / 2 : 0;
          } else { // offline: nothing to poll; the stream is tried again, more slowly each time
            cut = 0;
            wait = opened ? retry : delay;
            delay = Math.min(delay * 2, MAX_RETRY_MS);
          }
        }
      } finally {
        clearInterval(watchdog);
      }
      if (opened && !stalled) { stalls = 0; cut = 0; delay = RETRY_MS; }
      if (this.stopped) break;
      if (this.mode === 'stream') this.setMode('connecting');
      if (wait) await this.sleep(wait);
    }
  }
}
