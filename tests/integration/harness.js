// Shared helpers for the aoi black-box integration tests: start and stop a server per test file, make HTTP
// requests, read server-sent events, wait for ingestion. Only Node's standard library is used here.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, '..', '..');
export const AOI_BIN = process.env.AOI_BIN || path.join(repoRoot, 'build', 'tools', 'aoi');
export const AOI_MODEL = process.env.AOI_MODEL || path.join(repoRoot, 'build', 'models', 'test-micro.gguf');
// The same model without a chat template (scripts/make-test-models.sh), beside it.
export const AOI_MODEL_NO_CHAT_TEMPLATE = process.env.AOI_MODEL_NO_CHAT_TEMPLATE ||
  path.join(path.dirname(AOI_MODEL), 'test-micro-no-chat-template.gguf');

// The trained analyst model (models/analyst.gguf, committed): answers that follow the bars.
export const AOI_ANALYST_MODEL = process.env.AOI_ANALYST_MODEL || path.join(repoRoot, 'models', 'analyst.gguf');

// Generous bounds: the machine has two slow cores and CI can be loaded. Timings are never asserted.
export const STARTUP_TIMEOUT_MS = Number(process.env.AOI_STARTUP_TIMEOUT_MS || 120_000);
export const REQUEST_TIMEOUT_MS = 60_000;
export const WAIT_TIMEOUT_MS = 60_000;

const live = new Set();
function killAll() {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
}
process.on('exit', killAll);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, () => {
    killAll();
    process.exit(128 + (sig === 'SIGINT' ? 2 : sig === 'SIGTERM' ? 15 : 1));
  });
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Races a promise against a timer; the error names what was being waited for.
export async function withTimeout(promise, ms, what) {
  let timer;
  try {
    return await Promise.race([
      promise,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

// A running `aoi serve`. `url` is http://127.0.0.1:PORT (no trailing slash).
export class Server {
  constructor(child, url, output) {
    this.child = child;
    this.url = url;
    const u = new URL(url);
    this.host = u.hostname;
    this.port = Number(u.port);
    this.output = output; // { text } : the tail of stdout + stderr
    this.exit = null; // { code, signal } once it exited
    this.exited = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        this.exit = { code, signal };
        live.delete(child);
        resolve(this.exit);
      });
    });
    this.apiKey = null;
  }

  get alive() {
    return this.exit === null;
  }

  logs() {
    return this.output.text;
  }

  // SIGTERM, then SIGKILL after `graceMs`. Returns { code, signal, forced }.
  async stop(graceMs = 20_000) {
    if (this.exit) return { ...this.exit, forced: false };
    this.child.kill('SIGTERM');
    let forced = false;
    let timer;
    const result = await Promise.race([
      this.exited,
      new Promise((resolve) => {
        timer = setTimeout(() => resolve(null), graceMs);
      }),
    ]);
    clearTimeout(timer);
    if (result === null) {
      forced = true;
      this.child.kill('SIGKILL');
      await this.exited;
    }
    return { ...this.exit, forced };
  }
}

// A fresh, empty data directory (the caller removes it).
// A TCP port nothing listens on now (for a server the test starts, or a refused connection).
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export function tempDataDir() {
  return mkdtempSync(path.join(os.tmpdir(), 'aoi-data-'));
}

