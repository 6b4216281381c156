// Live table view on every phone.
//
// refresh() is one conditional GET /v1/tables/{id} (If-None-Match: the version this phone
// has; 304 when nothing changed). Two ways to know when to call it:
//   * the table stream GET /v1/tables/{id}/stream (SSE): each `record` event triggers a
//     refresh. It is read with fetch() (sse.js), since EventSource cannot send the
//     Authorization header. While it is open the phone does not poll; a stream silent for
//     longer than STALL_MS (the server comments at least every 15 s) is dropped and opened
//     again, polling meanwhile;
//   * polling: every POLL_MS while the page is visible, slower when hidden — when the
//     server has no stream (404/405/501...), or while it cannot be reached.
// Switching off the stream is the USE_STREAM flag; either way the view comes from the same GET.
import { call, tablePath, ApiError } from '/web/api.js';
import { readStream } from '/web/sse.js';

export const USE_STREAM = true;
const POLL_MS = 1500, HIDDEN_POLL_MS = 10000, STREAM_RETRY_MS = 5000, STALL_MS = 45000;

export class TableLive {
  constructor({ id, token, onView, onStatus, onMode = () => {} }) {
    Object.assign(this, { id, token, onView, onStatus, onMode });
    this.etag = null;
    this.timer = null;
    this.stopped = false;
    this.streaming = false;
    this.busy = null;
  }

  start(version = null) {
    if (version != null) this.etag = `"${version}"`;
    this.loop();
    if (USE_STREAM) this.stream();
    this.onVisible = () => { if (document.visibilityState === 'visible') this.refresh(); };
    document.addEventListener('visibilitychange', this.onVisible);
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.abort) this.abort.abort();
    document.removeEventListener('visibilitychange', this.onVisible);
  }

  // one conditional GET at a time; a call while one is in flight runs one more after it
  // (the table may have changed after the first one was answered)
  refresh() {
    if (this.busy) {
      this.again = true;
      return this.busy;
    }
    this.busy = (async () => {
      do {
        this.again = false;
        await this.fetchView();
      } while (this.again && !this.stopped);
    })().finally(() => { this.busy = null; });
    return this.busy;
  }

  async fetchView() {
    const headers = this.etag ? { 'If-None-Match': this.etag } : {};
    try {
      const res = await call('GET', tablePath(this.id), { token: this.token, headers, timeout: 10000 });
      this.onStatus(true, null);
      if (res.status === 304) return null;
      this.etag = res.headers.get('ETag') || `"${res.data.version}"`;
      this.onView(res.data);
      return res.data;
    } catch (e) {
      this.onStatus(!(e instanceof ApiError && e.offline), e);
      return null;
    }
  }

  loop() {
    if (this.stopped) return;
    const wait = document.visibilityState === 'visible' ? POLL_MS : HIDDEN_POLL_MS;
    (this.streaming ? Promise.resolve() : this.refresh()).finally(() => {
      if (!this.stopped) this.timer = setTimeout(() => this.loop(), wait);
    });
  }

  setStreaming(on) {
    if (this.streaming === on) return;
    this.streaming = on;
    this.onMode(on ? 'stream' : 'poll');
  }

  async stream() {
    let lastId = null;
    let heard = 0;
    const watchdog = setInterval(() => {
      if (this.stopped) clearInterval(watchdog);
      else if (this.streaming && Date.now() - heard > STALL_MS) this.abort.abort();
    }, 5000);
    while (!this.stopped) {
      this.abort = new AbortController();
      try {
        lastId = await readStream(tablePath(this.id, '/stream'), {
          token: this.token, lastEventId: lastId, signal: this.abort.signal,
          onOpen: () => { heard = Date.now(); this.setStreaming(true); this.refresh(); }, // what was missed
          onChunk: () => { heard = Date.now(); },
          onEvent: (ev) => { if (ev.event === 'record') this.refresh(); },
        });
      } catch (e) {
        this.setStreaming(false);
        if (e && e.status && e.status !== 503 && e.status !== 429) { clearInterval(watchdog); return; } // no stream: poll
      }
      this.setStreaming(false);
      await new Promise((r) => setTimeout(r, STREAM_RETRY_MS));
    }
  }
}
