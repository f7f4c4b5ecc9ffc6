// Sessions fed by a Redis stream (`"source": {"url": "redis://..."}`), against Debian's redis-server started
// here on loopback (with appendonly, as a broker that keeps its data) and redis-cli to produce: records
// produced are ingested in order and answered; messages that do not decode are counted and reported; under
// the default `lag` overflow a full queue drops nothing; a deleted session's consumer lets go of the broker;
// and 20 rounds of kill -9 mid-stream leave the session holding exactly what was produced, in order, with no
// duplicate and no gap.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  startServer, tempDataDir, get, post, del, expectStatus, expectError, openSSE, sleep, uniqueId, waitSession,
  WAIT_TIMEOUT_MS, freePort,
} from './harness.js';

const REDIS_SERVER = process.env.AOI_REDIS_SERVER || '/usr/bin/redis-server';
const REDIS_CLI = process.env.AOI_REDIS_CLI || '/usr/bin/redis-cli';

let redis = null; // { child, port, dir }

function cli(...args) {
  const r = spawnSync(REDIS_CLI, ['-h', '127.0.0.1', '-p', String(redis.port), ...args], { encoding: 'utf8' });
  assert.equal(r.status, 0, `redis-cli ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
}

// Adds the messages to the stream (one field, "m"), in order, through one redis-cli.
function produce(key, messages) {
  const quote = (s) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
  const input = messages.map((m) => `XADD ${quote(key)} * m ${quote(m)}`).join('\n') + '\n';
  const r = spawnSync(REDIS_CLI, ['-h', '127.0.0.1', '-p', String(redis.port)], { input, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim().split('\n').length, messages.length, r.stdout);
}

const lastId = (key) => {
  const out = cli('XREVRANGE', key, '+', '-', 'COUNT', '1');
  return out === '' ? '0-0' : out.split('\n')[0];
};

// Starts redis-server on `port` with its data in `dir` and waits for its PONG.
async function startRedis(port, dir) {
  const child = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
    '--appendonly', 'yes', '--daemonize', 'no'], { stdio: 'ignore' });
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (spawnSync(REDIS_CLI, ['-p', String(port), 'PING'], { encoding: 'utf8' }).stdout?.trim() === 'PONG') break;
    assert.ok(Date.now() < deadline, 'redis-server did not answer PING within 20 s');
    await sleep(50);
  }
  return child;
}

async function stopRedis() {
  redis.child.kill('SIGTERM');
  await new Promise((resolve) => (redis.child.exitCode !== null ? resolve() : redis.child.once('exit', resolve)));
}

before(async () => {
  for (const bin of [REDIS_SERVER, REDIS_CLI]) {
    assert.ok(spawnSync(bin, ['--version']).status === 0,
      `${bin} is missing: the source tests need Debian's redis-server and redis-tools (scripts/setup.sh --tests)`);
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'aoi-redis-'));
  const port = await freePort();
  redis = { child: await startRedis(port, dir), port, dir };
});

after(async () => {
  if (!redis) return;
  await stopRedis();
  rmSync(redis.dir, { recursive: true, force: true });
});

const sourceUrl = (key) => `redis://127.0.0.1:${redis.port}/${key}`;

async function createSourceSession(server, key, extra = {}) {
  const res = await post(server, '/v1/sessions', {
    id: uniqueId('src'), system: 'Records follow.', query_budget: 32, retention: { max_tokens: 3000 },
    ...extra, source: { url: sourceUrl(key), format: 'text', ...(extra.source ?? {}) },
  });
  expectStatus(res, 201);
  return res.body;
}

// Waits until the session holds everything up to the stream's newest entry.
async function waitCaughtUp(server, id, key) {
  const end = lastId(key);
  return waitSession(server, id, (s) => s.source?.position === end && s.last_seq_ingested === s.last_seq_pushed &&
    s.pending === 0, `caught up with ${end}`);
}

// The records the session holds, read from what the model reads.
async function heldRecords(server, id, pattern) {
  const ctx = await get(server, `/v1/sessions/${id}/context`);
  expectStatus(ctx, 200);
  return [...ctx.body.text.matchAll(pattern)].map((m) => m[0]);
}

test('produced records are ingested in order and answered; the session shows its source', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const key = uniqueId('ticks');
    const s = await createSourceSession(server, key);
    assert.equal(s.source.url, sourceUrl(key));
    assert.equal(s.source.overflow, 'lag');
    const messages = Array.from({ length: 40 }, (_, i) => `tick-${String(i).padStart(3, '0')} price=${100 + i}`);
    produce(key, messages);
    const caught = await waitCaughtUp(server, s.id, key);
    assert.equal(caught.records.ingested, 40);
    assert.equal(caught.records.dropped, 0);
    assert.equal(caught.source.connected, true);
    assert.equal(caught.source.messages, 40);
    assert.deepEqual(await heldRecords(server, s.id, /tick-\d{3} price=\d+/g), messages);
    const a = await post(server, `/v1/sessions/${s.id}/query`, { question: 'What was the last price?', max_tokens: 4 });
    expectStatus(a, 200);
    assert.equal(a.body.data_version, caught.data_version);
  } finally {
    await server.stop();
  }
});

