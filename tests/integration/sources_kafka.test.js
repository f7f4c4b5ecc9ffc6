// Sessions fed by a Kafka partition (`"source": {"url": "kafka://..."}`). Debian 12 packages no Kafka broker:
// the broker here is librdkafka's mock cluster (the Kafka-protocol broker librdkafka's own test suite uses),
// run by the aoi-kafka-mock helper on a loopback TCP port, and messages are produced with Debian's kcat (and,
// for a steady stream, the helper's own producer), speaking the Kafka protocol to it as to any broker. Every broker's tests (source_suite.js), and Kafka's own —
// the group offsets committed, a key filter on a partition, lag in records, the refusals at creation.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  startServer, get, post, expectError, sleep, uniqueId, waitSession, WAIT_TIMEOUT_MS, freePort,
} from './harness.js';
import { KCAT, startKafkaMock } from './brokers.js';
import { sourceSuite, createSourceSession, waitCaughtUp, heldRecords } from './source_suite.js';


let kafka = null; // startKafkaMock()

before(async () => {
  kafka = await startKafkaMock();
});

after(async () => {
  if (kafka) await kafka.stop();
});

const ask = (line) => kafka.ask(line);

const sourceUrl = (topic, options = '') => `kafka://${kafka.bootstrap}/${topic}${options}`;

// Produces the messages to partition `partition` in order (with `key:` prefixes split off as keys when keyed),
// returning once kcat has had every one acknowledged.
function produce(topic, messages, { partition = 0, keyed = false } = {}) {
  const args = ['-P', '-b', kafka.bootstrap, '-t', topic, '-p', String(partition), '-X', 'acks=all'];
  if (keyed) args.push('-K', ':');
  const r = spawnSync(KCAT, args, { input: messages.join('\n') + '\n', encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, `kcat ${args.join(' ')}: ${r.stderr}`);
}

// The offset of the partition's newest message ("" when it has none).
async function endOf(topic, partition = 0) {
  const high = Number(await ask(`end ${topic} ${partition}`));
  return high > 0 ? String(high - 1) : '';
}

// A producer that keeps adding "rec-NNNNN" messages (perTick every 15 ms) through the helper's own producer,
// each sent at once (kcat -P reads its input in blocks, so a held-open kcat would produce in bursts); stop()
// resolves once every one is acknowledged (so `produced` is exactly what the partition holds).
function startProducer(topic, produced, perTick = 3) {
  let last = Promise.resolve();
  const timer = setInterval(() => {
    for (let i = 0; i < perTick; i++) {
      const m = `rec-${String(produced.length).padStart(5, '0')}`;
      produced.push(m);
      last = ask(`produce ${topic} 0 ${m}`);
    }
  }, 15);
  return {
    async stop() {
      clearInterval(timer);
      await last;
    },
  };
}

const driver = {
  name: 'kafka',
  url: (topic) => sourceUrl(topic),
  createTopic: (topic) => ask(`topic ${topic} 1`),
  produce: async (topic, messages) => produce(topic, messages),
  caughtUp: async (topic) => {
    const end = await endOf(topic);
    return (s) => s.source.position === end;
  },
  startProducer,
  async outage() {
    await ask('down');
    return { restore: () => ask('up') };
  },
  errorPattern: /kafka 127\.0\.0\.1:\d+/,
  positionPattern: /\d+/,
  exactlyOnce: true,
};

sourceSuite(driver);

test('kafka: the position the session holds is committed to the group\'s offsets; lag is told in records',
  async () => {
    const server = await startServer({ memoryOnly: true, args: ['--ring-capacity', '4'] });
    try {
      const topic = uniqueId('group');
      await driver.createTopic(topic);
      const messages = Array.from({ length: 200 }, (_, i) => `g-${String(i).padStart(3, '0')}`);
      produce(topic, messages);
      const s = await createSourceSession(server, driver, topic);
      // Under lag with a queue of 4, the consumer is behind for a while: it says by how many messages.
      const behind = await waitSession(server, s.id, (x) => x.source.lag_records > 0, 'lag in records');
      assert.ok(behind.source.lag_records <= 200, JSON.stringify(behind.source));
      const caught = await waitCaughtUp(server, driver, s.id, topic);
      assert.equal(caught.source.lag_records, 0);
      assert.equal(caught.records.ingested, 200);
      // kafka-consumer-groups would show the group "aoi.<session>" at the partition's end.
      const deadline = Date.now() + WAIT_TIMEOUT_MS;
      while (await ask(`committed aoi.${s.id} ${topic} 0`) !== '200') {
        assert.ok(Date.now() < deadline, 'the group\'s committed offset reaches the end (200)');
        await sleep(50);
      }
      const res = await get(server, '/metrics');
      assert.match(res.text, /\naoi_source_lag_records 0\n/);
    } finally {
      await server.stop();
    }
  });

test('kafka: a key and a partition pick the session\'s messages; a named group gets the commits', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const topic = uniqueId('keys');
    await ask(`topic ${topic} 2`);
    const s = await createSourceSession(server, driver, topic,
      { source: { url: sourceUrl(topic, '?partition=1&key=BTC&group=desk') } });
    produce(topic, ['BTC:p0-btc'], { partition: 0, keyed: true });
    produce(topic, ['BTC:btc-1', 'ETH:eth-1', 'BTC:btc-2', 'ETH:eth-2', 'BTC:btc-3'], { partition: 1, keyed: true });
    // The newest BTC message on partition 1 is at offset 4.
    const caught = await waitSession(server, s.id, (x) => x.source.position === '4' && x.pending === 0 &&
      x.last_seq_ingested === x.last_seq_pushed, 'the BTC messages taken');
    assert.equal(caught.records.ingested, 3);
    assert.deepEqual(await heldRecords(server, s.id, /(btc|eth|p0)-[\w-]+/g), ['btc-1', 'btc-2', 'btc-3']);
    const deadline = Date.now() + WAIT_TIMEOUT_MS;
    while (await ask(`committed desk ${topic} 1`) !== '5') {
      assert.ok(Date.now() < deadline, 'the named group\'s committed offset reaches 5');
      await sleep(50);
    }
  } finally {
    await server.stop();
  }
});

test('kafka: a partition that does not exist or a broker that cannot be reached is refused naming the source',
  async () => {
    const server = await startServer({ memoryOnly: true });
    try {
      const topic = uniqueId('refused');
      await driver.createTopic(topic);
      const create = (source) => post(server, '/v1/sessions', { source });
      expectError(await create({ url: sourceUrl(topic, '?partition=3') }), 422, 'invalid_value', 'source.url');
      expectError(await create({ url: sourceUrl(topic, '?colour=blue') }), 422, 'invalid_value', 'source.url');
      expectError(await create({ url: `kafka://user:pw@${kafka.bootstrap}/${topic}` }), 422, 'invalid_value',
        'source.url');
      const unreachable = await create({ url: `kafka://127.0.0.1:${await freePort()}/${topic}` });
      assert.ok(unreachable.status >= 400, unreachable.text);
      assert.equal(unreachable.body.error.field, 'source.url', unreachable.text);
      assert.match(unreachable.body.error.message, /kafka 127\.0\.0\.1:\d+/);
      assert.equal((await get(server, '/v1/sessions')).body.sessions.length, 0, 'nothing was created');
    } finally {
      await server.stop();
    }
  });
