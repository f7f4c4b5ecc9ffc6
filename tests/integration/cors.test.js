// CORS (--allowed-origins): the headers every kind of response carries (JSON, errors, event streams,
// downloads), preflights answered before the key is checked, origins refused, "*", and none of it by default.
// Then a real browser: a page served from a second loopback server (another port, so another origin) calls aoi
// with fetch (a key in Authorization, so a preflight first) and EventSource, and must fail to read anything from
// a server that allows no origins. Chromium is Debian's package `chromium` (as dashboard.test.js): without it
// the browser tests fail, they do not skip.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import httpModule from 'node:http';
import puppeteer from 'puppeteer-core';
import {
  AOI_BIN, AOI_MODEL, WAIT_TIMEOUT_MS, createSession, del, expectError, expectStatus, get, http, openSSE, post,
  startServer, textRecords,
} from './harness.js';

const CHROMIUM = process.env.AOI_CHROMIUM || '/usr/bin/chromium';
const KEY = 'cors-key-0123456789';
const APP = 'https://app.example.com'; // an allowed origin besides the page's
const EVIL = 'https://evil.example';

// ---- the page's server: another origin ------------------------------------------------------------------

// The page reads where aoi is and what to do from its query string, runs its calls, and leaves what it saw in
// window.results (window.done once finished). Every call's failure is recorded, never thrown.
const PAGE = `<!doctype html><meta charset="utf-8"><title>cors</title><script>
(async () => {
  const q = new URLSearchParams(location.search);
  const aoi = q.get('aoi');
  const key = q.get('key');
  const session = q.get('session');
  const results = {};
  const attempt = async (name, fn) => {
    try { results[name] = await fn(); } catch (e) { results[name] = { failed: String(e) }; }
  };
  const auth = key ? { Authorization: 'Bearer ' + key } : {};
  // A key in Authorization: not a simple request, so a preflight goes first.
  await attempt('json', async () => {
    const r = await fetch(aoi + '/v1/sessions', { headers: auth });
    return { status: r.status, body: await r.json() };
  });
  // An error's body: a session that does not exist.
  await attempt('error', async () => {
    const r = await fetch(aoi + '/v1/sessions/no-such-' + session, { headers: auth });
    return { status: r.status, body: await r.json() };
  });
  // Without a key: a simple GET (no preflight), whose 401 must be readable too.
  await attempt('unauthorized', async () => {
    const r = await fetch(aoi + '/v1/sessions');
    return { status: r.status, body: await r.json() };
  });
  // A JSON POST (preflighted for its Content-Type and key).
  await attempt('push', async () => {
    const r = await fetch(aoi + '/v1/sessions/' + session + '/data', {
      method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ records: ['a record pushed by a page on another origin'] }),
    });
    return { status: r.status, body: await r.json() };
  });
  // The session's events through fetch with the key (what the dashboard does) ...
  if (q.get('stream') === 'fetch') {
    await attempt('stream', async () => {
      const controller = new AbortController();
      const r = await fetch(aoi + '/v1/sessions/' + session + '/events', { headers: auth, signal: controller.signal });
      const reader = r.body.getReader();
      // Push a record once the stream is open, so that an event comes.
      await fetch(aoi + '/v1/sessions/' + session + '/data', {
        method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' },
        body: JSON.stringify({ records: ['another record'] }),
      });
      let text = '';
      while (!text.includes('event: data_updated')) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      controller.abort();
      return { status: r.status, type: r.headers.get('content-type'), event: /event: (\\w+)/.exec(text)?.[1] };
    });
  }
  // ... and through EventSource, which cannot send a key: against an open server.
  if (q.get('stream') === 'eventsource') {
    await attempt('stream', () => new Promise((resolve) => {
      const es = new EventSource(aoi + '/v1/sessions/' + session + '/events');
      const timer = setTimeout(() => { es.close(); resolve({ failed: 'no event within 30 s' }); }, 30000);
      es.onopen = () => fetch(aoi + '/v1/sessions/' + session + '/data', {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ records: ['another record'] }),
      });
      es.onerror = () => { clearTimeout(timer); es.close(); resolve({ failed: 'EventSource error' }); };
      es.addEventListener('data_updated', (e) => {
        clearTimeout(timer);
        es.close();
        resolve({ event: 'data_updated', last_seq: JSON.parse(e.data).last_seq });
      });
    }));
  }
  window.results = results;
  window.done = true;
})();
</script>`;

let pageServer = null;
let pageOrigin = '';
let keyed = null; // a key, and --allowed-origins naming the page's origin and APP
let star = null; // open, --allowed-origins '*'
let plainKeyed = null; // a key, no --allowed-origins
let plainOpen = null; // open, no --allowed-origins
let browser = null;

