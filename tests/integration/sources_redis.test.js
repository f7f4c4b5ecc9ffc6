// Sessions fed by a Redis stream (`"source": {"url": "redis://..."}`), against Debian's redis-server started
// here on loopback (with appendonly, as a broker that keeps its data) and redis-cli to produce: every broker's
// tests (source_suite.js), and Redis's own — /metrics, the refusals at creation, the connection the broker
// lists, and the position committed to a consumer group.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  startServer, get, post, del, expectStatus, expectError, sleep, uniqueId, WAIT_TIMEOUT_MS, freePort,
} from './harness.js';
import { REDIS_CLI, startRedis, stopBroker } from './brokers.js';
import { sourceSuite, createSourceSession, waitCaughtUp, lineProducer } from './source_suite.js';


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

const stopRedis = () => stopBroker(redis.child);

before(async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'aoi-redis-'));
  const port = await freePort();
  redis = { child: await startRedis(port, dir), port, dir };
});

after(async () => {
  if (!redis) return;
  await stopRedis();
  rmSync(redis.dir, { recursive: true, force: true });
});

const sourceUrl = (key, options = '') => `redis://127.0.0.1:${redis.port}/${key}${options}`;

// Entries added through one redis-cli ("m" the message field).
const startProducer = (key, produced, perTick) => lineProducer(
  spawn(REDIS_CLI, ['-h', '127.0.0.1', '-p', String(redis.port)], { stdio: ['pipe', 'ignore', 'inherit'] }),
  produced, { perTick, line: (m) => `XADD ${key} * m ${m}` });

const clientsNamed = (id) => cli('CLIENT', 'LIST').split('\n').filter((l) => l.includes(`name=aoi:${id}`)).length;

const driver = {
  name: 'redis',
  url: (key) => sourceUrl(key),
  produce: async (key, messages) => produce(key, messages),
  caughtUp: async (key) => {
    const end = lastId(key);
    return (s) => s.source.position === end;
  },
  startProducer,
  consumers: async (id) => clientsNamed(id),
  async outage() {
    await stopRedis();
    return { restore: async () => { redis.child = await startRedis(redis.port, redis.dir); } };  // appendonly
  },
  errorPattern: /redis 127\.0\.0\.1:\d+/,
  positionPattern: /\d+-\d+/,
  exactlyOnce: true,
};

sourceSuite(driver);

test('/metrics counts the sources: by state, messages, rejections, reconnects, lag; promtool accepts it', async () => {
  const server = await startServer({ memoryOnly: true, args: ['--metrics-per-session', '4'] });
  try {
    const key = uniqueId('metrics');
    const s = await createSourceSession(server, driver, key, { source: { format: 'json' } });
    produce(key, ['{"p": 1}', '{"p": ', '{"p": 3}']);
    await waitCaughtUp(server, driver, s.id, key);
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
    expectError(await create({ url: 'amqp://127.0.0.1:5672/ticks' }), 422, 'invalid_value', 'source.url');
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


test('with a group, the position the session holds is committed as the group\'s last-delivered id', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const key = uniqueId('group');
    const s = await createSourceSession(server, driver, key, { source: { url: sourceUrl(key, '?group=desk') } });
    produce(key, Array.from({ length: 12 }, (_, i) => `g-${i}`));
    const caught = await waitCaughtUp(server, driver, s.id, key);
    const end = lastId(key);
    const deadline = Date.now() + WAIT_TIMEOUT_MS;
    for (;;) {
      const groups = cli('XINFO', 'GROUPS', key).split('\n');
      const at = groups.indexOf('last-delivered-id');
      if (groups[groups.indexOf('name') + 1] === 'desk' && groups[at + 1] === end) break;
      assert.ok(Date.now() < deadline, `the group's last-delivered id reaches ${end}: ${groups.join(' ')}`);
      await sleep(50);
    }
    assert.equal(caught.source.position, end);
  } finally {
    await server.stop();
  }
});
