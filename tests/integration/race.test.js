// Races: clients sending every session operation at random to a few ids at once, as a hostile or merely busy
// client would. The server must not crash, must answer each operation with a well-defined status (404 for a
// session that is gone, 409 for a conflicting create, 503 with Retry-After for a session busy moving, never
// another 5xx), and must account for every record it acknowledged: each is ingested or counted as dropped.
//
// Run against the release, AddressSanitizer and ThreadSanitizer builds (label "threads"), with a data
// directory (sessions move to disk: --max-sessions is below the number of ids) and with --memory-only.
// AOI_RACE_SECONDS sets how long each server is hammered at least (default 20); it goes on, up to three times
// that, until every path the test is for was taken (a slow sanitizer build takes fewer operations a second).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  startServer, http, get, post, del, expectAlive, sleep, textRecords, openSSE, WAIT_TIMEOUT_MS,
} from './harness.js';

const SECONDS = Number(process.env.AOI_RACE_SECONDS || 20);
const CLIENTS = 8;
const IDS = ['r0', 'r1', 'r2'];
const QUESTIONS = ['Is the trend up?', 'What was the last close?', 'Any gap?'];

const pick = (xs) => xs[Math.floor(Math.random() * xs.length)];

// The statuses each operation may answer besides success. 404: the session is gone (or not yet created);
// 409: a create or import of an id that exists, an unload of a session at work; 503 (with Retry-After): the
// session is busy moving between the cache and the disk, or no room could be made for it in time.
const GONE = [404];
const MOVING = [503];
const ALLOWED = {
  create: [201, 409],
  import: [201, 409],
  push: [202, ...GONE, ...MOVING],
  ask: [200, ...GONE, ...MOVING],
  'flash add': [201, 409, ...GONE, ...MOVING],
  'flash delete': [200, ...GONE],
  'flash list': [200, ...GONE],
  get: [200, ...GONE],
  list: [200],
  records: [200, ...GONE, ...MOVING],
  context: [200, ...GONE, ...MOVING],
  export: [200, ...GONE, ...MOVING],
  save: [200, ...GONE, ...MOVING],
  unload: [200, 409, ...GONE, ...MOVING],
  load: [200, ...GONE, ...MOVING],
  delete: [200, ...GONE],
  events: [200, ...GONE],
};

// The answers that show the race reached what it is for: sessions made, fed, asked and deleted, and with a
// data directory moved to disk and back.
const required = (durable) => ['create 201', 'push 202', 'delete 200', 'ask 200',
  ...(durable ? ['unload 200', 'load 200'] : [])];

