// Cluster mode (aoi serve --cluster): three aoi replicas on a three-node NATS JetStream cluster (Debian's
// nats-server, started here on loopback, every stream and bucket in three copies), against a single aoi
// server fed the same records as the reference. Any replica creates, takes pushes and answers; kill -9 of the
// replica holding a session, ten times at random moments, loses no acknowledged record, ingests none twice,
// and leaves answers equal to the reference's; a session's events go on past a move (Last-Event-ID resumes,
// no id is seen twice; a hand-over says session_moved); a replica frozen past its lease drops its copy when it
// wakes; kill -9 of a NATS node mid-stream loses nothing acknowledged; the dashboard shows the whole cluster.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  startServer, get, post, expectStatus, sleep, uniqueId, freePort, repoRoot, openSSE, AOI_BIN, WAIT_TIMEOUT_MS,
} from './harness.js';
import { NATS_SERVER } from './brokers.js';
import puppeteer from 'puppeteer-core';
import WebSocket from 'ws';

const LEASE_TTL_MS = 1500;
const SESSION = { system: 'Records follow.', query_budget: 32, retention: { max_tokens: 3000 } };

let dir = null;
let nats = null;     // { nodes: [{ port, clusterPort, conf, child }], url }
let replicas = [];   // [{ id, port, server }]
let reference = null;
let proxy = null;    // HAProxy with deploy/haproxy: { child, url }
const HAPROXY = process.env.AOI_HAPROXY || '/usr/sbin/haproxy';
const CHROMIUM = process.env.AOI_CHROMIUM || '/usr/bin/chromium';
let browser = null;

function portAnswers(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => { s.destroy(); resolve(true); });
    s.once('error', () => resolve(false));
  });
}

async function startNode(node) {
  node.child = spawn(NATS_SERVER, ['-c', node.conf], { stdio: 'ignore' });
  const deadline = Date.now() + 20_000;
  while (!(await portAnswers(node.port))) {
    assert.equal(node.child.exitCode, null, `nats-server ${node.conf} exited with status ${node.child.exitCode}`);
    assert.ok(Date.now() < deadline, 'nats-server took no connection within 20 s');
    await sleep(50);
  }
}

async function killNode(node) {
  node.child.kill('SIGKILL');
  await new Promise((resolve) => (node.child.exitCode !== null || node.child.signalCode ? resolve() : node.child.once('exit', resolve)));
}

async function startNatsCluster(n) {
  assert.ok(spawnSync(NATS_SERVER, ['--version']).status === 0,
    `${NATS_SERVER} is missing: Debian's nats-server is needed (scripts/setup.sh --tests)`);
  const nodes = [];
  for (let i = 0; i < n; i++) nodes.push({ port: await freePort(), clusterPort: await freePort() });
  nodes.forEach((node, i) => {
    const home = path.join(dir, `nats-${i + 1}`);
    mkdirSync(home, { recursive: true });
    node.conf = path.join(home, 'nats.conf');
    const routes = nodes.filter((o) => o !== node).map((o) => `nats-route://127.0.0.1:${o.clusterPort}`);
    writeFileSync(node.conf, [`server_name: n${i + 1}`, `listen: 127.0.0.1:${node.port}`,
      `jetstream { store_dir: "${home}/js" }`,
      `cluster { name: aoi-test, listen: 127.0.0.1:${node.clusterPort}, routes: [${routes.join(', ')}] }`, ''].join('\n'));
  });
  for (const node of nodes) await startNode(node);
  return { nodes, url: 'nats://' + nodes.map((node) => `127.0.0.1:${node.port}`).join(',') };
}

// A replica keeps its port across restarts: HAProxy's configuration names it.
async function startReplica(id, port) {
  const server = await startServer({ memoryOnly: true, port, args: ['--cluster', nats.url, '--replica-id', id,
    '--lease-ttl-ms', String(LEASE_TTL_MS), '--cluster-copies', '3', '--shared-dir', path.join(dir, 'shared'),
    '--cluster-snapshot-interval', '1', '--max-sessions', '16'] });
  return { id, port, server };
}