// Starts `aoi serve` on an ephemeral port and waits for its ready line.
// opts: { apiKey, apiKeys: [], maxBodyBytes, maxSessions, ctxSize, args: [], dataDir, memoryOnly, model, port }
// (port: 0, the default, is an ephemeral one; a fixed one lets a restarted server keep its address)
// Every server keeps its sessions in a data directory: `dataDir` when given (kept: a restart finds it), else a
// fresh one removed when the server exits; `memoryOnly` for none.
export async function startServer(opts = {}) {
  if (!existsSync(AOI_BIN)) throw new Error(`aoi binary not found: ${AOI_BIN} (set AOI_BIN)`);
  const model = opts.model ?? AOI_MODEL;
  if (!existsSync(model)) throw new Error(`model not found: ${model} (set AOI_MODEL)`);
  // The context: the server's default (4096 cells per sequence) unless a test sizes it. Threads: as the unit
  // tests' (AOI_TEST_THREADS, see tests/support/test_models.h), else 2.
  const args = ['serve', '--model', model, '--host', '127.0.0.1', '--port', String(opts.port ?? 0),
    '--threads', String(opts.threads ?? (process.env.AOI_TEST_THREADS || 2))];
  if (opts.ctxSize != null) args.push('--ctx-size', String(opts.ctxSize));
  const keys = opts.apiKeys ?? (opts.apiKey ? [opts.apiKey] : []);
  for (const k of keys) args.push('--api-key', k);
  if (opts.maxBodyBytes != null) args.push('--max-body-bytes', String(opts.maxBodyBytes));
  if (opts.maxSessions != null) args.push('--max-sessions', String(opts.maxSessions));
  let ownDir = null;
  if (opts.memoryOnly) {
    args.push('--memory-only');
  } else {
    const dir = opts.dataDir ?? (ownDir = tempDataDir());
    args.push('--data-dir', dir);
  }
  if (opts.args) args.push(...opts.args);
  // Extra options for every server (e.g. AOI_SERVE_ARGS="--flash-attn on"), split on whitespace.
  if (process.env.AOI_SERVE_ARGS) args.push(...process.env.AOI_SERVE_ARGS.trim().split(/\s+/));

  const child = spawn(AOI_BIN, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  live.add(child);
  if (ownDir) child.once('exit', () => rmSync(ownDir, { recursive: true, force: true }));
  const output = { text: '' };
  const verbose = !!process.env.AOI_TEST_VERBOSE;
  const keep = (chunk) => {
    output.text += chunk.toString('utf8');
    if (output.text.length > 200_000) output.text = output.text.slice(-100_000);
    if (verbose) process.stderr.write(chunk);
  };

  let url;
  try {
    url = await new Promise((resolve, reject) => {
      let pending = '';
      const timer = setTimeout(() => reject(new Error(
        `aoi serve did not print its ready line within ${STARTUP_TIMEOUT_MS} ms\n${output.text}`)),
        STARTUP_TIMEOUT_MS);
      child.stdout.on('data', (chunk) => {
        keep(chunk);
        if (url) return;
        pending += chunk.toString('utf8');
        const m = /aoi: listening on (http:\/\/[^\s]+)/.exec(pending);
        if (m) {
          clearTimeout(timer);
          resolve(m[1].replace(/\/+$/, ''));
        }
      });
      child.stderr.on('data', keep);
      child.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`aoi serve exited before it was ready (code ${code}, signal ${signal})\n${output.text}`));
      });
    });
  } catch (err) {
    child.kill('SIGKILL');
    live.delete(child);
    if (ownDir) rmSync(ownDir, { recursive: true, force: true });
    throw err;
  }
  const server = new Server(child, url, output);
  server.apiKey = keys[0] ?? null;
  return server;
}

// Registers before/after hooks that start one server for the test file and stop it at the end. The after
// hook fails the file if the server died during the tests or did not stop cleanly on SIGTERM. `setup(server)`,
// if given, runs in the same before hook once the server is up (Node 20 runs several root-level before hooks
// concurrently, so a test file must not add a second one that needs the server).
// Returns a holder whose `.server` is set once started.
export function useServer(opts = {}, setup = null) {
  const holder = { server: null };
  before(async () => {
    holder.server = await startServer(opts);
    if (setup) await setup(holder.server);
  });
  // Sessions hold KV cells and slots (--max-sessions defaults to 8): each test deletes what it created, except
  // sessions whose id starts with "keep-" (shared by a file's tests, made in `setup`).
  afterEach(async () => {
    const s = holder.server;
    if (!s || !s.alive) return;
    await deleteSessions(s, (id) => !id.startsWith('keep-'));
  });
  after(async () => {
    const s = holder.server;
    if (!s) return;
    const wasAlive = s.alive;
    const res = await s.stop();
    assert.ok(wasAlive, `the server died during the tests (${JSON.stringify(s.exit)})\n${s.logs().slice(-4000)}`);
    assert.ok(!res.forced, `the server did not stop within 20 s of SIGTERM\n${s.logs().slice(-4000)}`);
    assert.equal(res.code, 0, `the server's exit status after SIGTERM is ${res.code} (signal ${res.signal})\n` +
      s.logs().slice(-4000));
  });
  return holder;
}