async function hammer(server, { durable }) {
  const tally = { accepted: 0, imported: 0, byOp: {}, wrong: [] };
  const exported = new Map(); // id -> { bytes, lastSeq }
  const start = Date.now();
  const covered = () => required(durable).every((key) => tally.byOp[key] > 0);
  const going = () => server.alive && Date.now() < start + 3 * SECONDS * 1000 &&
    (Date.now() < start + SECONDS * 1000 || !covered());

  const record = (op, res, extra = '') => {
    const key = `${op} ${res.status}`;
    tally.byOp[key] = (tally.byOp[key] ?? 0) + 1;
    let allowed = ALLOWED[op].includes(res.status);
    // Without a data directory, saving and moving to disk are refused as such, naming the flag.
    if (!durable && ['save', 'unload'].includes(op) && res.status === 422) allowed = res.body?.error?.field === 'data_dir';
    if (!allowed) {
      tally.wrong.push(`${op}${extra}: HTTP ${res.status} ${res.text.slice(0, 300)}`);
      return;
    }
    if (res.status >= 400) {
      // The error contract holds for every refusal.
      const e = res.body?.error;
      if (!e || typeof e.type !== 'string' || typeof e.message !== 'string') {
        tally.wrong.push(`${op}: HTTP ${res.status} without an error body: ${res.text.slice(0, 200)}`);
      }
      if (res.status === 503 && !res.headers.get('retry-after')) {
        tally.wrong.push(`${op}: HTTP 503 without Retry-After: ${res.text.slice(0, 200)}`);
      }
    }
  };

  const ops = {
    async create(id) {
      const res = await post(server, '/v1/sessions', {
        id, system: `Session ${id} watches a feed.`, retention: { max_tokens: 192 }, query_budget: 48,
      });
      record('create', res);
    },
    async import(id) {
      const snap = exported.get(pick(IDS));
      if (!snap) return;
      const res = await http(server, 'POST', `/v1/sessions?id=${id}`, {
        body: snap.bytes, headers: { 'content-type': 'application/octet-stream' },
      });
      record('import', res);
      if (res.status === 201) tally.imported += snap.lastSeq;
    },
    async push(id) {
      const n = 1 + Math.floor(Math.random() * 6);
      const res = await post(server, `/v1/sessions/${id}/data`, { records: textRecords(n, Math.floor(Math.random() * 1000)) });
      record('push', res);
      if (res.status === 202) tally.accepted += res.body.accepted;
    },
    async ask(id) {
      record('ask', await post(server, `/v1/sessions/${id}/query`, { question: pick(QUESTIONS), max_tokens: 3 }));
    },
    async 'flash add'(id) {
      record('flash add', await post(server, `/v1/sessions/${id}/flash`, { question: pick(QUESTIONS), max_tokens: 2 }));
    },
    async 'flash delete'(id) {
      record('flash delete', await del(server, `/v1/sessions/${id}/flash/f${1 + Math.floor(Math.random() * 4)}`));
    },
    async 'flash list'(id) { record('flash list', await get(server, `/v1/sessions/${id}/flash`)); },
    async get(id) { record('get', await get(server, `/v1/sessions/${id}`)); },
    async list() { record('list', await get(server, '/v1/sessions')); },
    async records(id) { record('records', await get(server, `/v1/sessions/${id}/records?last=4`)); },
    async context(id) { record('context', await get(server, `/v1/sessions/${id}/context?question=Why%3F`)); },
    async export(id) {
      const res = await fetch(`${server.url}/v1/sessions/${id}/snapshot`, { signal: AbortSignal.timeout(WAIT_TIMEOUT_MS) });
      const bytes = Buffer.from(await res.arrayBuffer());
      let body;
      try {
        body = res.status === 200 ? undefined : JSON.parse(bytes.toString('utf8'));
      } catch {
        body = undefined;
      }
      record('export', { status: res.status, headers: res.headers, text: res.status === 200 ? '' : bytes.toString('utf8'), body });
      if (res.status === 200) exported.set(id, { bytes, lastSeq: Number(res.headers.get('x-aoi-last-seq')) });
    },
    async save(id) { record('save', await post(server, `/v1/sessions/${id}/save`, {})); },
    async unload(id) { record('unload', await post(server, `/v1/sessions/${id}/unload`, {})); },
    async load(id) { record('load', await post(server, `/v1/sessions/${id}/load`, {})); },
    async delete(id) { record('delete', await del(server, `/v1/sessions/${id}`)); },
    async events(id) {
      const res = await openSSE(server, `/v1/sessions/${id}/events`);
      record('events', { text: '', ...res });
      if (res.reader) {
        await sleep(50 + Math.random() * 300);
        res.reader.close();
      }
    },
  };
  // Creates and pushes more often than the rest, so that sessions exist and hold data most of the time.
  const weighted = [
    'create', 'create', 'create', 'push', 'push', 'push', 'push', 'ask', 'ask', 'flash add', 'flash delete',
    'flash list', 'get', 'list', 'records', 'context', 'export', 'import', 'save', 'unload', 'unload', 'load',
    'delete', 'delete', 'events',
  ];

  const client = async () => {
    while (going()) {
      const op = pick(weighted);
      try {
        await ops[op](pick(IDS));
      } catch (err) {
        tally.wrong.push(`${op}: ${String(err.message).slice(0, 4000)}`);
      }
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
  return tally;
}

// Prometheus text: the value of an unlabelled sample.
function metric(text, name) {
  const m = new RegExp(`^${name} ([0-9.e+]+)$`, 'm').exec(text);
  assert.ok(m, `metric ${name} missing`);
  return Number(m[1]);
}

async function checkAccounting(server, tally) {
  // Every session that survives: what was pushed is ingested, dropped or rejected once it settles.
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  for (;;) {
    const list = await get(server, '/v1/sessions');
    assert.equal(list.status, 200);
    const open = list.body.sessions.filter((s) => s.pending !== 0 ||
      s.records.pushed !== s.records.ingested + s.records.dropped + s.records.rejected);
    if (open.length === 0) break;
    if (Date.now() > deadline) {
      assert.fail(`records unaccounted for after ${WAIT_TIMEOUT_MS} ms: ${JSON.stringify(open.map((s) => [s.id, s.records, s.pending]))}`);
    }
    // A session on disk comes back for its records; asking it makes sure.
    for (const s of open) await post(server, `/v1/sessions/${s.id}/load`, {});
    await sleep(100);
  }
  // And over every session there was, deleted ones included: the server counted exactly the records it
  // acknowledged (plus those imported sessions brought), and accounted for each.
  const text = (await get(server, '/metrics')).text;
  const pushed = metric(text, 'aoi_records_pushed_total');
  assert.equal(pushed, tally.accepted + tally.imported,
    `the server counts ${pushed} records pushed; it acknowledged ${tally.accepted} and imports brought ${tally.imported}`);
  const done = metric(text, 'aoi_records_ingested_total') + metric(text, 'aoi_records_dropped_total') +
    metric(text, 'aoi_records_rejected_total');
  assert.equal(done, pushed, 'every record pushed is ingested, dropped or rejected');
}

for (const durable of [true, false]) {
  const name = durable ? 'with a data directory (sessions move to disk)' : 'in memory only';
  test(`every operation raced on a few ids, ${name}: no crash, only well-defined statuses, no record lost`, async () => {
    // Fewer resident sessions than ids with a data directory: creating, loading and asking move others to disk.
    const server = await startServer(durable ? { maxSessions: 2 } : { memoryOnly: true, maxSessions: IDS.length });
    try {
      const tally = await hammer(server, { durable });
      console.log(`${name}: ${JSON.stringify(tally.byOp)}`);
      assert.ok(server.alive, `the server died: ${JSON.stringify(server.exit)}\n${server.logs().slice(-6000)}`);
      assert.deepEqual(tally.wrong.slice(0, 20), [], `${tally.wrong.length} answers outside the contract`);
      // The race reached the paths it is for.
      for (const key of required(durable)) {
        assert.ok(tally.byOp[key] > 0, `no "${key}" in ${3 * SECONDS} s: ${JSON.stringify(tally.byOp)}`);
      }
      await expectAlive(server);
      await checkAccounting(server, tally);
    } finally {
      const wasAlive = server.alive;
      const res = await server.stop();
      assert.ok(wasAlive, `the server died (${JSON.stringify(server.exit)})\n${server.logs().slice(-6000)}`);
      assert.equal(res.code, 0, `exit status ${res.code} (signal ${res.signal}) after SIGTERM\n${server.logs().slice(-6000)}`);
    }
  });
}