test('/metrics counts the sources: by state, messages, rejections, reconnects, lag; promtool accepts it', async () => {
  const server = await startServer({ memoryOnly: true, args: ['--metrics-per-session', '4'] });
  try {
    const key = uniqueId('metrics');
    const s = await createSourceSession(server, key, { source: { format: 'json' } });
    produce(key, ['{"p": 1}', '{"p": ', '{"p": 3}']);
    await waitCaughtUp(server, s.id, key);
    const res = await get(server, '/metrics');
    expectStatus(res, 200);
    const value = (name, labels = '') => {
      const line = res.text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
      assert.ok(line, `${name}${labels} in /metrics`);
      return Number(line.split(' ').at(-1));
    };
    assert.equal(value('aoi_sources', '{state="connected"}'), 1);
    assert.equal(value('aoi_sources', '{state="disconnected"}'), 0);
    assert.equal(value('aoi_source_messages_total'), 3);
    assert.equal(value('aoi_source_rejected_total'), 1);
    assert.equal(value('aoi_source_lag_seconds'), 0);
    assert.equal(value('aoi_session_source_connected', `{session="${s.id}",tenant=""}`), 1);
    assert.ok(existsSync('/usr/bin/promtool'), 'no /usr/bin/promtool (Debian package prometheus; scripts/setup.sh --tests)');
    const r = spawnSync('/usr/bin/promtool', ['check', 'metrics'], { input: res.text, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `promtool check metrics:\n${r.stdout}${r.stderr}`);
    // Once a deleted session's consumer has ended, its counts stay in the counters.
    expectStatus(await del(server, `/v1/sessions/${s.id}`), 200);
    const metric = async (name, labels = '') => {
      const text = (await get(server, '/metrics')).text;
      return Number(text.split('\n').find((l) => l.startsWith(`${name}${labels} `)).split(' ').at(-1));
    };
    const deadline = Date.now() + WAIT_TIMEOUT_MS;
    while (await metric('aoi_sources', '{state="connected"}') > 0) {
      assert.ok(Date.now() < deadline, 'the deleted session\'s consumer still counts as connected');
      await sleep(50);
    }
    assert.equal(await metric('aoi_source_messages_total'), 3);
    assert.equal(await metric('aoi_source_rejected_total'), 1);
  } finally {
    await server.stop();
  }
});

test('a source that is no source, or cannot be reached, is refused at creation naming it', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const create = (source) => post(server, '/v1/sessions', { source });
    expectError(await create({ url: 'kafka://127.0.0.1:9092/ticks' }), 422, 'invalid_value', 'source.url');
    expectError(await create({ url: 'redis://127.0.0.1:6379' }), 422, 'invalid_value', 'source.url');
    expectError(await create({ url: 'redis://user:secret@127.0.0.1:6379/k' }), 422, 'invalid_value', 'source.url');
    expectError(await create({ url: sourceUrl('k'), format: 'xml' }), 422, 'invalid_value', 'source.format');
    expectError(await create({ url: sourceUrl('k'), overflow: 'block' }), 422, 'invalid_value', 'source.overflow');
    const unreachable = await create({ url: `redis://127.0.0.1:${await freePort()}/k` });
    assert.ok(unreachable.status >= 400, unreachable.text);
    assert.equal(unreachable.body.error.field, 'source.url', unreachable.text);
    cli('SET', 'not-a-stream', 'x');
    expectError(await create({ url: sourceUrl('not-a-stream') }), 422, 'invalid_value', 'source.url');
    assert.equal((await get(server, '/v1/sessions')).body.sessions.length, 0, 'nothing was created');
  } finally {
    await server.stop();
  }
});

test('messages that do not decode are counted and reported, and the consumer goes on', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const key = uniqueId('json');
    const s = await createSourceSession(server, key, { source: { format: 'json' } });
    const events = await openSSE(server, `/v1/sessions/${s.id}/events`);
    try {
      produce(key, ['{"p": 1}', '{"p": ', '{"p": 3}']);
      const error = await events.reader.waitFor((e) => e.event === 'error', 'an error event');
      assert.match(error.data, /source message \d+-\d+/);
    } finally {
      events.reader.close();
    }
    const caught = await waitCaughtUp(server, s.id, key);
    assert.equal(caught.source.rejected, 1);
    assert.equal(caught.records.ingested, 2);
    assert.deepEqual(await heldRecords(server, s.id, /p=\d/g), ['p=1', 'p=3']);
  } finally {
    await server.stop();
  }
});

