// Flash answers published to sinks (`"sink"` on a flash query), against real brokers started here on loopback
// — Debian's mosquitto and redis-server, librdkafka's mock cluster (aoi-kafka-mock: Debian 12 packages no Kafka
// broker) read with Debian's kcat — and a webhook served by this test: every new answer arrives on its sink with
// its session, query, data version and logit gap, keyed SESSION/FID/VERSION; `notify: change` and `match` leave
// answers out; a failing sink is retried (error events, metrics) until it takes the answer, never holding the
// session up; a sink survives a restart and gets the current answer again; bad sinks are refused naming them.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import {
  startServer, tempDataDir, get, post, expectStatus, expectError, openSSE, pushRecords, sleep, uniqueId,
  waitSession, SMALL_SESSION, WAIT_TIMEOUT_MS, freePort,
} from './harness.js';
import {
  KCAT, REDIS_CLI, startKafkaMock, startMosquitto, startRedis, stopBroker,
} from './brokers.js';

let dir = null;
let mqtt = null; // { child, port }
let redis = null; // { child, port }
let kafka = null; // startKafkaMock()
let hook = null; // { server, port, received: [{ key, body }], failNext }

before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'aoi-sinks-'));
  mkdirs('mqtt', 'redis');
  const mqttPort = await freePort();
  mqtt = { child: await startMosquitto(mqttPort, path.join(dir, 'mqtt')), port: mqttPort };
  const redisPort = await freePort();
  redis = { child: await startRedis(redisPort, path.join(dir, 'redis')), port: redisPort };
  kafka = await startKafkaMock();
  hook = { received: [], failNext: 0 };
  hook.server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (hook.failNext > 0) {
        hook.failNext--;
        res.writeHead(500).end('not now');
        return;
      }
      hook.received.push({ key: req.headers['idempotency-key'], type: req.headers['content-type'], body: JSON.parse(body) });
      res.writeHead(204).end();
    });
  });
  await new Promise((resolve) => hook.server.listen(0, '127.0.0.1', resolve));
  hook.port = hook.server.address().port;
});

