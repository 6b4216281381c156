import { apiKey, requestId, retryAfter } from './api.js';

// A Server-Sent Events reader over fetch(): EventSource cannot send an Authorization header,
// and the table stream needs the token there (never in the URL).

// Parser of the text/event-stream format (WHATWG HTML §9.2.6): push() decoded text in any
// chunking; onEvent({event, data, id}) is called per dispatched event, onRetry(ms) for a
// `retry:` field. Comments are ignored.
export function createSseParser(onEvent, onRetry = () => {}) {
  let buffer = '', data = [], event = '', id = null, lastId = null;
  function line(l) {
    if (l === '') {
      if (data.length) {
        if (id !== null) lastId = id;
        onEvent({ event: event || 'message', data: data.join('\n'), id: lastId });
      }
      data = []; event = ''; id = null;
      return;
    }
    if (l.startsWith(':')) return;
    const i = l.indexOf(':');
    const field = i < 0 ? l : l.slice(0, i);
    let value = i < 0 ? '' : l.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    else if (field === 'id' && !value.includes('\0')) id = value;
    else if (field === 'retry' && /^[0-9]+$/.test(value)) onRetry(Number(value));
  }
  return {
    push(text) {
      buffer += text;
      let m;
      while ((m = /\r\n|\r|\n/.exec(buffer)) !== null) {
        if (m[0] === '\r' && m.index === buffer.length - 1) break; // maybe the \r of a \r\n split in two
        line(buffer.slice(0, m.index));
        buffer = buffer.slice(m.index + m[0].length);
      }
    },
    get lastEventId() { return lastId; },
  };
}

// Read a stream until it ends or `signal` aborts. Resolves when the server closes it; rejects
// with the fetch error (a TypeError: no answer at all, or the connection dropped) or, when the
// server does not answer with text/event-stream, an Error with the HTTP `status` (and
// `retryAfter`). onOpen() is called once the stream is accepted, onChunk() on every chunk
// (comments too), onEvent for each event and onBatch() after the events of one chunk.
export async function readStream(url, { token, lastEventId, signal, onEvent, onOpen, onChunk, onBatch, onRetry }) {
  const headers = { Accept: 'text/event-stream', 'X-Request-ID': requestId() };
  if (token) headers.Authorization = `Bearer ${token}`;
  if (apiKey()) headers['X-API-Key'] = apiKey();
  if (lastEventId != null) headers['Last-Event-ID'] = String(lastEventId);
  const res = await fetch(url, { headers, cache: 'no-store', credentials: 'omit', signal });
  const type = res.headers.get('Content-Type') || '';
  if (!res.ok || !type.startsWith('text/event-stream') || !res.body) {
    if (res.body) res.body.cancel().catch(() => {});
    const err = new Error(`no event stream (HTTP ${res.status})`);
    err.status = res.status;
    err.retryAfter = retryAfter(res.headers);
    throw err;
  }
  if (onOpen) onOpen();
  const parser = createSseParser(onEvent, onRetry);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return parser.lastEventId;
    if (onChunk) onChunk();
    parser.push(value);
    if (onBatch) onBatch();
  }
}