test('under lag a queue far smaller than the backlog drops nothing; a deleted session lets go of the broker',
  async () => {
    const server = await startServer({ memoryOnly: true, args: ['--ring-capacity', '4'] });
    try {
      const key = uniqueId('backlog');
      const messages = Array.from({ length: 300 }, (_, i) => `row-${String(i).padStart(4, '0')}`);
      produce(key, messages);
      const s = await createSourceSession(server, key);
      const caught = await waitCaughtUp(server, s.id, key);
      assert.equal(caught.records.dropped, 0);
      assert.equal(caught.records.ingested, 300);
      assert.deepEqual(await heldRecords(server, s.id, /row-\d{4}/g), messages.slice(-caught.regions.records));
      assert.equal(caught.regions.records + caught.records.evicted, 300);

      const named = () => cli('CLIENT', 'LIST').split('\n').filter((l) => l.includes(`name=aoi:${s.id}`)).length;
      assert.equal(named(), 1, 'the consumer is connected');
      expectStatus(await del(server, `/v1/sessions/${s.id}`), 200);
      const deadline = Date.now() + WAIT_TIMEOUT_MS;
      while (named() > 0) {
        assert.ok(Date.now() < deadline, 'the deleted session\'s consumer is still connected');
        await sleep(50);
      }
    } finally {
      await server.stop();
    }
  });

test('the broker restarted mid-stream: the consumer says so, reconnects and goes on where it was', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const key = uniqueId('restart');
    const s = await createSourceSession(server, key);
    const first = Array.from({ length: 10 }, (_, i) => `before-${i}`);
    produce(key, first);
    await waitCaughtUp(server, s.id, key);
    await stopRedis();
    const down = await waitSession(server, s.id, (x) => x.source.connected === false && x.source.error,
      'the consumer notices the broker is gone');
    assert.match(down.source.error, /redis 127\.0\.0\.1:\d+/);
    redis.child = await startRedis(redis.port, redis.dir);  // appendonly: the stream is still there
    const later = Array.from({ length: 10 }, (_, i) => `after-${i}`);
    produce(key, later);
    const caught = await waitCaughtUp(server, s.id, key);
    assert.equal(caught.source.connected, true);
    assert.ok(caught.source.reconnects >= 1, JSON.stringify(caught.source));
    assert.deepEqual(await heldRecords(server, s.id, /(before|after)-\d/g), [...first, ...later]);
  } finally {
    await server.stop();
  }
});

// A producer that keeps adding "rec-NNNNN" entries through one redis-cli until stopped; stop() resolves once
// redis-cli has added every one written (so `produced` is exactly what the stream holds).
function startProducer(key, produced) {
  const child = spawn(REDIS_CLI, ['-h', '127.0.0.1', '-p', String(redis.port)], { stdio: ['pipe', 'ignore', 'inherit'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const timer = setInterval(() => {
    const batch = [];
    for (let i = 0; i < 3; i++) batch.push(`rec-${String(produced.length + batch.length).padStart(5, '0')}`);
    produced.push(...batch);
    child.stdin.write(batch.map((m) => `XADD ${key} * m ${m}\n`).join(''));
  }, 15);
  return {
    async stop() {
      clearInterval(timer);
      child.stdin.end();
      assert.equal(await exited, 0, 'redis-cli produced every entry');
    },
  };
}

test('20 rounds of kill -9 mid-stream: the session holds exactly what was produced, in order', async () => {
  const dataDir = tempDataDir();
  const key = uniqueId('crash');
  const id = uniqueId('crash');
  const produced = [];
  try {
    let server = await startServer({ dataDir });
    try {
      expectStatus(await post(server, '/v1/sessions', {
        id, system: 'Records follow.', query_budget: 16, retention: { max_tokens: 3900 },
        source: { url: sourceUrl(key), format: 'text' },
      }), 201);
    } finally {
      server.child.kill('SIGKILL');
      await server.exited;
    }
    let previous = '';
    let roundsThatConsumed = 0;
    for (let round = 0; round < 20; round++) {
      server = await startServer({ dataDir });
      const producer = startProducer(key, produced);
      try {
        // Killed while the producer adds entries and the consumer takes them: once the consumer has taken
        // something this round, at a random moment.
        const deadline = Date.now() + WAIT_TIMEOUT_MS;
        for (;;) {
          const position = (await get(server, `/v1/sessions/${id}`)).body.source?.position;
          if (position && position !== previous) {
            previous = position;
            roundsThatConsumed++;
            break;
          }
          if (Date.now() > deadline) break;
          await sleep(10);
        }
        await sleep(Math.floor(Math.random() * 150));
      } finally {
        server.child.kill('SIGKILL');
        await server.exited;
        await producer.stop();
      }
    }
    assert.equal(roundsThatConsumed, 20, 'the consumer took records in every round before it was killed');
    console.log(`${produced.length} records produced over 20 kill -9 rounds`);

    server = await startServer({ dataDir });
    try {
      const caught = await waitCaughtUp(server, id, key);
      const held = await heldRecords(server, id, /rec-\d{5}/g);
      assert.equal(caught.records.evicted, 0, 'the window holds every record');
      assert.equal(held.length, produced.length, `held ${held.length} records of ${produced.length}`);
      assert.deepEqual(held, produced, 'no duplicate, no gap, in order');
      assert.equal(caught.records.dropped, 0);
    } finally {
      await server.stop();
    }
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
