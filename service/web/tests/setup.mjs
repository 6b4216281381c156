// Globals the app's pure modules meet in a browser, for node --test: localStorage, window (for
// the outbox's online listener) and a fetch that answers from a list of replies.
const store = new Map();
globalThis.localStorage = {
  getItem: (k) => (store.has(k) ? store.get(k) : null),
  setItem: (k, v) => { store.set(k, String(v)); },
  removeItem: (k) => { store.delete(k); },
  clear: () => store.clear(),
};
globalThis.window = globalThis.window || { addEventListener() {}, removeEventListener() {} };

// fetchReplies([{status, body}]): each call takes the next reply (and is kept in `calls`)
export function fetchReplies(replies) {
  const calls = [];
  globalThis.fetch = async (url, opts = {}) => {
    calls.push({ url, ...opts, body: opts.body === undefined ? undefined : JSON.parse(opts.body) });
    const r = replies.shift();
    if (!r) throw new TypeError('offline');
    if (r.offline) throw new TypeError('offline');
    return new Response(r.body === undefined ? '' : JSON.stringify(r.body), { status: r.status,
      headers: { 'Content-Type': 'application/json' } });
  };
  return calls;
}