before(async () => {
  pageServer = httpModule.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(PAGE);
  });
  await new Promise((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
  pageOrigin = `http://127.0.0.1:${pageServer.address().port}`;
  [keyed, star, plainKeyed, plainOpen] = await Promise.all([
    startServer({ apiKey: KEY, memoryOnly: true, args: ['--allowed-origins', `${pageOrigin},${APP}`] }),
    startServer({ memoryOnly: true, args: ['--allowed-origins', '*'] }),
    startServer({ apiKey: KEY, memoryOnly: true }),
    startServer({ memoryOnly: true }),
  ]);
});

after(async () => {
  if (browser) {
    const quit = browser.close().then(() => true, () => false);
    const timeout = new Promise((resolve) => setTimeout(resolve, 10000, false).unref());
    if (!(await Promise.race([quit, timeout]))) browser.process()?.kill('SIGKILL');
  }
  const servers = [keyed, star, plainKeyed, plainOpen].filter(Boolean);
  const alive = servers.map((s) => s.alive);
  const stopped = await Promise.all(servers.map((s) => s.stop()));
  pageServer?.close();
  servers.forEach((s, i) => {
    assert.ok(alive[i], `a server died during the tests (${JSON.stringify(s.exit)})\n${s.logs().slice(-4000)}`);
    assert.equal(stopped[i].code, 0, `a server's exit status after SIGTERM is ${stopped[i].code}`);
  });
});

// The Access-Control-* and Vary headers of a response, by lower-case name.
function corsOf(res) {
  const out = {};
  for (const [name, value] of res.headers) {
    if (name.startsWith('access-control-') || name === 'vary') out[name] = value;
  }
  return out;
}

const preflight = (server, path, origin, method, headers = 'authorization, content-type') =>
  http(server, 'OPTIONS', path, {
    key: false,
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
  });

function expectAllowed(res, origin) {
  const h = corsOf(res);
  assert.equal(h['access-control-allow-origin'], origin, JSON.stringify(h));
  assert.match(h.vary ?? '', /\bOrigin\b/, JSON.stringify(h));
  for (const name of ['Retry-After', 'X-Aoi-Last-Seq', 'X-Aoi-Data-Version', 'Content-Disposition']) {
    assert.ok((h['access-control-expose-headers'] ?? '').split(/,\s*/).includes(name), `${name}: ${JSON.stringify(h)}`);
  }
  assert.equal(h['access-control-allow-credentials'], undefined);
}

// ---- over plain HTTP ------------------------------------------------------------------------------------

test('without --allowed-origins: no CORS headers, and a preflight is a JSON 401 (a key) or 405 (open)', async () => {
  for (const res of [
    await get(plainKeyed, '/v1/sessions', { headers: { origin: APP } }),
    await get(plainKeyed, '/health', { headers: { origin: APP } }),
    await get(plainKeyed, '/v1/sessions', { key: false, headers: { origin: APP } }),
  ]) {
    assert.deepEqual(corsOf(res), {}, `HTTP ${res.status}`);
  }
  const refused = await preflight(plainKeyed, '/v1/sessions', APP, 'POST');
  expectError(refused, 401, 'unauthorized');
  assert.deepEqual(corsOf(refused), {});
  const open = await preflight(plainOpen, '/v1/sessions', APP, 'POST');
  expectError(open, 405, 'method_not_allowed');
  assert.equal(open.headers.get('allow'), 'POST, GET');
  assert.deepEqual(corsOf(open), {});
  expectStatus(await get(plainOpen, '/health'), 200);
});

test('an allowed origin can read JSON, errors (401, 404, 405), event streams and downloads', async () => {
  expectAllowed(await get(keyed, '/v1/sessions', { headers: { origin: APP } }), APP);
  const unauthorized = await get(keyed, '/v1/sessions', { key: false, headers: { origin: pageOrigin } });
  expectError(unauthorized, 401, 'unauthorized');
  expectAllowed(unauthorized, pageOrigin);
  const notFound = await get(keyed, '/v1/sessions/no-such-session', { headers: { origin: APP } });
  expectError(notFound, 404, 'not_found');
  expectAllowed(notFound, APP);
  const wrongMethod = await http(keyed, 'PUT', '/v1/sessions', { headers: { origin: APP } });
  expectError(wrongMethod, 405, 'method_not_allowed');
  expectAllowed(wrongMethod, APP);

  const s = await createSession(keyed);
  const events = await openSSE(keyed, `/v1/sessions/${s.id}/events`, { headers: { origin: APP } });
  try {
    assert.equal(events.status, 200);
    assert.match(events.headers.get('content-type'), /text\/event-stream/);
    expectAllowed(events, APP);
  } finally {
    events.reader?.close();
  }
  const completion = await openSSE(keyed, '/v1/chat/completions', {
    method: 'POST', headers: { origin: APP },
    json: { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true },
  });
  try {
    assert.equal(completion.status, 200);
    expectAllowed(completion, APP);
  } finally {
    completion.reader?.close();
  }
  const snapshot = await get(keyed, `/v1/sessions/${s.id}/snapshot`, { headers: { origin: APP } });
  expectStatus(snapshot, 200);
  assert.ok(snapshot.headers.get('x-aoi-last-seq') !== null);
  expectAllowed(snapshot, APP);
  expectStatus(await del(keyed, `/v1/sessions/${s.id}`), 200);
});