// deploy/haproxy as shipped, its addresses from the environment; resolves once it answers.
async function startProxy() {
  assert.ok(spawnSync(HAPROXY, ['-v']).status === 0,
    `${HAPROXY} is missing: Debian's haproxy is needed (scripts/setup.sh --tests)`);
  const port = await freePort();
  const env = { ...process.env, AOI_FRONTEND: `127.0.0.1:${port}`,
    AOI_ROUTE_LUA: path.join(repoRoot, 'deploy', 'haproxy', 'aoi-route.lua') };
  replicas.forEach((r, i) => { env[`AOI_REPLICA_${i + 1}`] = `127.0.0.1:${r.port}`; });
  const child = spawn(HAPROXY, ['-db', '-f', path.join(repoRoot, 'deploy', 'haproxy', 'haproxy.cfg')],
    { env, stdio: 'ignore' });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    assert.equal(child.exitCode, null, `haproxy exited with status ${child.exitCode}`);
    try {
      if ((await fetch(`${url}/health`)).status === 200) break;
    } catch { /* not yet */ }
    assert.ok(Date.now() < deadline, 'haproxy did not answer within 20 s');
    await sleep(100);
  }
  return { child, url };
}

const live = () => replicas.filter((r) => r.server.alive);
const pick = () => { const l = live(); return l[Math.floor(Math.random() * l.length)]; };

// Asks until an answer other than a 503 (a session moving between replicas) or a hang comes, for 60 s at most.
async function ask(fn, what) {
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  for (;;) {
    let res = null;
    try {
      res = await fn();
    } catch (e) {
      res = { status: 0, text: String(e) };
    }
    if (res.status !== 503 && res.status !== 0) return res;
    assert.ok(Date.now() < deadline, `${what}: still ${res.status} after ${WAIT_TIMEOUT_MS} ms: ${res.text}`);
    await sleep(100);
  }
}

// Pushes through a random live replica, again with the same Idempotency-Key until acknowledged: JetStream holds
// each record once however often it is sent.
async function pushOnce(id, records) {
  const key = uniqueId('push');
  let attempts = 0;
  for (;;) {
    const r = pick();
    let res;
    try {
      res = await post(r.server, `/v1/sessions/${id}/data`, { records }, { headers: { 'idempotency-key': key }, timeout: 5000 });
    } catch (e) {
      res = { status: 0, text: String(e) };
    }
    if (res.status === 202) return { ...res.body, attempts: ++attempts };
    attempts++;
    assert.ok([0, 503].includes(res.status), `push: ${res.status} ${res.text}`);
    await sleep(50);
  }
}

// A 503 (Retry-After) is what a creation gets while the NATS cluster is busy electing: asked again.
async function create(id) {
  const res = await ask(() => post(pick().server, '/v1/sessions', { id, ...SESSION }, { timeout: 10_000 }), 'a creation');
  expectStatus(res, 201);
  return res.body;
}

async function holder(id) {
  const res = await ask(() => get(pick().server, `/v1/sessions/${id}`, { timeout: 3000 }), 'the session');
  expectStatus(res, 200);
  return res.body.replica;
}

async function answer(server, id, minSeq) {
  const res = await ask(() => post(server, `/v1/sessions/${id}/query`,
    { question: 'What came last?', max_tokens: 8, min_seq: minSeq }, { timeout: 20_000 }), 'a question');
  expectStatus(res, 200);
  return res.body.answer;
}

async function heldRecords(server, id) {
  const res = await ask(() => get(server, `/v1/sessions/${id}/context`, { timeout: 5000 }), 'the context');
  expectStatus(res, 200);
  return [...res.body.text.matchAll(/rec-\d+/g)].map((m) => m[0]);
}