// Deletes every listed session for which keep(id) is false. Cleanup only: never fails a test.
export async function deleteSessions(server, pred = () => true) {
  try {
    const list = await get(server, '/v1/sessions');
    const ids = (list.body?.sessions ?? []).map((x) => x.id).filter(pred);
    await Promise.all(ids.map((id) => del(server, `/v1/sessions/${encodeURIComponent(id)}`).catch(() => null)));
  } catch {
    // the test itself reports a broken server
  }
}

// ---- HTTP ----------------------------------------------------------------------------------------------

// What the server was doing, for a request that got no answer: its queues, its sessions and its log.
async function serverState(server) {
  if (!server.alive) return `the server exited: ${JSON.stringify(server.exit)}\n${server.logs().slice(-4000)}`;
  const probe = async (p) => {
    try {
      const r = await fetch(server.url + p, {
        headers: server.apiKey ? { authorization: `Bearer ${server.apiKey}` } : {},
        signal: AbortSignal.timeout(5_000),
      });
      return await r.text();
    } catch (err) {
      return `(${p} failed: ${err.message})`;
    }
  };
  const metrics = (await probe('/metrics')).split('\n').filter((l) => /^aoi_(lanes|inference_passes|kv|sessions|http_requests)/.test(l));
  return `metrics:\n${metrics.join('\n')}\nsessions: ${await probe('/v1/sessions')}\n` +
    `log:\n${server.logs().slice(-3000)}`;
}

// One request. opts: { json, body (string|Buffer), headers, key (API key; false for none), timeout, signal }.
// Returns { status, headers, text, body } where body is the parsed JSON or undefined.
export async function http(server, method, urlPath, opts = {}) {
  const headers = { ...(opts.headers || {}) };
  let body = opts.body;
  if (opts.json !== undefined) {
    body = JSON.stringify(opts.json);
    if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
      headers['content-type'] = 'application/json';
    }
  }
  const key = opts.key === undefined ? server.apiKey : opts.key;
  if (key) headers.authorization = `Bearer ${key}`;
  let res;
  try {
    res = await fetch(server.url + urlPath, {
      method,
      headers,
      body,
      signal: opts.signal ?? AbortSignal.timeout(opts.timeout ?? REQUEST_TIMEOUT_MS),
    });
  } catch (err) {
    if (opts.signal || err?.name !== 'TimeoutError') throw err;
    throw new Error(`${method} ${urlPath} got no answer within ${opts.timeout ?? REQUEST_TIMEOUT_MS} ms\n` +
      await serverState(server));
  }
  const text = await res.text();
  let parsed;
  try {
    parsed = text.length ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, text, body: parsed };
}

export const get = (s, p, o) => http(s, 'GET', p, o);
export const post = (s, p, json, o = {}) => http(s, 'POST', p, { ...o, json });
export const del = (s, p, o) => http(s, 'DELETE', p, o);

function describe(res) {
  return `HTTP ${res.status}: ${res.text.slice(0, 500)}`;
}

// Asserts a status code, with the body in the message.
export function expectStatus(res, status) {
  assert.equal(res.status, status, `expected HTTP ${status}, got ${describe(res)}`);
}

// Asserts the error contract: the status, a JSON body {"error": {"type", "message", "field"?}}, the type and,
// when given, the field (a string, a RegExp, or a predicate).
export function expectError(res, status, type, field) {
  expectStatus(res, status);
  const ct = res.headers.get('content-type') || '';
  assert.match(ct, /application\/json/, `error content-type is "${ct}" (${describe(res)})`);
  assertErrorObject(res.body, type, field, describe(res));
}

// The data of an SSE `error` event: docs/api.md shows the inner object ({"type", "message", "field"?}) in the
// events list and says "the same object" as the error body ({"error": {...}}) under Errors; accept both.
export function sseErrorBody(json) {
  return json && typeof json === 'object' && json.error && typeof json.error === 'object' ? json : { error: json };
}

export function assertErrorObject(obj, type, field, context = JSON.stringify(obj)) {
  assert.ok(obj && typeof obj === 'object' && obj.error && typeof obj.error === 'object',
    `not an error body: ${context}`);
  assert.equal(typeof obj.error.type, 'string', `error.type missing: ${context}`);
  assert.equal(typeof obj.error.message, 'string', `error.message missing: ${context}`);
  if (type) assert.equal(obj.error.type, type, `error type: ${context}`);
  if (field !== undefined) {
    const f = obj.error.field;
    if (field instanceof RegExp) assert.match(String(f), field, `error.field: ${context}`);
    else if (typeof field === 'function') assert.ok(field(f), `error.field: ${context}`);
    else assert.equal(f, field, `error.field: ${context}`);
  }
}