test('a preflight is answered before the key: 204 with the route\'s methods, the headers, a max age', async () => {
  const cases = [
    ['/v1/sessions', 'POST', 'POST, GET'],
    ['/v1/sessions/any-id', 'DELETE', 'GET, DELETE'],
    ['/v1/sessions/any-id/events', 'GET', 'GET'],
    ['/v1/chat/completions', 'POST', 'POST'],
    ['/health', 'GET', 'GET'],
  ];
  for (const [path, method, methods] of cases) {
    const res = await preflight(keyed, path, pageOrigin, method, 'authorization, content-type, last-event-id, x-stainless-os');
    expectStatus(res, 204);
    assert.equal(res.text, '');
    const h = corsOf(res);
    assert.equal(h['access-control-allow-origin'], pageOrigin, path);
    assert.equal(h['access-control-allow-methods'], methods, path);
    const allowed = h['access-control-allow-headers'].toLowerCase().split(/,\s*/);
    for (const name of ['authorization', 'content-type', 'last-event-id', 'x-api-key', 'anthropic-version',
      'x-stainless-os']) {
      assert.ok(allowed.includes(name), `${path}: ${name} in ${h['access-control-allow-headers']}`);
    }
    assert.equal(h['access-control-max-age'], '600');
    assert.match(h.vary, /\bOrigin\b/);
  }
  // A path no route has: 404 (with the origin, so that a page can read why).
  expectError(await preflight(keyed, '/v1/nothing-here', APP, 'GET'), 404, 'not_found');
  // An OPTIONS that is no preflight is a request like any other: without a key, 401.
  expectError(await http(keyed, 'OPTIONS', '/v1/sessions', { key: false, headers: { origin: APP } }), 401,
    'unauthorized');
  // /metrics counts preflights under their route, as 204s, without a tenant.
  const metrics = (await get(keyed, '/metrics')).text;
  assert.match(metrics, /aoi_http_requests_total\{route="\/v1\/sessions\/\{id\}\/events",method="OPTIONS",status="204",tenant="-"\} 1/);
});

test('an origin not allowed gets no CORS headers, and its preflight a 403 naming it', async () => {
  for (const origin of [EVIL, `${APP}:8443`, 'http://app.example.com', 'null']) {
    const res = await get(keyed, '/v1/sessions', { headers: { origin } });
    expectStatus(res, 200);
    assert.deepEqual(corsOf(res), { vary: 'Origin' }, origin);
    const pre = await preflight(keyed, '/v1/sessions', origin, 'GET');
    expectError(pre, 403, 'forbidden');
    assert.ok(pre.body.error.message.includes(origin), pre.text);
    assert.equal(corsOf(pre)['access-control-allow-origin'], undefined);
    assert.equal(corsOf(pre)['access-control-allow-methods'], undefined);
  }
});

test('"*" lets any origin read, with Access-Control-Allow-Origin: *', async () => {
  expectAllowed(await get(star, '/v1/sessions', { headers: { origin: EVIL } }), '*');
  const pre = await preflight(star, '/v1/sessions', EVIL, 'POST');
  expectStatus(pre, 204);
  assert.equal(corsOf(pre)['access-control-allow-origin'], '*');
  // Without an Origin (curl, a server): nothing but Vary.
  assert.deepEqual(corsOf(await get(star, '/health')), { vary: 'Origin' });
});

test('an --allowed-origins entry that is no origin stops the server at start, naming it', () => {
  for (const bad of ['https://app.example.com/', 'app.example.com', 'null', 'https://app.example.com:443']) {
    const r = spawnSync(AOI_BIN, ['serve', '--model', AOI_MODEL, '--port', '0', '--memory-only', '--allowed-origins',
      `${APP},${bad}`], { encoding: 'utf8', timeout: 60_000 });
    assert.notEqual(r.status, 0, bad);
    assert.ok(`${r.stdout}${r.stderr}`.includes(`'${bad}'`), `${bad}: ${r.stdout}${r.stderr}`);
  }
});