async function metric(server, name) {
  const text = (await get(server, '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  assert.ok(line, `${name} in /metrics`);
  return Number(line.split(' ').at(-1));
}

// The reference: the same session on a single server, fed the records in the stream's order.
async function referenceAnswer(records) {
  const id = uniqueId('ref');
  expectStatus(await post(reference, '/v1/sessions', { id, ...SESSION }), 201);
  for (let i = 0; i < records.length; i += 50) {
    expectStatus(await post(reference, `/v1/sessions/${id}/data`, { records: records.slice(i, i + 50) }), 202);
  }
  return answer(reference, id, records.length);
}

// The session's events through `server`, resuming after `lastEventId` when given; asked again while the session
// is moving (503).
async function subscribe(server, id, lastEventId = null) {
  const headers = lastEventId === null ? {} : { 'last-event-id': String(lastEventId) };
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  for (;;) {
    const res = await openSSE(server, `/v1/sessions/${id}/events`, { headers, timeout: 10_000 });
    if (res.status === 200) return res.reader;
    assert.equal(res.status, 503, `events: ${res.status} ${res.text}`);
    assert.ok(Date.now() < deadline, `events: still 503 after ${WAIT_TIMEOUT_MS} ms: ${res.text}`);
    await sleep(100);
  }
}

// Ids of events, which must increase, each past `after`.
function assertIdsAfter(events, after, what) {
  let last = after;
  for (const ev of events) {
    assert.ok(Number(ev.id) > last, `${what}: event ${ev.event} of id ${ev.id} after ${last}: ${JSON.stringify(events.map((e) => [e.id, e.event]))}`);
    last = Number(ev.id);
  }
}

before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'aoi-cluster-'));
  nats = await startNatsCluster(3);
  for (const id of ['r1', 'r2', 'r3']) replicas.push(await startReplica(id, await freePort()));
  reference = await startServer({ memoryOnly: true });
  proxy = await startProxy();
});

