// Live table view on every phone.
//
// refresh() is one conditional GET /v1/tables/{id} (If-None-Match: the version this phone
// has; 304 when nothing changed). Two ways to know when to call it:
//   * polling (today): every POLL_MS while the page is visible, slower when hidden;
//   * the table stream GET /v1/tables/{id}/stream (SSE, being built): each `record` event
//     triggers a refresh. It is read with fetch() (sse.js), since EventSource cannot send the
//     Authorization header. When the server has no stream (404/405/501...), polling stays.
// Switching is the USE_STREAM flag; either way the view comes from the same GET.
import { call, tablePath, ApiError } from '/web/api.js';
import { readStream } from '/web/sse.js';

export const USE_STREAM = true;
const POLL_MS = 1500, HIDDEN_POLL_MS = 10000, STREAM_RETRY_MS = 5000;

export class TableLive {
  constructor({ id, token, onView, onStatus }) {
    Object.assign(this, { id, token, onView, onStatus });
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

  // one conditional GET; coalesces concurrent calls
  refresh() {
    if (!this.busy) {
      this.busy = this.fetchView().finally(() => { this.busy = null; });
    }
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
    const wait = this.streaming ? HIDDEN_POLL_MS * 3 : document.visibilityState === 'visible' ? POLL_MS : HIDDEN_POLL_MS;
    this.refresh().finally(() => {
      if (!this.stopped) this.timer = setTimeout(() => this.loop(), wait);
    });
  }

  async stream() {
    let lastId = null;
    while (!this.stopped) {
      this.abort = new AbortController();
      try {
        this.streaming = true;
        lastId = await readStream(tablePath(this.id, '/stream'), {
          token: this.token, lastEventId: lastId, signal: this.abort.signal,
          onEvent: (ev) => { if (ev.event === 'record') this.refresh(); },
        });
      } catch (e) {
        this.streaming = false;
        if (e && e.status && e.status !== 503 && e.status !== 429) return; // no stream here: poll
      }
      this.streaming = false;
      await new Promise((r) => setTimeout(r, STREAM_RETRY_MS));
    }
  }
}
