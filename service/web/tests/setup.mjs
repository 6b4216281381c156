import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

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

// the pattern table the service serves at /web/patterns.json, made from the rules core's registry
// (service/rules/patterns.py as_json): PYTHON, else the project's .venv, else python3
export function servedPatterns() {
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  const venv = `${root}.venv/bin/python`;
  const python = process.env.PYTHON || (existsSync(venv) ? venv : 'python3');
  const code = 'from service.rules.patterns import as_json; print(as_json(), end="")';
  return JSON.parse(execFileSync(python, ['-c', code], { cwd: root, encoding: 'utf8' }));
}
