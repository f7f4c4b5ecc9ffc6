// The tests every source broker passes, run by each broker's test file against a driver for its real broker
// (started on loopback by that file):
//
//   driver = {
//     name,                      // "redis", "kafka"
//     url(topic, options),       // the session's source URL
//     createTopic(topic),        // (optional) makes the topic, where the broker needs that
//     produce(topic, messages),  // adds the messages, in order, and returns once the broker holds them
//     caughtUp(topic) -> (session JSON) => bool  // whether the session has read everything produced so far
//     startProducer(topic, produced) -> { stop() }  // keeps adding "rec-NNNNN" messages (pushed onto `produced`)
//                                                   // until stop() resolves with every one held by the broker
//     outage() -> { restore() }  // the broker stops answering, then answers again keeping what it held
//     consumers(id),             // (optional) how many connections of the session's consumer the broker lists
//     errorPattern,              // what the session's source error says while the broker is away
//     positionPattern,           // what a message's position looks like in an error event
//     exactlyOnce,               // the broker replays from a position: the kill -9 rounds hold it to that
//   }
//
// Records produced are ingested in order and answered; messages that do not decode are counted and reported
// while the consumer goes on; under the default `lag` overflow a queue far smaller than the backlog drops
// nothing; a deleted session's consumer ends; a broker outage mid-stream is reported and survived; and, where
// the broker replays from a position, 20 rounds of kill -9 mid-stream leave the session holding exactly what
// was produced, in order, with no duplicate and no gap.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import {
  startServer, tempDataDir, get, post, del, expectStatus, openSSE, sleep, uniqueId, waitSession, WAIT_TIMEOUT_MS,
} from './harness.js';

export async function createSourceSession(server, driver, topic, extra = {}) {
  const res = await post(server, '/v1/sessions', {
    id: uniqueId('src'), system: 'Records follow.', query_budget: 32, retention: { max_tokens: 3000 },
    ...extra, source: { url: driver.url(topic), format: 'text', ...(extra.source ?? {}) },
  });
  expectStatus(res, 201);
  return res.body;
}

// Waits until the session holds everything produced to the topic so far.
export async function waitCaughtUp(server, driver, id, topic) {
  const caughtUp = await driver.caughtUp(topic);
  return waitSession(server, id, (s) => s.source && caughtUp(s) && s.last_seq_ingested === s.last_seq_pushed &&
    s.pending === 0, `caught up with ${topic}`);
}

// The records the session holds, read from what the model reads.
export async function heldRecords(server, id, pattern) {
  const ctx = await get(server, `/v1/sessions/${id}/context`);
  expectStatus(ctx, 200);
  return [...ctx.body.text.matchAll(pattern)].map((m) => m[0]);
}

async function metric(server, name, labels = '') {
  const text = (await get(server, '/metrics')).text;
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  assert.ok(line, `${name}${labels} in /metrics`);
  return Number(line.split(' ').at(-1));
}

// Starts a producer that writes "rec-NNNNN" messages as lines to `child` (a broker's command-line client
// reading its standard input), `perTick` every 15 ms, pushing each onto `produced`; stop() ends the input and
// resolves once the client has exited after handing every message to the broker.
export function lineProducer(child, produced, { perTick = 3, line = (m) => m } = {}) {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const timer = setInterval(() => {
    const batch = [];
    for (let i = 0; i < perTick; i++) batch.push(`rec-${String(produced.length + batch.length).padStart(5, '0')}`);
    produced.push(...batch);
    child.stdin.write(batch.map((m) => `${line(m)}\n`).join(''));
  }, 15);
  return {
    async stop() {
      clearInterval(timer);
      child.stdin.end();
      assert.equal(await exited, 0, `${child.spawnfile} handed every message to the broker`);
    },
  };
}

// Creates session `id` with the topic as its source in `dataDir`, then runs 20 rounds of: start the server and
// a producer, and once the consumer has taken something this round, kill -9 the server at a random moment
// (after `downMs` more of producing while it is down). `produced` ends as every message produced. One message
// every 15 ms by default: what 20 rounds produce fits the session's window even where a sanitizer makes each
// start slow.
export async function killRounds(driver, { dataDir, id, topic, produced, perTick = 1, downMs = 0 }) {
  const kill = async (server) => {
    server.child.kill('SIGKILL');
    await server.exited;
  };
  let server = await startServer({ dataDir });
  try {
    expectStatus(await post(server, '/v1/sessions', {
      id, system: 'Records follow.', query_budget: 16, retention: { max_tokens: 3900 },
      source: { url: driver.url(topic), format: 'text' },
    }), 201);
  } finally {
    await kill(server);
  }
  let previous = '';
  let roundsThatConsumed = 0;
  for (let round = 0; round < 20; round++) {
    server = await startServer({ dataDir });
    const producer = driver.startProducer(topic, produced, perTick);
    try {
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
      await kill(server);
      await sleep(downMs);
      await producer.stop();
    }
  }
  assert.equal(roundsThatConsumed, 20, 'the consumer took records in every round before it was killed');
}

