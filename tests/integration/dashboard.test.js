// The dashboard (GET /): its files over HTTP, the records route it reads, and the page itself in a real browser
// (headless Chromium driven by puppeteer-core) against a server with an API key and a session fed records while
// the page watches. Chromium is Debian's package `chromium`: without it these tests fail, they do not skip.
// The main test saves a screenshot (build/test-output/dashboard.png, or under AOI_TEST_OUTPUT_DIR);
// AOI_DASHBOARD_FEED_MS=40000 feeds the session longer first, for a picture with more history.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { spawnSync } from 'node:child_process';
import {
  AOI_BIN, BAR_TEMPLATE, SMALL_SESSION, WAIT_TIMEOUT_MS, barRecords, createSession, del, expectError, expectStatus,
  freePort, get, post, pushRecords, sleep, startServer, textRecords, uniqueId, useServer, waitIngested, waitSession,
} from './harness.js';
import { MOSQUITTO_PUB, startMosquitto, stopBroker } from './brokers.js';

const CHROMIUM = process.env.AOI_CHROMIUM || '/usr/bin/chromium';
// Screenshots go beside the build (build/test-output for build/tools/aoi) unless AOI_TEST_OUTPUT_DIR says where.
const OUTPUT_DIR = process.env.AOI_TEST_OUTPUT_DIR || path.resolve(path.dirname(AOI_BIN), '..', 'test-output');
const KEY = 'dashboard-key-0123456789'; // an admin key: sees every session
const TENANT_KEY = 'dashboard-tenant-key-0123'; // tenant "acme": sees its own sessions only
const SESSION = 'keep-dashboard'; // the harness deletes every other session after each test
const FLASH_QUESTION = 'Is the trend UP or DOWN? Answer with one word.';
const QUESTION = 'What was the highest high of the last five bars?';

const keysDir = mkdtempSync(path.join(os.tmpdir(), 'aoi-dashboard-keys-'));
const keysFile = path.join(keysDir, 'keys.txt');
writeFileSync(keysFile, `${TENANT_KEY} acme\n`);
after(() => rmSync(keysDir, { recursive: true, force: true }));

const ctx = useServer({ apiKey: KEY, args: ['--api-keys', keysFile] }, async (server) => {
  const res = await post(server, '/v1/sessions', {
    id: SESSION,
    system: 'You are a market analyst. The lines below are hourly OHLCV bars, oldest first.',
    template: BAR_TEMPLATE,
    ...SMALL_SESSION,
  });
  expectStatus(res, 201);
  expectStatus(await post(server, `/v1/sessions/${SESSION}/flash`, { question: FLASH_QUESTION, max_tokens: 6 }), 201);
  const pushed = await pushRecords(server, SESSION, barRecords(4));
  await waitIngested(server, SESSION, pushed.last_seq);
  await waitSession(server, SESSION, (s) => s.flash[0]?.version != null, 'a first flash answer');
});

// ---- the browser ---------------------------------------------------------------------------------------

let browser = null;

async function launchBrowser() {
  if (browser) return browser;
  assert.ok(existsSync(CHROMIUM),
    `Chromium is not installed at ${CHROMIUM}: the dashboard tests need Debian's package "chromium" ` +
    '(apt-get install chromium; CI installs it), or AOI_CHROMIUM=/path/to/chrome');
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    // --no-sandbox: CI may run as root, where Chromium's sandbox refuses to start; the page is our own.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run', '--no-default-browser-check'],
  });
  return browser;
}

// Closing asks Chromium to quit over its debugging connection; should it not answer in time, its process is
// killed, so that a browser that hangs can never hold the suite open.
after(async () => {
  if (!browser) return;
  const quit = browser.close().then(() => true, () => false);
  const timeout = new Promise((resolve) => setTimeout(resolve, 10000, false).unref());
  if (!(await Promise.race([quit, timeout]))) browser.process()?.kill('SIGKILL');
});

// A page in a fresh browser context (its own sessionStorage), recording what the console and the page report.
async function openPage(url) {
  const context = await (await launchBrowser()).createBrowserContext();
  const page = await context.newPage();
  await page.setViewport({ width: 1280, height: 1000 });
  const problems = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warn') problems.push(`console.${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.setDefaultTimeout(WAIT_TIMEOUT_MS);
  await page.goto(url, { waitUntil: 'load' });
  return { page, context, problems };
}