// ---- in a browser ---------------------------------------------------------------------------------------

async function launchBrowser() {
  if (browser) return browser;
  assert.ok(existsSync(CHROMIUM),
    `Chromium is not installed at ${CHROMIUM}: the CORS browser tests need Debian's package "chromium" ` +
    '(apt-get install chromium; CI installs it), or AOI_CHROMIUM=/path/to/chrome');
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // --no-sandbox: CI may run as root, where Chromium's sandbox refuses to start; the page is our own.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run', '--no-default-browser-check'],
  });
  return browser;
}

// Opens the page against `server` and returns what it saw: { results, console }.
async function runPage(server, params) {
  const context = await (await launchBrowser()).createBrowserContext();
  try {
    const page = await context.newPage();
    const console = [];
    page.on('console', (m) => console.push(`${m.type()}: ${m.text()}`));
    const q = new URLSearchParams({ aoi: server.url, ...params });
    await page.goto(`${pageOrigin}/?${q}`, { waitUntil: 'load' });
    assert.notEqual(new URL(page.url()).origin, server.url, 'the page must be on another origin');
    await page.waitForFunction(() => window.done === true, { timeout: WAIT_TIMEOUT_MS, polling: 100 });
    return { results: await page.evaluate(() => window.results), console };
  } finally {
    await context.close();
  }
}

test('in Chromium, a page on an allowed origin calls aoi with a key, reads errors and streams events', async () => {
  const s = await createSession(keyed);
  try {
    const { results, console } = await runPage(keyed, { key: KEY, session: s.id, stream: 'fetch' });
    const seen = `${JSON.stringify(results)}\n${console.join('\n')}`;
    assert.equal(results.json?.status, 200, seen);
    assert.ok(results.json.body.sessions.some((x) => x.id === s.id), seen);
    assert.equal(results.error?.status, 404, seen);
    assert.equal(results.error.body.error.type, 'not_found', seen);
    assert.equal(results.unauthorized?.status, 401, seen);
    assert.equal(results.unauthorized.body.error.type, 'unauthorized', seen);
    assert.equal(results.push?.status, 202, seen);
    assert.equal(results.stream?.status, 200, seen);
    assert.match(results.stream.type, /text\/event-stream/, seen);
    assert.equal(results.stream.event, 'data_updated', seen);
  } finally {
    await del(keyed, `/v1/sessions/${s.id}`);
  }
});

test('in Chromium, EventSource (which cannot send a key) reads events from an open server allowing "*"',
  async () => {
    const s = await createSession(star);
    try {
      const { results, console } = await runPage(star, { session: s.id, stream: 'eventsource' });
      const seen = `${JSON.stringify(results)}\n${console.join('\n')}`;
      assert.equal(results.json?.status, 200, seen);
      assert.equal(results.push?.status, 202, seen);
      assert.equal(results.stream?.event, 'data_updated', seen);
      assert.ok(results.stream.last_seq >= 1, seen);
    } finally {
      await del(star, `/v1/sessions/${s.id}`);
    }
  });

test('in Chromium, the same page cannot read anything from servers without --allowed-origins', async () => {
  for (const [server, key, stream] of [[plainKeyed, KEY, 'fetch'], [plainOpen, '', 'eventsource']]) {
    const s = await createSession(server);
    try {
      const { results } = await runPage(server, { key, session: s.id, stream });
      const seen = JSON.stringify(results);
      for (const name of ['json', 'error', 'unauthorized', 'push', 'stream']) {
        assert.ok(results[name]?.failed, `${server.url} ${name}: ${seen}`);
      }
      // The preflighted push never reached the server; the records were not taken.
      const session = (await get(server, `/v1/sessions/${s.id}`)).body;
      assert.equal(session.last_seq_pushed, 0, JSON.stringify(session));
    } finally {
      await del(server, `/v1/sessions/${s.id}`);
    }
  }
});

// A POST with an Origin (what a page's form or a simple text/plain fetch sends without a preflight) is answered
// as without one, with the headers.
test('a push with an Origin is taken as any other, and answered with the CORS headers', async () => {
  const s = await createSession(keyed);
  try {
    const res = await post(keyed, `/v1/sessions/${s.id}/data`, { records: textRecords(2) }, { headers: { origin: APP } });
    expectStatus(res, 202);
    expectAllowed(res, APP);
  } finally {
    await del(keyed, `/v1/sessions/${s.id}`);
  }
});