// Runs check(item) for every item and fails once at the end listing every item whose check threw, so that a
// table of cases reports all its mismatches at once.
export async function checkEach(items, check, describeItem = (x) => JSON.stringify(x)) {
  const failures = [];
  for (const item of items) {
    try {
      await check(item);
    } catch (err) {
      failures.push(`${describeItem(item)}: ${String(err.message).split('\n')[0]}`);
    }
  }
  assert.deepEqual(failures, [], `${failures.length} of ${items.length} cases failed:\n${failures.join('\n')}`);
}

// The server still serves: a cheap request that must succeed.
export async function expectAlive(server) {
  assert.ok(server.alive, `the server exited: ${JSON.stringify(server.exit)}\n${server.logs().slice(-4000)}`);
  const res = await get(server, '/health');
  expectStatus(res, 200);
  assert.equal(res.body?.status, 'ok');
  const list = await get(server, '/v1/sessions');
  expectStatus(list, 200);
  assert.ok(Array.isArray(list.body?.sessions));
}

// ---- sessions and data ---------------------------------------------------------------------------------

let idCounter = 0;
export function uniqueId(prefix = 's') {
  idCounter += 1;
  return `${prefix}-${process.pid}-${idCounter}`;
}

// Sessions made by the tests are small unless a test says otherwise: a session reserves KV cells for its whole
// window plus its query budget, and the test server has only 8192 cells for everything.
export const SMALL_SESSION = { retention: { max_tokens: 512 }, query_budget: 128 };

export async function createSession(server, body = {}) {
  const retention = { ...SMALL_SESSION.retention, ...(body.retention ?? {}) };
  const res = await post(server, '/v1/sessions', { id: uniqueId(), ...SMALL_SESSION, ...body, retention });
  expectStatus(res, 201);
  return res.body;
}

export async function getSession(server, id) {
  const res = await get(server, `/v1/sessions/${encodeURIComponent(id)}`);
  expectStatus(res, 200);
  return res.body;
}

export async function pushRecords(server, id, records) {
  const res = await post(server, `/v1/sessions/${encodeURIComponent(id)}/data`, { records });
  expectStatus(res, 202);
  return res.body;
}

export async function query(server, id, body) {
  const res = await post(server, `/v1/sessions/${encodeURIComponent(id)}/query`, body);
  expectStatus(res, 200);
  return res.body;
}

// Polls GET /v1/sessions/{id} until last_seq_ingested >= seq (and, by default, nothing is pending).
export async function waitIngested(server, id, seq, { timeout = WAIT_TIMEOUT_MS, idle = true } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    last = await getSession(server, id);
    if (last.last_seq_ingested >= seq && (!idle || last.pending === 0)) return last;
    if (Date.now() > deadline) {
      throw new Error(`session ${id}: last_seq_ingested did not reach ${seq} within ${timeout} ms: ` +
        JSON.stringify(last));
    }
    await sleep(25);
  }
}

// Polls until pred(session) is true.
export async function waitSession(server, id, pred, what, timeout = WAIT_TIMEOUT_MS) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    last = await getSession(server, id);
    if (pred(last)) return last;
    if (Date.now() > deadline) throw new Error(`session ${id}: ${what} within ${timeout} ms: ${JSON.stringify(last)}`);
    await sleep(25);
  }
}

// A few OHLCV-like text records.
export function textRecords(n, start = 0) {
  const out = [];
  for (let i = start; i < start + n; i++) {
    const p = (100 + i * 0.25).toFixed(2);
    out.push(`2024-01-02 10:${String(i % 60).padStart(2, '0')},O=${p},H=${p},L=${p},C=${p},V=${1000 + i}`);
  }
  return out;
}

export function barRecords(n, start = 0) {
  const out = [];
  for (let i = start; i < start + n; i++) {
    out.push({ t: `2024-01-02 10:${String(i % 60).padStart(2, '0')}`, o: 100 + i, h: 101 + i, l: 99 + i, c: 100.5 + i,
      v: 1000 + i });
  }
  return out;
}