// What the page shows, for a failure message.
async function pageState(page) {
  try {
    return await page.evaluate(() => JSON.stringify({
      status: document.getElementById('status')?.textContent,
      notice: document.getElementById('notice')?.textContent,
      key: document.getElementById('key-panel')?.hidden === false ? document.getElementById('key-message')?.textContent : null,
      version: document.getElementById('detail-version')?.dataset.version,
      stream: document.getElementById('detail-stream')?.textContent,
      flash: [...document.querySelectorAll('#flash-list li')].map((li) => [li.dataset.version, li.querySelector('.answer')?.textContent]),
      answer: document.getElementById('answer')?.dataset.state,
      meta: document.getElementById('answer-meta')?.textContent,
    }));
  } catch (err) {
    return `(page state unavailable: ${err.message})`;
  }
}

// Waits for fn(...args) to be true in the page; on timeout the error says what the page showed.
async function waitInPage(page, what, fn, ...args) {
  try {
    await page.waitForFunction(fn, { timeout: WAIT_TIMEOUT_MS, polling: 100 }, ...args);
  } catch (err) {
    throw new Error(`the page did not show ${what}: ${err.message}\npage: ${await pageState(page)}\n` +
      `server log:\n${ctx.server.logs().slice(-2000)}`);
  }
}

async function enterKey(page, key) {
  await page.waitForSelector('#key-input', { visible: true });
  await page.$eval('#key-input', (input) => {
    input.value = '';
  });
  await page.type('#key-input', key);
  await page.click('#key-submit');
}

const shownVersion = (page) => page.$eval('#detail-version', (e) => Number(e.dataset.version));
const flashVersion = (page) => page.$eval('#flash-list li', (li) => Number(li.dataset.version || 0));