after(async () => {
  hook?.server.close();
  if (kafka) await kafka.stop();
  if (redis) await stopBroker(redis.child);
  if (mqtt) await stopBroker(mqtt.child);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function mkdirs(...names) {
  for (const n of names) spawnSync('mkdir', ['-p', path.join(dir, n)]);
}

// What a topic or stream holds, as the answers published there.
function mqttCollector(topic) {
  const child = spawn('/usr/bin/mosquitto_sub', ['-p', String(mqtt.port), '-t', topic, '-q', '1'],
    { stdio: ['ignore', 'pipe', 'inherit'] });
  const got = [];
  let buffered = '';
  child.stdout.on('data', (d) => {
    buffered += d;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      got.push(JSON.parse(buffered.slice(0, nl)));
      buffered = buffered.slice(nl + 1);
    }
  });
  return { got, stop: () => child.kill() };
}

function redisAnswers(key) {
  const r = spawnSync(REDIS_CLI, ['-p', String(redis.port), '--raw', 'XRANGE', key, '-', '+'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n').filter((l) => l !== '');
  const out = [];
  for (let i = 0; i + 4 < lines.length + 1; i += 5) {
    // id, "key", key, "answer", json
    out.push({ key: lines[i + 2], body: JSON.parse(lines[i + 4]) });
  }
  return out;
}

function kafkaAnswers(topic) {
  const r = spawnSync(KCAT, ['-C', '-b', kafka.bootstrap, '-t', topic, '-p', '0', '-o', 'beginning', '-e', '-q',
    '-f', '%k\t%s\n'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.split('\n').filter((l) => l !== '').map((l) => {
    const [key, json] = l.split('\t');
    return { key, body: JSON.parse(json) };
  });
}

async function flashList(server, id) {
  const res = await get(server, `/v1/sessions/${id}/flash`);
  expectStatus(res, 200);
  return res.body.flash;
}

async function until(what, fn) {
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  for (;;) {
    const v = await fn();
    if (v) return v;
    assert.ok(Date.now() < deadline, `timed out: ${what}`);
    await sleep(50);
  }
}

test('every new flash answer arrives on its sink: MQTT, Redis, Kafka and a webhook, keyed SESSION/FID/VERSION',
  async () => {
    const server = await startServer({ memoryOnly: true });
    const sub = mqttCollector('answers/+');
    try {
      const id = uniqueId('sinks');
      expectStatus(await post(server, '/v1/sessions', { id, ...SMALL_SESSION }), 201);
      const stream = uniqueId('answers');
      const topic = uniqueId('answers');
      await kafka.ask(`topic ${topic} 1`);
      const sinks = {
        mqtt: `mqtt://127.0.0.1:${mqtt.port}/answers/${id}`,
        redis: `redis://127.0.0.1:${redis.port}/${stream}`,
        kafka: `kafka://${kafka.bootstrap}/${topic}`,
        webhook: `http://127.0.0.1:${hook.port}/flash?from=aoi`,
      };
      const fids = {};
      await sleep(200);  // the subscriber is in
      for (const [kind, url] of Object.entries(sinks)) {
        const res = await post(server, `/v1/sessions/${id}/flash`,
          { question: `Is the trend up (${kind})?`, max_tokens: 3, sink: { url } });
        expectStatus(res, 201);
        assert.deepEqual(res.body.sink, { url, notify: 'always', match: null });
        fids[kind] = res.body.fid;
      }
      for (let i = 0; i < 3; i++) {
        const pushed = await pushRecords(server, id, [`bar ${i} close=${100 + i}`]);
        await waitSession(server, id, (s) => s.last_seq_ingested >= pushed.last_seq, 'ingested');
      }
      const final = await until('every query answered at the last version', async () => {
        const s = (await get(server, `/v1/sessions/${id}`)).body;
        const list = await flashList(server, id);
        return list.every((f) => f.version === s.data_version) ? list : null;
      });
      const got = {
        mqtt: () => sub.got.map((body) => ({ key: `${body.session}/${body.fid}/${body.version}`, body })),
        redis: () => redisAnswers(stream),
        kafka: () => kafkaAnswers(topic),
        webhook: () => hook.received.filter((r) => r.body.session === id),
      };
      for (const [kind, read] of Object.entries(got)) {
        const f = final.find((q) => q.fid === fids[kind]);
        const messages = await until(`${kind} has the answer of version ${f.version}`, async () => {
          const m = read();
          return m.some((x) => x.body.version === f.version && x.body.fid === f.fid) ? m : null;
        });
        const last = messages.filter((x) => x.body.fid === f.fid).at(-1);
        assert.equal(last.key, `${id}/${f.fid}/${f.version}`, kind);
        assert.equal(last.body.session, id);
        assert.equal(last.body.question, f.question);
        assert.equal(last.body.answer, f.answer, kind);
        assert.equal(last.body.logit_gap, f.logit_gap, kind);
        // Versions in order, each at most twice (at least once: a repeat has the same key).
        const versions = messages.filter((x) => x.body.fid === f.fid).map((x) => x.body.version);
        assert.deepEqual(versions, [...versions].sort((a, b) => a - b), `${kind}: ${versions}`);
        assert.ok(versions.length >= 3, `${kind}: an answer per version: ${versions}`);
      }
      assert.equal(hook.received.at(-1).type, 'application/json');
    } finally {
      sub.stop();
      await server.stop();
    }
  });

test('notify: change leaves out an answer equal to the last; match leaves out what it does not match', async () => {
  const server = await startServer({ memoryOnly: true, args: ['--metrics-per-session', '0'] });
  try {
    const id = uniqueId('notify');
    expectStatus(await post(server, '/v1/sessions', { id, ...SMALL_SESSION }), 201);
    const url = (p) => `http://127.0.0.1:${hook.port}${p}`;
    const changed = await post(server, `/v1/sessions/${id}/flash`,
      { question: 'First?', max_tokens: 2, sink: { url: url('/change'), notify: 'change' } });
    expectStatus(changed, 201);
    const always = await post(server, `/v1/sessions/${id}/flash`,
      { question: 'Second?', max_tokens: 2, sink: { url: url('/always') } });
    expectStatus(always, 201);
    const never = await post(server, `/v1/sessions/${id}/flash`,
      { question: 'Third?', max_tokens: 2, sink: { url: url('/never'), match: '^a{1000}$' } });
    expectStatus(never, 201);
    const pushed = await pushRecords(server, id, ['one record']);
    await waitSession(server, id, (s) => s.last_seq_ingested >= pushed.last_seq, 'ingested');
    const mine = (fid) => hook.received.filter((r) => r.body.session === id && r.body.fid === fid);
    // (The test model may answer version 1 as it answered version 0: then `change` publishes only the first.)
    await until('the answers at version 1', () => mine(changed.body.fid).length > 0 &&
      mine(always.body.fid).some((r) => r.body.version === 1));
    await sleep(300);
    const before = { change: mine(changed.body.fid).length, always: mine(always.body.fid).length };
    // A new query makes a round at the same version: every query answers again, the same answer.
    expectStatus(await post(server, `/v1/sessions/${id}/flash`, { question: 'Fourth?', max_tokens: 2 }), 201);
    await until('the repeat reaches the always sink', () => mine(always.body.fid).length > before.always);
    await sleep(300);
    assert.equal(mine(changed.body.fid).length, before.change, 'the same answer again is not published');
    assert.equal(mine(never.body.fid).length, 0, 'what does not match is never published');
    const metrics = (await get(server, '/metrics')).text;
    const skipped = Number(metrics.match(/\naoi_sink_skipped_total (\d+)/)[1]);
    assert.ok(skipped >= 3, `skipped ${skipped}`);
  } finally {
    await server.stop();
  }
});

test('a failing sink is tried again until it takes the answer: error events and metrics say so', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const id = uniqueId('retry');
    expectStatus(await post(server, '/v1/sessions', { id, ...SMALL_SESSION }), 201);
    const events = await openSSE(server, `/v1/sessions/${id}/events`);
    try {
      hook.failNext = 2;
      const res = await post(server, `/v1/sessions/${id}/flash`,
        { question: 'Retry?', max_tokens: 2, sink: { url: `http://127.0.0.1:${hook.port}/retry` } });
      expectStatus(res, 201);
      const error = await events.reader.waitFor((e) => e.event === 'error' && /sink|webhook/.test(e.data),
        'a sink error event');
      assert.match(error.data, /HTTP 500/);
      assert.equal(JSON.parse(error.data).sink, `http://127.0.0.1:${hook.port}/retry`);
    } finally {
      events.reader.close();
    }
    const delivered = await until('the answer delivered after the failures', () =>
      hook.received.find((r) => r.body.session === id));
    assert.equal(delivered.key, `${id}/${delivered.body.fid}/${delivered.body.version}`);
    // The hook has the answer before aoi has read the hook's reply: the count of published answers follows.
    const counter = (text, name) => Number(text.match(new RegExp(`\\n${name} (\\d+)`))[1]);
    const metrics = await until('the delivery counted', async () => {
      const text = (await get(server, '/metrics')).text;
      return counter(text, 'aoi_sink_published_total') >= 1 ? text : null;
    });
    assert.ok(counter(metrics, 'aoi_sink_failures_total') >= 2);
    // The session answered meanwhile.
    const a = await post(server, `/v1/sessions/${id}/query`, { question: 'Anything?', max_tokens: 2 });
    expectStatus(a, 200);
  } finally {
    hook.failNext = 0;
    await server.stop();
  }
});

test('a sink survives a restart: the query keeps it, and the current answer is published again', async () => {
  const dataDir = tempDataDir();
  try {
    const id = uniqueId('durable');
    let server = await startServer({ dataDir });
    let fid;
    try {
      expectStatus(await post(server, '/v1/sessions', { id, ...SMALL_SESSION }), 201);
      const res = await post(server, `/v1/sessions/${id}/flash`,
        { question: 'Kept?', max_tokens: 2, sink: { url: `http://127.0.0.1:${hook.port}/kept`, notify: 'change' } });
      expectStatus(res, 201);
      fid = res.body.fid;
      const pushed = await pushRecords(server, id, ['a record']);
      await waitSession(server, id, (s) => s.last_seq_ingested >= pushed.last_seq, 'ingested');
      await waitSession(server, id, (s) => s.flash[0]?.version === 1, 'answered at version 1');
      await until('published', () => hook.received.some((r) => r.body.session === id));
      await sleep(300);  // (version 1's answer, published too unless it equals version 0's)
    } finally {
      await server.stop();
    }
    const before = hook.received.filter((r) => r.body.session === id).length;
    server = await startServer({ dataDir });
    try {
      const list = await flashList(server, id);
      assert.equal(list[0].sink.url, `http://127.0.0.1:${hook.port}/kept`);
      assert.equal(list[0].sink.notify, 'change');
      const again = await until('the current answer again', () => {
        const mine = hook.received.filter((r) => r.body.session === id);
        return mine.length > before ? mine.at(-1) : null;
      });
      assert.equal(again.key, `${id}/${fid}/${list[0].version}`);
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a sink that is no sink, a notify rule or a pattern that is none, are refused naming them', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const id = uniqueId('bad');
    expectStatus(await post(server, '/v1/sessions', { id, ...SMALL_SESSION }), 201);
    const add = (sink) => post(server, `/v1/sessions/${id}/flash`, { question: 'Q?', sink });
    expectError(await add({ url: 'ftp://x/y' }), 422, 'invalid_value', 'sink.url');
    expectError(await add({ url: `redis://127.0.0.1:${redis.port}/k?start=$` }), 422, 'invalid_value', 'sink.url');
    expectError(await add({ url: 'http://user:pw@127.0.0.1/h' }), 422, 'invalid_value', 'sink.url');
    expectError(await add({}), 422, 'invalid_value', 'sink.url');
    expectError(await add({ url: `http://127.0.0.1:${hook.port}/`, notify: 'sometimes' }), 422, 'invalid_value',
      'sink.notify');
    expectError(await add({ url: `http://127.0.0.1:${hook.port}/`, match: '(' }), 422, 'invalid_value', 'sink.match');
    expectError(await add({ url: `http://127.0.0.1:${hook.port}/`, colour: 'blue' }), 422, 'invalid_value', 'sink.colour');
    assert.equal((await flashList(server, id)).length, 0);
  } finally {
    await server.stop();
  }
});