export const BAR_TEMPLATE = '{t} O={o} H={h} L={l} C={c} V={v}';

// ---- server-sent events --------------------------------------------------------------------------------

// Reads an SSE stream from a fetch Response per the WHATWG parsing rules. Events: { event, data, id, json }.
export class SSEReader {
  constructor(response, controller) {
    this.response = response;
    this.controller = controller;
    this.queue = [];
    this.waiters = [];
    this.ended = false;
    this.error = null;
    this.comments = [];
    this.lastEventId = '';
    this.pump();
  }

  async pump() {
    const decoder = new TextDecoder('utf-8');
    let buf = '';
    let data = [];
    let event = '';
    let id = null;
    const dispatch = () => {
      if (id !== null) this.lastEventId = id;
      if (data.length === 0) {
        event = '';
        id = null;
        return;
      }
      const ev = { event: event || 'message', data: data.join('\n'), id: id ?? this.lastEventId };
      try {
        ev.json = JSON.parse(ev.data);
      } catch {
        ev.json = undefined;
      }
      data = [];
      event = '';
      id = null;
      this.push(ev);
    };
    const line = (l) => {
      if (l === '') return dispatch();
      if (l.startsWith(':')) {
        this.comments.push(l.slice(1).trim());
        return;
      }
      const i = l.indexOf(':');
      const field = i < 0 ? l : l.slice(0, i);
      let value = i < 0 ? '' : l.slice(i + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
      else if (field === 'id') {
        if (!value.includes('\0')) id = value;
      }
    };
    try {
      for await (const chunk of this.response.body) {
        buf += decoder.decode(chunk, { stream: true });
        for (;;) {
          const m = /\r\n|\n|\r/.exec(buf);
          if (!m) break;
          // A lone \r at the very end may be the first half of \r\n: wait for more.
          if (m[0] === '\r' && m.index === buf.length - 1) break;
          line(buf.slice(0, m.index));
          buf = buf.slice(m.index + m[0].length);
        }
      }
    } catch (err) {
      if (err?.name !== 'AbortError') this.error = err;
    }
    this.ended = true;
    this.flushWaiters();
  }

  push(ev) {
    this.queue.push(ev);
    this.flushWaiters();
  }

  flushWaiters() {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  // The next event, or null if the stream ended. Rejects after `timeout` ms.
  async next(timeout = WAIT_TIMEOUT_MS) {
    const deadline = Date.now() + timeout;
    while (this.queue.length === 0 && !this.ended) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no SSE event within ${timeout} ms`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    if (this.queue.length) return this.queue.shift();
    return null;
  }

  // Skips events until pred(ev) is true; returns the matching event (the skipped ones in `skipped`).
  async waitFor(pred, what = 'a matching SSE event', timeout = WAIT_TIMEOUT_MS) {
    const deadline = Date.now() + timeout;
    const skipped = [];
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${what} within ${timeout} ms; saw ${JSON.stringify(skipped).slice(0, 2000)}`);
      let ev;
      try {
        ev = await this.next(left);
      } catch {
        throw new Error(`no ${what} within ${timeout} ms; saw ${JSON.stringify(skipped).slice(0, 2000)}`);
      }
      if (ev === null) throw new Error(`SSE stream ended before ${what}; saw ${JSON.stringify(skipped).slice(0, 2000)}`);
      if (pred(ev)) {
        ev.skipped = skipped;
        return ev;
      }
      skipped.push(ev);
    }
  }

  // Reads every event until the stream ends.
  async all(timeout = WAIT_TIMEOUT_MS) {
    const out = [];
    for (;;) {
      const ev = await this.next(timeout);
      if (ev === null) return out;
      out.push(ev);
    }
  }

  close() {
    try {
      this.controller.abort();
    } catch {
      // already closed
    }
  }
}