// Pushes one bar every `everyMs` until stop() is called; resolves with the last sequence number pushed.
function feed(server, id, everyMs = 250) {
  let stopped = false;
  let lastSeq = 0;
  let n = 100;
  const done = (async () => {
    while (!stopped) {
      const res = await pushRecords(server, id, barRecords(1, n));
      n += 1;
      lastSeq = res.last_seq;
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
    return lastSeq;
  })();
  return { stop: () => { stopped = true; return done; } };
}

// ---- HTTP ----------------------------------------------------------------------------------------------

test('the page and its files are served without a key, with their types and validators', async () => {
  const page = await get(ctx.server, '/', { key: false });
  expectStatus(page, 200);
  assert.match(page.headers.get('content-type'), /^text\/html/);
  assert.match(page.text, /<script type="module" src="dashboard\/app\.js">/);
  assert.match(page.headers.get('content-security-policy') ?? '', /script-src 'self'/);
  for (const [file, type] of [['app.js', /^text\/javascript/], ['style.css', /^text\/css/], ['sse.js', /^text\/javascript/]]) {
    const res = await get(ctx.server, `/dashboard/${file}`, { key: false });
    expectStatus(res, 200);
    assert.match(res.headers.get('content-type'), type, file);
    const etag = res.headers.get('etag');
    assert.match(etag ?? '', /^"[0-9a-f]+"$/, `${file}: ETag`);
    const again = await get(ctx.server, `/dashboard/${file}`, { key: false, headers: { 'if-none-match': etag } });
    expectStatus(again, 304);
  }
  expectError(await get(ctx.server, '/dashboard/no-such-file.js', { key: false }), 404, 'not_found');
  const settings = await get(ctx.server, '/dashboard.json', { key: false });
  expectStatus(settings, 200);
  assert.deepEqual(settings.body, { api_key_required: true });
  // What the page shows needs the key, and the session's owner's: another tenant's session does not exist.
  expectError(await get(ctx.server, `/v1/sessions/${SESSION}/records`, { key: false }), 401, 'unauthorized');
  expectError(await get(ctx.server, `/v1/sessions/${SESSION}/records`, { key: TENANT_KEY }), 404, 'not_found');
});

test('GET /v1/sessions/{id}/records: the newest records of the window, as the model reads them', async () => {
  const s = await createSession(ctx.server);
  const lines = textRecords(6);
  const pushed = await pushRecords(ctx.server, s.id, lines);
  await waitIngested(ctx.server, s.id, pushed.last_seq);
  const res = await get(ctx.server, `/v1/sessions/${s.id}/records?last=3`);
  expectStatus(res, 200);
  assert.equal(res.body.id, s.id);
  assert.equal(res.body.residency, 'resident');
  assert.ok(res.body.data_version >= 1, res.text);
  assert.deepEqual(res.body.records.map((r) => r.text), lines.slice(-3));
  assert.deepEqual(res.body.records.map((r) => r.seq), [4, 5, 6].map((i) => pushed.first_seq + i - 1));
  for (const r of res.body.records) assert.ok(Number.isInteger(r.tokens) && r.tokens > 0, res.text);
  const all = await get(ctx.server, `/v1/sessions/${s.id}/records`);
  assert.deepEqual(all.body.records.map((r) => r.text), lines, 'by default up to 20');
  for (const bad of ['0', '201', 'x', '-1', '2.5']) {
    expectError(await get(ctx.server, `/v1/sessions/${s.id}/records?last=${bad}`), 422, 'invalid_value', 'last');
  }
  expectError(await get(ctx.server, '/v1/sessions/no-such-session/records'), 404, 'not_found');
});

// ---- the page in Chromium ------------------------------------------------------------------------------

test('in Chromium: the key, a live version and flash answer while records arrive, a question answered', async (t) => {
  const started = Date.now();
  const { page, context, problems } = await openPage(`${ctx.server.url}/`);
  try {
    await enterKey(page, KEY);
    await page.waitForSelector(`tr[data-id="${SESSION}"]`);
    await page.click(`tr[data-id="${SESSION}"]`);
    await waitInPage(page, 'the session and its live event stream', (id) =>
      document.getElementById('detail-id')?.textContent === id &&
      document.getElementById('detail-stream')?.dataset.state === 'live' &&
      document.querySelector('#flash-list li[data-version]:not([data-version=""])') !== null, SESSION);
    const version0 = await shownVersion(page);
    const flash0 = await flashVersion(page);

    // Records arrive while the page watches: the version counter and the flash answer follow them.
    const bars = feed(ctx.server, SESSION);
    let lastSeq;
    try {
      await waitInPage(page, `a version above ${version0 + 2} and a flash answer newer than version ${flash0}`,
        (v0, f0) => Number(document.getElementById('detail-version').dataset.version) > v0 + 2 &&
          Number(document.querySelector('#flash-list li').dataset.version) > f0, version0, flash0);
      // For a screenshot with more history (docs/dashboard.png): AOI_DASHBOARD_FEED_MS keeps the feed going.
      const more = started + Number(process.env.AOI_DASHBOARD_FEED_MS || 0) - Date.now();
      if (more > 0) await sleep(more);
    } finally {
      lastSeq = await bars.stop();
    }
    await waitInPage(page, `record #${lastSeq} in the latest records`,
      (seq) => document.querySelector(`#records li[data-seq="${seq}"]`) !== null, lastSeq);
    const session = await waitIngested(ctx.server, SESSION, lastSeq);
    // The flash round on the last version done too: the question below then runs alone, as the same question
    // asked again through the API does, so that greedy decoding gives both the same text.
    await waitSession(ctx.server, SESSION, (s) => s.flash[0]?.version === s.data_version, 'the last flash round');
    await waitInPage(page, `version ${session.data_version}`,
      (v) => Number(document.getElementById('detail-version').dataset.version) >= v, session.data_version);
    const flashText = await page.$eval('#flash-list li .answer', (e) => e.textContent);
    assert.ok(flashText.length > 0 && !/waiting/.test(flashText), `flash answer shown: ${JSON.stringify(flashText)}`);

    // A question asked in the page streams its answer in.
    await page.type('#question', QUESTION);
    await page.$eval('#max-tokens', (input) => {
      input.value = '12';
    });
    await page.click('#ask-button');
    await waitInPage(page, 'the answer to the question asked', () =>
      document.getElementById('answer').dataset.state === 'done');
    const answer = await page.$eval('#answer', (e) => e.textContent);
    const meta = await page.$eval('#answer-meta', (e) => e.textContent);
    const answeredAt = await page.$eval('#answer-meta', (e) => Number(e.dataset.version));
    assert.match(meta, /^path (standard|flash|speculative) · version \d+ · \d+ tokens · /);
    // The text shown is the server's answer: asked again through the API on the same data version (nothing is
    // pushed now), greedy decoding gives the same text.
    const again = await post(ctx.server, `/v1/sessions/${SESSION}/query`, { question: QUESTION, max_tokens: 12 });
    expectStatus(again, 200);
    assert.equal(again.body.data_version, answeredAt, 'no record arrived in between');
    assert.equal(answer, again.body.answer === '' ? '(empty answer)' : again.body.answer);
    // The chart drew the ingestion and the question.
    assert.ok(await page.$$eval('#chart rect.bar', (bars) => bars.length) > 0, 'ingestion bars');
    assert.equal(await page.$$eval('#chart circle.dot-asked', (dots) => dots.length), 1, 'the question asked');
    assert.ok(await page.$$eval('#chart circle.dot-flash', (dots) => dots.length) > 0, 'flash answers');

    mkdirSync(OUTPUT_DIR, { recursive: true });
    const shot = path.join(OUTPUT_DIR, 'dashboard.png');
    await page.screenshot({ path: shot, fullPage: true });
    t.diagnostic(`screenshot: ${shot} (${statSync(shot).size} bytes); the browser part took ${Date.now() - started} ms`);
    assert.deepEqual(problems, [], `the console reported:\n${problems.join('\n')}`);
  } finally {
    await context.close();
  }
});

test('in Chromium: a wrong key is refused; a tenant sees its own sessions; a deleted one leaves the view', async () => {
  const own = uniqueId('acme');
  expectStatus(await post(ctx.server, '/v1/sessions', { id: own, ...SMALL_SESSION }, { key: TENANT_KEY }), 201);
  const { page, context, problems } = await openPage(`${ctx.server.url}/`);
  try {
    await waitInPage(page, 'the request for a key', () =>
      /needs an API key/.test(document.getElementById('key-message').textContent) &&
      document.getElementById('status').dataset.state === 'key');
    await enterKey(page, 'not-the-key');
    await waitInPage(page, 'that the key was refused', () =>
      document.getElementById('key-panel').hidden === false &&
      /refused this API key/.test(document.getElementById('key-message').textContent));
    // A tenant's key: its session, and not the admin's (one list answer fills the table).
    await enterKey(page, TENANT_KEY);
    await page.waitForSelector(`tr[data-id="${own}"]`);
    assert.equal(await page.$(`tr[data-id="${SESSION}"]`), null, 'another owner\'s session is not shown');

    const doomed = uniqueId('doomed');
    expectStatus(await post(ctx.server, '/v1/sessions', { id: doomed, ...SMALL_SESSION }, { key: TENANT_KEY }), 201);
    await page.waitForSelector(`tr[data-id="${doomed}"]`);
    await page.click(`tr[data-id="${doomed}"]`);
    // Live, and its records answered: a records request still in flight when the session goes is a 404 the
    // browser reports in its console (the page handles it, the console line is the browser's own).
    await waitInPage(page, `session ${doomed} with its event stream live and its records shown`, (id) =>
      document.getElementById('detail-id').textContent === id &&
      document.getElementById('detail-stream').dataset.state === 'live' &&
      document.querySelector('#records li.empty')?.textContent === 'No records yet.', doomed);
    expectStatus(await del(ctx.server, `/v1/sessions/${doomed}`, { key: TENANT_KEY }), 200);
    await waitInPage(page, `session ${doomed} gone from the table and the detail, with a notice`, (id) =>
      document.querySelector(`tr[data-id="${id}"]`) === null &&
      document.getElementById('detail-id').textContent !== id &&
      document.getElementById('notice').textContent.includes(`${id} was deleted`), doomed);

    // Another key, through the page's own button: the admin's sees every session.
    await page.click('#forget-key');
    await enterKey(page, KEY);
    await page.waitForSelector(`tr[data-id="${SESSION}"]`);
    await page.waitForSelector(`tr[data-id="${own}"]`);

    // The only errors: the browser's own line for each refused request.
    const unexpected = problems.filter((p) => !/status of 401/.test(p));
    assert.deepEqual(unexpected, [], `the console reported:\n${unexpected.join('\n')}`);
  } finally {
    await context.close();
  }
});

test('in Chromium: a source session shows its consumer: connected, what it read, and when its broker is gone',
  async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'aoi-dashboard-mqtt-'));
    const port = await freePort();
    let mosquitto = await startMosquitto(port, dir);
    const id = uniqueId('fed');
    const { page, context, problems } = await openPage(`${ctx.server.url}/`);
    try {
      expectStatus(await post(ctx.server, '/v1/sessions', {
        id, ...SMALL_SESSION, source: { url: `mqtt://127.0.0.1:${port}/plant/%23`, format: 'json' },
      }), 201);
      // Published once the consumer has subscribed (its first connection comes after the session's creation):
      // what an MQTT broker gets before that goes to no subscriber.
      await waitSession(ctx.server, id, (x) => x.source.connected, 'the source subscribed');
      const r = spawnSync(MOSQUITTO_PUB, ['-h', '127.0.0.1', '-p', String(port), '-t', 'plant/boiler', '-q', '1',
        '-l'], { input: '{"temp": 81}\n{"temp": 82}\n{"temp": 83}\n', encoding: 'utf8' });
      assert.equal(r.status, 0, r.stderr);
      await waitSession(ctx.server, id, (x) => x.source.messages === 3, 'the three messages read');
      await enterKey(page, KEY);
      await page.waitForSelector(`tr[data-id="${id}"]`);
      await page.click(`tr[data-id="${id}"]`);
      await waitInPage(page, 'the source connected in the table and the detail', (sid, p) =>
        document.querySelector(`tr[data-id="${sid}"] td.source`)?.textContent === 'connected' &&
        document.getElementById('detail-source').hidden === false &&
        document.getElementById('detail-source').textContent.startsWith(`Source mqtt://127.0.0.1:${p}/plant/%23: connected`) &&
        document.getElementById('detail-source').textContent.includes('3 read'), id, port);
      await stopBroker(mosquitto);
      mosquitto = null;
      await waitInPage(page, 'the source disconnected, with the reason', (sid) =>
        document.querySelector(`tr[data-id="${sid}"] td.source`)?.textContent === 'disconnected' &&
        document.getElementById('detail-source').dataset.state === 'disconnected' &&
        /mqtt 127\.0\.0\.1:\d+/.test(document.getElementById('detail-source').textContent), id);
      // A session without a source shows none.
      await page.click(`tr[data-id="${SESSION}"]`);
      await waitInPage(page, 'no source line for a pushed session', (sid) =>
        document.getElementById('detail-id').textContent === sid &&
        document.getElementById('detail-source').hidden === true, SESSION);
      assert.deepEqual(problems, [], `the console reported:\n${problems.join('\n')}`);
    } finally {
      await context.close();
      await del(ctx.server, `/v1/sessions/${id}`);
      if (mosquitto) await stopBroker(mosquitto);
      rmSync(dir, { recursive: true, force: true });
    }
  });

test('in Chromium: a server that goes away shows the retry indicator', async () => {
  await launchBrowser();
  const server = await startServer({ memoryOnly: true });
  let context = null;
  try {
    const opened = await openPage(`${server.url}/`);
    context = opened.context;
    const { page } = opened;
    await waitInPage(page, 'the live status (no key needed)', () =>
      document.getElementById('status').dataset.state === 'live' &&
      document.getElementById('key-panel').hidden === true);
    const stopped = await server.stop();
    assert.equal(stopped.code, 0, server.logs().slice(-2000));
    await waitInPage(page, 'the retry indicator', () =>
      document.getElementById('status').dataset.state === 'retrying' &&
      /retrying in \d+ s/.test(document.getElementById('status').textContent));
  } finally {
    await context?.close();
    await server.stop();
  }
});
