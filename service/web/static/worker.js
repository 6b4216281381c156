// The service worker: the app shell works offline once loaded. (The server prepends
// `self.SHELL = {version, files}`: every shell file and a hash of their contents.)
// Shell files are served from the cache (a new SHELL version caches them anew); the API
// (/v1/...) and the QR picture are never cached: they always go to the network.
const { version, files } = self.SHELL;
const CACHE = `mj-shell-${version}`;
const SHELL = new Set(files);

self.addEventListener('install', (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(files)).then(() => self.skipWaiting()));
});

self.addEventListener('activate', (event) => {
  event.waitUntil(caches.keys()
    .then((keys) => Promise.all(keys.filter((k) => k.startsWith('mj-shell-') && k !== CACHE).map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});

self.addEventListener('fetch', (event) => {
  const req = event.request;
  const url = new URL(req.url);
  if (req.method !== 'GET' || url.origin !== self.location.origin) return;
  const path = req.mode === 'navigate' && url.pathname === '/' ? '/' : url.pathname;
  if (!SHELL.has(path)) return;
  event.respondWith(caches.open(CACHE).then((c) => c.match(path)).then((hit) => hit || fetch(req)));
});