// Opens an SSE stream (GET by default, or POST with a JSON body). Resolves once the response headers are in.
// Returns { status, headers, reader } ; reader is null when the status is not 200.
export async function openSSE(server, urlPath, { method = 'GET', json, headers = {}, key, timeout = 60_000 } = {}) {
  const controller = new AbortController();
  const h = { accept: 'text/event-stream', ...headers };
  const k = key === undefined ? server.apiKey : key;
  if (k) h.authorization = `Bearer ${k}`;
  let body;
  if (json !== undefined) {
    body = JSON.stringify(json);
    h['content-type'] = 'application/json';
  }
  const timer = setTimeout(() => controller.abort(), timeout);
  let res;
  try {
    res = await fetch(server.url + urlPath, { method, headers: h, body, signal: controller.signal });
  } catch (err) {
    throw new Error(`SSE request ${method} ${urlPath} failed (no response headers within ${timeout} ms?): ${err}`);
  } finally {
    clearTimeout(timer);
  }
  if (res.status !== 200) {
    const text = await res.text();
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, text, body: parsed, reader: null };
  }
  return { status: res.status, headers: res.headers, reader: new SSEReader(res, controller) };
}

// The outcome of a WebSocket handshake on `urlPath` with `key` (none when false): 'open', or the HTTP status
// of the refusal.
export async function webSocketStatus(server, urlPath, key) {
  const { default: WebSocket } = await import('ws');
  const headers = key ? { authorization: `Bearer ${key}` } : {};
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://${server.host}:${server.port}${urlPath}`, { headers });
    ws.on('unexpected-response', (req, res) => {
      resolve(res.statusCode);
      req.destroy();
    });
    ws.on('open', () => {
      resolve('open');
      ws.close();
    });
    ws.on('error', () => resolve('error'));
  });
}

// ---- raw sockets ---------------------------------------------------------------------------------------

// Opens a TCP connection to the server.
export function connectRaw(server) {
  return new Promise((resolve, reject) => {
    const sock = net.connect({ host: server.host, port: server.port });
    sock.once('connect', () => {
      sock.off('error', reject);
      // Errors after a peer closes (EPIPE, ECONNRESET) are expected in these tests: readRaw reports them.
      sock.on('error', () => {});
      resolve(sock);
    });
    sock.once('error', reject);
  });
}

// Collects everything a socket sends until it closes or `until(text)` is true.
export function readRaw(sock, { until, timeout = 30_000 } = {}) {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0);
    const done = (fn, v) => {
      clearTimeout(timer);
      sock.off('data', onData);
      sock.off('end', onEnd);
      sock.off('close', onEnd);
      sock.off('error', onErr);
      fn(v);
    };
    const onData = (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      if (until && until(buf.toString('latin1'))) done(resolve, buf.toString('latin1'));
    };
    const onEnd = () => done(resolve, buf.toString('latin1'));
    const onErr = (err) => {
      // EPIPE: our write failed because the server closed its side; its answer may still be arriving.
      if (err.code === 'EPIPE') return;
      if (err.code === 'ECONNRESET') done(resolve, buf.toString('latin1'));
      else done(reject, err);
    };
    const timer = setTimeout(() => done(reject, new Error(`raw read timed out; got ${JSON.stringify(buf.toString('latin1'))}`)), timeout);
    sock.on('data', onData);
    sock.once('end', onEnd);
    sock.once('close', onEnd);
    sock.on('error', onErr);
  });
}

// True once `text` holds a complete HTTP/1.1 response (headers and a Content-Length or chunked body).
export function completeResponse(text) {
  const h = text.indexOf('\r\n\r\n');
  if (h < 0) return false;
  const head = text.slice(0, h);
  const body = text.slice(h + 4);
  const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
  if (cl) return Buffer.byteLength(body, 'latin1') >= Number(cl[1]);
  if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) return /(^|\r\n)0\r\n\r\n$/.test(body);
  return false;
}

// Parses one raw HTTP response (status and headers; body as text).
export function parseRawResponse(text) {
  const h = text.indexOf('\r\n\r\n');
  const head = h < 0 ? text : text.slice(0, h);
  const lines = head.split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] || '');
  const headers = {};
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
  }
  return { status: m ? Number(m[1]) : null, headers, body: h < 0 ? '' : text.slice(h + 4) };
}

// ---- shapes --------------------------------------------------------------------------------------------

export const isInt = (v) => Number.isInteger(v);
export const isNonNegInt = (v) => Number.isInteger(v) && v >= 0;

export function assertNonNegInt(v, name) {
  assert.ok(isNonNegInt(v), `${name} should be a non-negative integer, got ${JSON.stringify(v)}`);
}

export function assertNumber(v, name) {
  assert.ok(typeof v === 'number' && Number.isFinite(v), `${name} should be a finite number, got ${JSON.stringify(v)}`);
}