export function sourceSuite(driver) {
  const name = driver.name;

  test(`${name}: produced records are ingested in order and answered; the session shows its source`, async () => {
    const server = await startServer({ memoryOnly: true });
    try {
      const topic = uniqueId('ticks');
      await driver.createTopic?.(topic);
      const s = await createSourceSession(server, driver, topic);
      assert.equal(s.source.url, driver.url(topic));
      assert.equal(s.source.overflow, 'lag');
      const messages = Array.from({ length: 40 }, (_, i) => `tick-${String(i).padStart(3, '0')} price=${100 + i}`);
      await driver.produce(topic, messages);
      const caught = await waitCaughtUp(server, driver, s.id, topic);
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

  test(`${name}: messages that do not decode are counted and reported, and the consumer goes on`, async () => {
    const server = await startServer({ memoryOnly: true });
    try {
      const topic = uniqueId('json');
      await driver.createTopic?.(topic);
      const s = await createSourceSession(server, driver, topic, { source: { format: 'json' } });
      const events = await openSSE(server, `/v1/sessions/${s.id}/events`);
      try {
        await driver.produce(topic, ['{"p": 1}', '{"p": ', '{"p": 3, "meta": {"unit": "C"}, "ok": true}']);
        const error = await events.reader.waitFor((e) => e.event === 'error', 'an error event');
        assert.match(error.data, new RegExp(`source message ${driver.positionPattern.source}`));
      } finally {
        events.reader.close();
      }
      const caught = await waitCaughtUp(server, driver, s.id, topic);
      assert.equal(caught.source.rejected, 1);
      assert.equal(caught.records.ingested, 2);
      assert.deepEqual(await heldRecords(server, s.id, /p=\d[^\n]*/g), ['p=1', 'p=3 meta.unit=C ok=true']);
    } finally {
      await server.stop();
    }
  });

  test(`${name}: under lag a queue far smaller than the backlog drops nothing; a deleted session's consumer ends`,
    async () => {
      const server = await startServer({ memoryOnly: true, args: ['--ring-capacity', '4'] });
      try {
        const topic = uniqueId('backlog');
        await driver.createTopic?.(topic);
        const messages = Array.from({ length: 300 }, (_, i) => `row-${String(i).padStart(4, '0')}`);
        const s = await createSourceSession(server, driver, topic);
        await driver.produce(topic, messages);
        await waitCaughtUp(server, driver, s.id, topic);
        // Every record accounted for (the counters follow the position by a moment under a sanitizer's timings).
        const caught = await waitSession(server, s.id, (x) => x.records.ingested + x.records.dropped >= 300,
          'all 300 records accounted for');
        assert.equal(caught.records.dropped, 0);
        assert.equal(caught.records.ingested, 300);
        assert.deepEqual(await heldRecords(server, s.id, /row-\d{4}/g), messages.slice(-caught.regions.records));
        assert.equal(caught.regions.records + caught.records.evicted, 300);

        assert.equal(await metric(server, 'aoi_sources', '{state="connected"}'), 1);
        assert.equal(await driver.consumers?.(s.id) ?? 1, 1, 'the consumer is connected');
        expectStatus(await del(server, `/v1/sessions/${s.id}`), 200);
        const deadline = Date.now() + WAIT_TIMEOUT_MS;
        while (await metric(server, 'aoi_sources', '{state="connected"}') > 0 || (await driver.consumers?.(s.id) ?? 0) > 0) {
          assert.ok(Date.now() < deadline, 'the deleted session\'s consumer is still connected');
          await sleep(50);
        }
        assert.equal(await metric(server, 'aoi_source_messages_total'), 300, 'its counts stay in the counters');
      } finally {
        await server.stop();
      }
    });

  test(`${name}: the broker away mid-stream: the consumer says so, reconnects and goes on where it was`, async () => {
    const server = await startServer({ memoryOnly: true });
    try {
      const topic = uniqueId('restart');
      await driver.createTopic?.(topic);
      const s = await createSourceSession(server, driver, topic);
      const first = Array.from({ length: 10 }, (_, i) => `before-${i}`);
      await driver.produce(topic, first);
      await waitCaughtUp(server, driver, s.id, topic);
      const events = await openSSE(server, `/v1/sessions/${s.id}/events`);
      const outage = await driver.outage();
      const down = await waitSession(server, s.id, (x) => x.source.connected === false && x.source.error,
        'the consumer notices the broker is gone');
      assert.match(down.source.error, driver.errorPattern);
      try {
        const lost = await events.reader.waitFor((e) => e.event === 'error' && /connecting again/.test(e.data),
          'an error event saying the source is lost');
        assert.equal(JSON.parse(lost.data).field, 'source.url');
      } finally {
        events.reader.close();
      }
      await outage.restore();
      const later = Array.from({ length: 10 }, (_, i) => `after-${i}`);
      await driver.produce(topic, later);
      const caught = await waitCaughtUp(server, driver, s.id, topic);
      assert.equal(caught.source.connected, true);
      assert.ok(caught.source.reconnects >= 1, JSON.stringify(caught.source));
      assert.deepEqual(await heldRecords(server, s.id, /(before|after)-\d/g), [...first, ...later]);
    } finally {
      await server.stop();
    }
  });

  if (!driver.exactlyOnce) return;
  test(`${name}: 20 rounds of kill -9 mid-stream: the session holds exactly what was produced, in order`,
    async () => {
      const dataDir = tempDataDir();
      const topic = uniqueId('crash');
      await driver.createTopic?.(topic);
      const id = uniqueId('crash');
      const produced = [];
      try {
        await killRounds(driver, { dataDir, id, topic, produced });
        console.log(`${name}: ${produced.length} records produced over 20 kill -9 rounds`);

        const server = await startServer({ dataDir });
        try {
          const caught = await waitCaughtUp(server, driver, id, topic);
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
}