after(async () => {
  if (browser) await Promise.race([browser.close(), sleep(10_000)]).finally(() => browser.process()?.kill('SIGKILL'));
  if (proxy) proxy.child.kill('SIGKILL');
  for (const r of replicas) await r.server.stop();
  if (reference) await reference.stop();
  for (const node of nats?.nodes ?? []) if (node.child) await killNode(node);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('any replica creates, takes pushes and answers, and the answers are the single server\'s', async () => {
  const id = uniqueId('any');
  const created = await post(replicas[0].server, '/v1/sessions', { id, ...SESSION });
  expectStatus(created, 201);
  assert.ok(['r1', 'r2', 'r3'].includes(created.body.replica), JSON.stringify(created.body));
  const again = await post(replicas[1].server, '/v1/sessions', { id, ...SESSION });
  assert.equal(again.status, 409, again.text);
  const records = [];
  let last = 0;
  for (let i = 0; i < 12; i++) {
    const batch = [0, 1, 2].map((j) => `rec-${String(i * 3 + j).padStart(5, '0')}`);
    const res = await post(replicas[i % 3].server, `/v1/sessions/${id}/data`, { records: batch });
    expectStatus(res, 202);
    assert.equal(res.body.first_seq, last + 1, 'the stream\'s sequence is the session\'s seq');
    last = res.body.last_seq;
    records.push(...batch);
  }
  const answers = [];
  for (const r of replicas) answers.push(await answer(r.server, id, last));
  assert.deepEqual(answers, [answers[0], answers[0], answers[0]], 'every replica gives the holder\'s answer');
  assert.deepEqual(await heldRecords(replicas[2].server, id), records);
  assert.equal(answers[0], await referenceAnswer(records));
  // Any replica tells who holds what; a single server is no cluster.
  const status = await get(replicas[1].server, '/v1/cluster');
  expectStatus(status, 200);
  assert.equal(status.body.replica, 'r2');
  assert.deepEqual(status.body.replicas.map((r) => r.id), ['r1', 'r2', 'r3']);
  const entry = status.body.sessions.find((x) => x.id === id);
  assert.equal(entry.replica, created.body.replica);
  assert.ok(entry.epoch > 0);
  assert.deepEqual(entry.stream, { first_seq: 1, last_seq: last }, 'the stream holds every record');
  assert.equal((await get(reference, '/v1/cluster')).status, 404);
  // Every replica lists every session of the cluster, each with its holder (a replica's own alone would list
  // this session on its holder only).
  const holders = Object.fromEntries(status.body.sessions.filter((x) => x.replica).map((x) => [x.id, x.replica]));
  for (const r of replicas) {
    const listed = await get(r.server, '/v1/sessions');
    expectStatus(listed, 200);
    assert.deepEqual(listed.body.unanswered, [], `${r.id}: every replica answered`);
    assert.deepEqual(Object.fromEntries(listed.body.sessions.map((x) => [x.id, x.replica])), holders,
      `${r.id} lists every session with its holder`);
  }
  const printed = spawnSync(AOI_BIN, ['cluster', '--server', replicas[0].server.url], { encoding: 'utf8' });
  assert.equal(printed.status, 0, printed.stderr);
  assert.match(printed.stdout, /REPLICA\s+URL\s+SESSIONS HELD/);
  assert.match(printed.stdout, new RegExp(`${id}\\s+${created.body.replica}\\s+${entry.epoch}`));
  // Unknown sessions are unknown everywhere, pushes included.
  const unknown = await post(replicas[1].server, '/v1/sessions/nobody-here/data', { records: ['x'] });
  assert.equal(unknown.status, 404, unknown.text);
  assert.equal((await post(replicas[2].server, '/v1/sessions/nobody-here/query', { question: 'x' })).status, 404);
  // A cluster's session takes its records through the cluster, not from a source of its own.
  const sourced = await post(replicas[0].server, '/v1/sessions', { ...SESSION, source: { url: 'redis://127.0.0.1:1/x' } });
  assert.equal(sourced.status, 422, sourced.text);
  assert.equal(sourced.body.error.field, 'source');
});

test('through HAProxy (deploy/haproxy): the same answers, each request on the session\'s holder', async () => {
  const id = uniqueId('proxied');
  expectStatus(await post(proxy, '/v1/sessions', { id, ...SESSION }), 201);
  const records = ['rec-00000', 'rec-00001', 'rec-00002', 'rec-00003'];
  let last = 0;
  for (const r of records) last = (await post(proxy, `/v1/sessions/${id}/data`, { records: [r] })).body.last_seq;
  assert.equal(last, records.length);
  const viaProxy = await answer(proxy, id, last);
  for (const r of replicas) assert.equal(await answer(r.server, id, last), viaProxy);
  // HAProxy routes as aoi places: no request about a session takes a hop (six sessions: a proxy that picked a
  // replica at random would pass with a chance of 1 in 729).
  const ids = [id];
  for (let i = 0; i < 5; i++) {
    ids.push(uniqueId('placed'));
    expectStatus(await post(proxy, '/v1/sessions', { id: ids.at(-1), ...SESSION }), 201);
  }
  for (const sid of ids) {
    const res = await get(proxy, `/v1/sessions/${sid}`);
    expectStatus(res, 200);
    assert.equal(res.headers.get('x-aoi-proxied-to'), res.body.replica, `${sid}: the proxy sent it to the holder`);
  }
  assert.deepEqual(await heldRecords(proxy, id), records);
});

test('kill -9 of the replica holding a session, 10 rounds: every acknowledged record once, answers unchanged', async () => {
  const id = uniqueId('kill');
  await create(id);
  const acked = [];
  let next = 0;
  for (let round = 0; round < 10; round++) {
    const victim = await holder(id);
    let pushing = true;
    const pusher = (async () => {
      // At most 20 records a round, however slow the build (sanitizers): the session's window holds every
      // record, and the test compares them all.
      for (let n = 0; pushing && n < 10; n++) {
        const batch = [0, 1].map(() => `rec-${String(next++).padStart(5, '0')}`);
        const res = await pushOnce(id, batch);
        assert.equal(res.last_seq, acked.length + batch.length, 'acknowledged in order, each once');
        acked.push(...batch);
        await sleep(150);
      }
    })();
    await sleep(100 + Math.random() * 500);
    const r = replicas.find((x) => x.id === victim);
    r.server.child.kill('SIGKILL');
    await r.server.exited;
    const ackedAtKill = acked.length;
    await sleep(Math.random() * 300);
    r.server = (await startReplica(victim, r.port)).server;
    await sleep(200);
    pushing = false;
    await pusher;
    // No client sees an older state after the move: the next holder answers only once it holds every record
    // acknowledged before it took the session (those of the pushes after may still be on their way).
    const held = await heldRecords(pick().server, id);
    assert.ok(held.length >= ackedAtKill, `round ${round}: ${held.length} records after the move, ${ackedAtKill} acknowledged before it`);
    assert.deepEqual(held, acked.slice(0, held.length), `round ${round}: the records in the order acknowledged`);
  }
  // The holder snapshots the session to the shared folder (every second here); the next holder starts from the
  // newest snapshot and ingests only the stream after it.
  const more = await pushOnce(id, ['rec-99998', 'rec-99999']);
  acked.push('rec-99998', 'rec-99999');
  assert.equal(more.last_seq, acked.length);
  const snapshots = path.join(dir, 'shared', 'sessions', id);
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  const holds = (name) => name.endsWith(`-${String(acked.length).padStart(20, '0')}.aoisnap`);
  while (!(existsSync(snapshots) && readdirSync(snapshots).some(holds))) {
    assert.ok(Date.now() < deadline, 'no snapshot of every record in the shared folder');
    await sleep(100);
  }
  const last = acked.length;
  const holderId = await holder(id);
  const h = replicas.find((x) => x.id === holderId);
  h.server.child.kill('SIGKILL');
  await h.server.exited;
  const successor = replicas.find((x) => x !== h && x.server.alive);
  const answers = [await answer(successor.server, id, last)];
  h.server = (await startReplica(h.id, h.port)).server;
  for (const r of replicas.filter((x) => x !== h)) answers.push(await answer(r.server, id, last));
  answers.push(await answer(h.server, id, last));
  let restored = 0;
  for (const r of replicas) restored += await metric(r.server, 'aoi_cluster_restored_total');
  assert.ok(restored > 0, 'the session came back from its snapshot');
  assert.deepEqual(await heldRecords(pick().server, id), acked, 'exactly the acknowledged records, in order');
  assert.ok(answers.every((a) => a === answers[0]), JSON.stringify(answers));
  assert.equal(answers[0], await referenceAnswer(acked), 'the answer of a session never killed');
  // The stream, the session's log, holds every record acknowledged.
  const stream = (await get(pick().server, '/v1/cluster')).body.sessions.find((x) => x.id === id).stream;
  assert.deepEqual(stream, { first_seq: 1, last_seq: acked.length });
});


test('events follow a session its holder lost to kill -9: resumed with Last-Event-ID, every new event, no id again', async () => {
  const id = uniqueId('events');
  await create(id);
  let next = 0;
  const push = async (n) => (await pushOnce(id, Array.from({ length: n }, () => `rec-${String(next++).padStart(5, '0')}`))).last_seq;
  await push(3);
  const holderId = await holder(id);
  const victim = replicas.find((x) => x.id === holderId);
  // Through a replica that relays the stream from the holder.
  const via = replicas.find((x) => x !== victim && x.server.alive);
  const stream = await subscribe(via.server, id);
  const seq = await push(3);
  const updated = await stream.waitFor((ev) => ev.event === 'data_updated' && ev.json.last_seq >= seq, 'the push\'s data_updated');
  const before = [...updated.skipped, updated];
  // At once: the holder has handed out ids its last snapshot does not know of.
  victim.server.child.kill('SIGKILL');
  await victim.server.exited;
  before.push(...await stream.all(WAIT_TIMEOUT_MS));  // the relayed stream ends with its holder
  assert.ok(!before.some((ev) => ev.event === 'session_deleted'), JSON.stringify(before));
  const lastId = Number(stream.lastEventId);
  assert.ok(lastId > 0, 'events were seen before the kill');
  victim.server = (await startReplica(victim.id, victim.port)).server;

  const resumed = await subscribe(pick().server, id, lastId);
  const last = await push(3);
  const after = await resumed.waitFor((ev) => ev.event === 'data_updated' && ev.json.last_seq >= last,
    'the data_updated of the push after the move');
  resumed.close();
  assertIdsAfter([...after.skipped, after], lastId, 'after the move');
});

test('a replica frozen past its lease finds the session taken when it wakes, and drops its copy', async () => {
  const id = uniqueId('frozen');
  await create(id);
  const first = await pushOnce(id, ['rec-00000', 'rec-00001']);
  const holderId = await holder(id);
  const victim = replicas.find((x) => x.id === holderId);
  const lostBefore = await metric(victim.server, 'aoi_cluster_leases_lost_total');
  victim.server.child.kill('SIGSTOP');
  try {
    const others = replicas.filter((x) => x !== victim);
    // Another replica takes the session once the lease lapses, with every record.
    const more = await pushOnce(id, ['rec-00002']);
    assert.equal(more.last_seq, first.last_seq + 1);
    const res = await ask(() => get(others[0].server, `/v1/sessions/${id}`, { timeout: 2000 }), 'the session elsewhere');
    expectStatus(res, 200);
    assert.notEqual(res.body.replica, victim.id);
    await answer(others[1].server, id, more.last_seq);
    // A list asked meanwhile still comes: the frozen replica, while still counted live, is named as unanswered.
    const listed = await get(others[0].server, '/v1/sessions', { timeout: 20_000 });
    expectStatus(listed, 200);
    assert.ok(listed.body.unanswered.every((u) => u.replica === victim.id), JSON.stringify(listed.body.unanswered));
    assert.ok(listed.body.sessions.some((x) => x.id === id && x.replica !== victim.id), 'the session, at its holder');
  } finally {
    victim.server.child.kill('SIGCONT');
  }
  // Awake, it drops its copy rather than answer or ingest for a session it no longer holds.
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  while ((await metric(victim.server, 'aoi_cluster_leases_lost_total')) <= lostBefore) {
    assert.ok(Date.now() < deadline, 'the woken replica never dropped its copy');
    await sleep(100);
  }
  const via = await ask(() => get(victim.server, `/v1/sessions/${id}`), 'the session through the woken replica');
  expectStatus(via, 200);
  assert.notEqual(via.body.replica, victim.id, 'answered by the holder');
  assert.deepEqual(await heldRecords(victim.server, id), ['rec-00000', 'rec-00001', 'rec-00002']);
});

test('kill -9 of a NATS node mid-stream: pushes go on, nothing acknowledged is lost', async () => {
  const id = uniqueId('natskill');
  await create(id);
  const acked = [];
  let next = 0;
  let pushing = true;
  const pusher = (async () => {
    while (pushing) {
      const batch = [0, 1].map(() => `rec-${String(next++).padStart(5, '0')}`);
      const res = await pushOnce(id, batch);
      assert.equal(res.last_seq, acked.length + batch.length,
        `acknowledged in order, each once: ${JSON.stringify(res)} after ${acked.length} records`);
      acked.push(...batch);
      await sleep(50);
    }
  })();
  await sleep(500);
  const node = nats.nodes[Math.floor(Math.random() * nats.nodes.length)];
  await killNode(node);
  const before = acked.length;
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  while (acked.length < before + 20) {
    assert.ok(Date.now() < deadline, 'pushes stopped with a NATS node down');
    await sleep(100);
  }
  await startNode(node);
  await sleep(300);
  pushing = false;
  await pusher;
  const last = acked.length;
  await answer(pick().server, id, last);
  assert.deepEqual(await heldRecords(pick().server, id), acked);
});

test('the dashboard of any replica shows every session of the cluster with the replica holding it', async () => {
  const ids = [uniqueId('dash'), uniqueId('dash'), uniqueId('dash')];
  const holders = {};
  for (const id of ids) {
    await create(id);
    holders[id] = await holder(id);
  }
  assert.ok(existsSync(CHROMIUM), `Chromium is not installed at ${CHROMIUM} (scripts/setup.sh --tests installs it)`);
  browser = await puppeteer.launch({ executablePath: CHROMIUM, headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run'] });
  const page = await browser.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  await page.goto(`${pick().server.url}/`, { waitUntil: 'load' });
  // A session may still move while placement settles (a replica's view of the others catching up): the page
  // is compared with where each is held at the same moment, until they agree.
  const shown = () => page.$$eval('#sessions-body tr', (trs) => Object.fromEntries(
    trs.map((tr) => [tr.dataset.id, tr.querySelector('td.replica')?.textContent])));
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  for (;;) {
    for (const id of ids) holders[id] = await holder(id);
    const rows = await shown();
    if (ids.every((id) => rows[id] === holders[id])) break;
    assert.ok(Date.now() < deadline, `want ${JSON.stringify(holders)}, shown ${JSON.stringify(rows)}`);
    await sleep(200);
  }
  assert.ok((await page.$$eval('#sessions-head th', (ths) => ths.map((th) => th.textContent))).includes('replica'));
  // Each with the epoch of the lease its replica holds it by, as the list gives it.
  const listed = (await get(pick().server, '/v1/sessions')).body.sessions.filter((x) => ids.includes(x.id));
  assert.equal(listed.length, ids.length);
  for (const x of listed) {
    assert.ok(Number.isInteger(x.epoch) && x.epoch > 0, JSON.stringify(x));
    const title = await page.$eval(`tr[data-id="${x.id}"] td.replica`, (td) => td.title);
    assert.match(title, /lease epoch \d+/);
  }
  assert.match(await page.$eval('#status', (e) => e.textContent), /on \d+ replicas?/);
  assert.deepEqual(problems, []);
  await page.close();
});

// aoi's placement (src/cluster/rendezvous.cpp): FNV-1a 64 of "REPLICA\0SESSION", splitmix64's finaliser, the
// highest score wins (ties to the smaller id).
const MASK = (1n << 64n) - 1n;
function score(replica, session) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(`${replica}\0${session}`)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & MASK;
  h = ((h ^ (h >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
  h = ((h ^ (h >> 27n)) * 0x94d049bb133111ebn) & MASK;
  return h ^ (h >> 31n);
}
function placed(session, ids) {
  let best = null;
  for (const id of ids) {
    if (best === null || score(id, session) > score(best, session) ||
        (score(id, session) === score(best, session) && id < best)) best = id;
  }
  return best;
}

test('a replica that joins takes exactly the sessions hashing gives it, and gives them back when it stops', async () => {
  // Four sessions hashing gives the newcomer, four it does not.
  const mine = [];
  const others = [];
  for (let i = 0; mine.length < 4 || others.length < 4; i++) {
    const id = `join-${process.pid}-${i}`;
    const list = placed(id, ['r1', 'r2', 'r3', 'r4']) === 'r4' ? mine : others;
    if (list.length < 4) list.push(id);
  }
  const ids = [...mine, ...others];
  const before = {};
  const answers = {};
  for (const id of ids) {
    await create(id);
    const pushed = await pushOnce(id, ['rec-00000', 'rec-00001', 'rec-00002']);
    answers[id] = await answer(pick().server, id, pushed.last_seq);
    // Where hashing puts it, at least once the replicas' view has settled (a heartbeat missed while the NATS
    // cluster elected leaders in the test before may have placed it elsewhere for a moment).
    const deadline = Date.now() + WAIT_TIMEOUT_MS;
    while ((before[id] = await holder(id)) !== placed(id, ['r1', 'r2', 'r3'])) {
      assert.ok(Date.now() < deadline, `${id} is held by ${before[id]}, not where hashing puts it`);
      await sleep(100);
    }
  }
  // A client of a session that moves, subscribed at its holder: told session_moved (not session_deleted), it
  // resumes through the same replica, which relays from the new holder.
  const atHolder = replicas.find((x) => x.id === before[mine[0]]);
  const moving = await subscribe(atHolder.server, mine[0]);
  // And a WebSocket there: it hears session_moved and is closed with 1012, to connect again.
  const socket = new WebSocket(`${atHolder.server.url.replace('http', 'ws')}/v1/sessions/${mine[0]}/ws`);
  const frames = [];
  socket.on('message', (data) => frames.push(JSON.parse(data.toString())));
  const socketClosed = new Promise((resolve) => socket.on('close', (code) => resolve(code)));
  await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject); });
  const port = await freePort();
  const newcomer = await startReplica('r4', port);
  replicas.push(newcomer);
  try {
    for (const id of mine) {
      const deadline = Date.now() + WAIT_TIMEOUT_MS;
      while ((await holder(id)) !== 'r4') {
        assert.ok(Date.now() < deadline, `${id} never moved to the new replica`);
        await sleep(100);
      }
    }
    const heard = await moving.all(WAIT_TIMEOUT_MS);
    assert.equal(heard.at(-1)?.event, 'session_moved', JSON.stringify(heard));
    assert.equal(heard.at(-1).json.id, mine[0]);
    assert.ok(!heard.some((ev) => ev.event === 'session_deleted'), JSON.stringify(heard));
    (await subscribe(atHolder.server, mine[0], Number(moving.lastEventId))).close();
    assert.equal(await socketClosed, 1012, JSON.stringify(frames));
    assert.equal(frames.at(-1)?.event, 'session_moved', JSON.stringify(frames));
    for (const id of others) assert.equal(await holder(id), before[id], `${id} stayed where it was`);
    for (const id of ids) {
      assert.equal(await answer(pick().server, id, 3), answers[id], `${id} answers as before the move`);
      assert.deepEqual(await heldRecords(pick().server, id), ['rec-00000', 'rec-00001', 'rec-00002']);
    }
    // (Sessions of the earlier tests that hashing gives the newcomer moved too.)
    assert.ok(await metric(newcomer.server, 'aoi_cluster_restored_total') >= mine.length,
      'each moved session came from its holder\'s last snapshot');
  } finally {
    replicas.pop();
    await newcomer.server.stop();
  }
  // Stopped, it handed them back.
  for (const id of mine) {
    assert.equal(await holder(id), before[id]);
    assert.equal(await answer(pick().server, id, 3), answers[id]);
  }
});