// The query answer object (POST /query, the SSE `done` event, the WebSocket `answer` frame).
export function assertAnswerShape(a, { maxTokens } = {}) {
  const ctx = JSON.stringify(a);
  assert.equal(typeof a.answer, 'string', `answer: ${ctx}`);
  assert.ok(['flash', 'speculative', 'standard'].includes(a.path), `path: ${ctx}`);
  assertNonNegInt(a.data_version, 'data_version');
  assert.ok(a.tokens && typeof a.tokens === 'object', `tokens: ${ctx}`);
  assertNonNegInt(a.tokens.question, 'tokens.question');
  assertNonNegInt(a.tokens.answer, 'tokens.answer');
  if (a.path === 'standard') assert.ok(a.tokens.question > 0, `a standard query decodes its question: ${ctx}`);
  if (maxTokens != null) assert.ok(a.tokens.answer <= maxTokens, `tokens.answer > max_tokens ${maxTokens}: ${ctx}`);
  assert.ok(['stop', 'length'].includes(a.finish_reason), `finish_reason: ${ctx}`);
  if (a.logit_gap !== null) assertNumber(a.logit_gap, 'logit_gap');
  assert.ok(a.timings && typeof a.timings === 'object', `timings: ${ctx}`);
  for (const k of ['queue_ms', 'prompt_ms', 'generate_ms', 'total_ms']) {
    assertNumber(a.timings[k], `timings.${k}`);
    assert.ok(a.timings[k] >= 0, `timings.${k} negative: ${ctx}`);
  }
}

// The session object (GET /v1/sessions/{id}, POST /v1/sessions, each entry of GET /v1/sessions).
export function assertSessionShape(s) {
  const ctx = JSON.stringify(s);
  assert.equal(typeof s.id, 'string', `id: ${ctx}`);
  assert.equal(typeof s.tenant, 'string', `tenant: ${ctx}`);
  assert.ok(s.id.length > 0, `id empty: ${ctx}`);
  assert.ok(['stateful', 'naive'].includes(s.mode), `mode: ${ctx}`);
  assert.ok(['recompute', 'shift'].includes(s.eviction), `eviction: ${ctx}`);
  assertNonNegInt(s.data_version, 'data_version');
  assert.ok(s.regions && typeof s.regions === 'object', `regions: ${ctx}`);
  for (const k of ['system_tokens', 'data_tokens', 'scaffold_tokens', 'records']) assertNonNegInt(s.regions[k], `regions.${k}`);
  assert.ok(s.retention && typeof s.retention === 'object', `retention: ${ctx}`);
  for (const k of ['max_tokens', 'max_records']) {
    assert.ok(k in s.retention, `retention.${k} missing: ${ctx}`);
    assert.ok(s.retention[k] === null || (isInt(s.retention[k]) && s.retention[k] > 0),
      `retention.${k} should be null or a positive integer: ${ctx}`);
  }
  assertNumber(s.retention.evict_fraction, 'retention.evict_fraction');
  assert.ok(s.retention.evict_fraction >= 0 && s.retention.evict_fraction < 1, `evict_fraction: ${ctx}`);
  assertNonNegInt(s.last_seq_pushed, 'last_seq_pushed');
  assertNonNegInt(s.last_seq_ingested, 'last_seq_ingested');
  assert.ok(s.last_seq_ingested <= s.last_seq_pushed, `last_seq_ingested > last_seq_pushed: ${ctx}`);
  assertNonNegInt(s.pending, 'pending');
  assert.ok(s.records && typeof s.records === 'object', `records: ${ctx}`);
  for (const k of ['pushed', 'ingested', 'dropped', 'rejected', 'evicted']) assertNonNegInt(s.records[k], `records.${k}`);
  assertNonNegInt(s.tokens_ingested, 'tokens_ingested');
  assert.ok(s.kv && typeof s.kv === 'object', `kv: ${ctx}`);
  for (const k of ['cells_used', 'cells_reserved', 'bytes']) assertNonNegInt(s.kv[k], `kv.${k}`);
  assertNonNegInt(s.query_budget, 'query_budget');
  assert.ok(Array.isArray(s.flash), `flash: ${ctx}`);
  assertNumber(s.created, 'created');
  const now = Date.now() / 1000;
  assert.ok(s.created > now - 86400 && s.created < now + 86400, `created is not Unix seconds near now: ${ctx}`);
}
