// The public HTTP API, and nothing else: every call the app makes goes through here.
// Tokens travel only in the Authorization header (never in a path or a query).

export class ApiError extends Error {
  // status: HTTP status (0: no answer at all — offline, refused, dropped);
  // retryAfter: seconds the server asked to wait (429, 503), or null
  constructor(status, problem = {}, retryAfter = null) {
    super(problem.detail || problem.title || (status ? `HTTP ${status}` : 'network error'));
    this.status = status;
    this.problem = problem;
    this.code = problem.code || null;
    this.retryAfter = retryAfter;
  }
  get offline() { return this.status === 0; }
  // worth sending again later with the same Idempotency-Key
  get retryable() { return this.status === 0 || this.status === 429 || this.status >= 500; }
}

// An RFC 9562 version-4 UUID from the platform's CSPRNG (crypto.randomUUID exists only in
// secure contexts, and a phone on http://<LAN address> is not one).
export function uuid4() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

// Every request carries X-Request-ID = web-<this phone's random id>-<random>: the service
// logs it with the request (never a token), so one phone's requests can be told apart in
// the access log — by an operator, and by the browser tests.
const DEVICE = 'mj.device';
let device = null;
export function deviceId() {
  if (device) return device;
  try { device = localStorage.getItem(DEVICE); } catch { /* private mode */ }
  if (!device || !/^[0-9a-f]{8}$/.test(device)) {
    device = uuid4().slice(0, 8);
    try { localStorage.setItem(DEVICE, device); } catch { /* kept for this page only */ }
  }
  return device;
}
export const requestId = () => `web-${deviceId()}-${uuid4().slice(24)}`;

// seconds of a Retry-After header (a number of seconds; an HTTP date is not sent by this service)
export function retryAfter(headers) {
  const v = Number(headers && headers.get('Retry-After'));
  return Number.isFinite(v) && v >= 0 ? v : null;
}

// An API key, when the service is run with API keys (docs/api.md: calls without a table token
// need X-API-Key); entered once on the start page and kept on the phone.
const KEY = 'mj.apikey';
export function apiKey() { try { return localStorage.getItem(KEY) || ''; } catch { return ''; } }
export function setApiKey(value) {
  try { if (value) localStorage.setItem(KEY, value); else localStorage.removeItem(KEY); } catch { /* ignore */ }
}

export async function call(method, path, { body, token, headers = {}, timeout = 15000 } = {}) {
  const h = { Accept: 'application/json', 'X-Request-ID': requestId(), ...headers };
  const key = apiKey();
  if (key) h['X-API-Key'] = key;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  if (token) h.Authorization = `Bearer ${token}`;
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeout);
  let res, text;
  try {
    res = await fetch(path, {
      method, headers: h, body: body === undefined ? undefined : JSON.stringify(body),
      cache: 'no-store', credentials: 'omit', signal: ctl.signal,
    });
    text = await res.text();
  } catch (e) {
    throw new ApiError(0, { title: String(e && e.message || e) });
  } finally {
    clearTimeout(timer);
  }
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (res.status === 304) return { status: 304, data: null, headers: res.headers };
  if (!res.ok) {
    throw new ApiError(res.status, data && typeof data === 'object' ? data : { title: res.statusText }, retryAfter(res.headers));
  }
  return { status: res.status, data, headers: res.headers };
}

export const tablePath = (id, rest = '') => `/v1/tables/${encodeURIComponent(id)}${rest}`;
