// Sessions fed by a NATS JetStream stream (`"source": {"url": "nats://HOST/SUBJECT?stream=NAME"}`), against
// Debian's nats-server started here on loopback with JetStream (file storage, kept across its restart), and the
// npm client `nats` to make streams and publish (each message acknowledged by the stream): every broker's tests
// (source_suite.js, with the kill -9 rounds: the position is the stream sequence, so a restart resumes exactly
// after the newest record held), and NATS's own — the refusals at creation, start=$, a subject filter, the
// consumer the session leaves on the stream (none once deleted), a token read from a file.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { connect, StringCodec } from 'nats';
import {
  startServer, get, post, del, expectStatus, expectError, sleep, uniqueId, waitSession, WAIT_TIMEOUT_MS, freePort,
} from './harness.js';
import { startNats, stopBroker } from './brokers.js';
import { sourceSuite, createSourceSession, waitCaughtUp, heldRecords } from './source_suite.js';

const sc = StringCodec();
let nats = null;    // { child, port, monitorPort, dir }
let client = null;  // { nc, js, jsm }: the test's own connection

async function openClient() {
  const nc = await connect({ servers: `127.0.0.1:${nats.port}` });
  client = { nc, js: nc.jetstream(), jsm: await nc.jetstreamManager() };
}

async function closeClient() {
  if (!client) return;
  await client.nc.close();
  client = null;
}

before(async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'aoi-nats-'));
  const port = await freePort();
  const monitorPort = await freePort();
  nats = { child: await startNats(port, dir, { monitorPort }), port, monitorPort, dir };
  await openClient();
});

after(async () => {
  if (!nats) return;
  await closeClient();
  await stopBroker(nats.child);
  rmSync(nats.dir, { recursive: true, force: true });
});

const sourceUrl = (subject, options = `?stream=${streamOf(subject)}`) =>
  `nats://127.0.0.1:${nats.port}/${subject}${options}`;
// Each test's topic is a stream of its own, named as its one subject (uniqueId: letters, digits and '-').
const streamOf = (subject) => subject.split('.')[0];

async function createStream(name, subjects = [name]) {
  await client.jsm.streams.add({ name, subjects });
}

// Publishes the messages in order over one connection, each acknowledged by the stream; the acks' stream
// sequences.
async function produce(subject, messages) {
  const acks = await Promise.all(messages.map((m) => client.js.publish(subject, sc.encode(m))));
  return acks.map((a) => a.seq);
}

// The connections the server lists under the session's name.
async function connectionsNamed(name) {
  const res = await fetch(`http://127.0.0.1:${nats.monitorPort}/connz?limit=1024`);
  assert.equal(res.status, 200);
  return ((await res.json()).connections ?? []).filter((c) => c.name === name).length;
}

async function consumersOf(stream) {
  return (await client.jsm.consumers.list(stream).next()).length;
}

// Publishes `perTick` "rec-NNNNN" messages every 15 ms, pushed onto `produced`; stop() resolves once the stream
// has acknowledged every one.
function startProducer(subject, produced, perTick) {
  const acks = [];
  const timer = setInterval(() => {
    for (let i = 0; i < perTick; i++) {
      const m = `rec-${String(produced.length).padStart(5, '0')}`;
      produced.push(m);
      acks.push(client.js.publish(subject, sc.encode(m)));
    }
  }, 15);
  return {
    async stop() {
      clearInterval(timer);
      const done = await Promise.allSettled(acks);
      const failed = done.filter((d) => d.status === 'rejected');
      assert.equal(failed.length, 0, `every message acknowledged: ${failed[0]?.reason}`);
    },
  };
}

const driver = {
  name: 'nats',
  url: (subject) => sourceUrl(subject),
  createTopic: (subject) => createStream(subject),
  produce: async (subject, messages) => { await produce(subject, messages); },
  caughtUp: async (subject) => {
    const end = String((await client.jsm.streams.info(streamOf(subject))).state.last_seq);
    return (s) => s.source.position === end;
  },
  startProducer,
  consumers: (id) => connectionsNamed(`aoi:${id}`),
  async outage() {
    await closeClient();
    await stopBroker(nats.child);
    return {
      restore: async () => {
        nats.child = await startNats(nats.port, nats.dir, { monitorPort: nats.monitorPort });
        await openClient();
      },
    };
  },
  errorPattern: /nats 127\.0\.0\.1:\d+/,
  positionPattern: /\d+/,
  exactlyOnce: true,
};

sourceSuite(driver);

test('nats: a source that cannot be read is refused at creation naming source.url, and why', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const create = (url) => post(server, '/v1/sessions', { source: { url } });
    const stream = uniqueId('refusals');
    await createStream(stream, [`${stream}.a.*`]);
    const refused = async (url, pattern, status = 422) => {
      const res = await create(url);
      if (status === 422) expectError(res, 422, 'invalid_value', 'source.url');
      assert.equal(res.status, status, res.text);
      assert.equal(res.body.error.field, 'source.url', res.text);
      assert.match(res.body.error.message, pattern);
    };
    await refused(sourceUrl(`${stream}.a.x`, ''), /stream=NAME/);
    await refused(sourceUrl(`${stream}.a.x`, '?stream=no-such-stream'), /stream 'no-such-stream' does not exist/);
    await refused(sourceUrl(`${stream}.b.x`), new RegExp(`holds ${stream}\\.a\\.\\*, not all of '${stream}\\.b\\.x'`));
    await refused(sourceUrl(`${stream}.a.>`), /not all of/);  // deeper than the stream's `*`
    await refused(sourceUrl(`${stream}.a.x`, `?stream=${stream}&group=desk`), /takes no group/);
    await refused(`nats://127.0.0.1:${await freePort()}/${stream}.a.x?stream=${stream}`, /nats 127\.0\.0\.1:\d+/, 503);
    assert.equal((await get(server, '/v1/sessions')).body.sessions.length, 0, 'nothing was created');
    assert.equal(await consumersOf(stream), 0, 'the checks left no consumer on the stream');
  } finally {
    await server.stop();
  }
});

test('nats: start=$ reads only what is published after the session is created', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const subject = uniqueId('new');
    await createStream(subject);
    await produce(subject, ['old-0', 'old-1', 'old-2']);
    const s = await createSourceSession(server, driver, subject, {
      source: { url: sourceUrl(subject, `?stream=${subject}&start=$`) },
    });
    // The consumer starts after the stream's end at the time it connects (on its own thread, once the session is
    // made): what is published from then on is the session's.
    await waitSession(server, s.id, (x) => x.source.connected, 'the consumer connects');
    const fresh = ['new-0', 'new-1', 'new-2', 'new-3'];
    await produce(subject, fresh);
    const caught = await waitSession(server, s.id, (x) => x.source.messages >= fresh.length && x.pending === 0 &&
      x.last_seq_ingested === x.last_seq_pushed, 'the new messages read');
    assert.equal(caught.source.messages, fresh.length);
    assert.deepEqual(await heldRecords(server, s.id, /(old|new)-\d/g), fresh);
  } finally {
    await server.stop();
  }
});

test('nats: a subject filter takes only its subjects, in stream order; the position is the stream sequence; ' +
  'the consumer on the stream goes with the session', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const stream = uniqueId('plant');
    await createStream(stream, [`${stream}.>`]);
    const s = await createSourceSession(server, driver, `${stream}.*.temp`, {
      source: { url: sourceUrl(`${stream}.*.temp`, `?stream=${stream}`) },
    });
    const seqs = [];
    const want = [];
    for (let i = 0; i < 6; i++) {
      const line = `${stream}.line${i % 2}`;
      const [temp] = await produce(`${line}.temp`, [`temp-${i}`]);
      await produce(`${line}.pressure`, [`pressure-${i}`]);
      await produce(`${line}.temp.raw`, [`raw-${i}`]);  // one token more than the filter: not its
      seqs.push(temp);
      want.push(`temp-${i}`);
    }
    assert.deepEqual(seqs, [1, 4, 7, 10, 13, 16], 'the stream numbers every message, the filter\'s and the others');
    const caught = await waitSession(server, s.id, (x) => x.source.position === String(seqs.at(-1)) &&
      x.pending === 0 && x.last_seq_ingested === x.last_seq_pushed, `position ${seqs.at(-1)}`);
    assert.equal(caught.source.messages, 6);
    assert.equal(caught.source.lag_records, 0, 'nothing of the filter after the newest message read');
    assert.deepEqual(await heldRecords(server, s.id, /(temp|pressure|raw)-\d/g), want);

    assert.equal(await consumersOf(stream), 1, 'the session reads through one consumer');
    expectStatus(await del(server, `/v1/sessions/${s.id}`), 200);
    const deadline = Date.now() + WAIT_TIMEOUT_MS;
    while (await consumersOf(stream) > 0 || await connectionsNamed(`aoi:${s.id}`) > 0) {
      assert.ok(Date.now() < deadline, 'the deleted session\'s consumer or connection is still on the server');
      await sleep(50);
    }
  } finally {
    await server.stop();
  }
});

test('nats: a server that asks for a token gets the one the URL names from a file; without it, refused', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'aoi-nats-token-'));
  const port = await freePort();
  const child = await startNats(port, path.join(dir, 'data'), { token: 's3cret-token' });
  const server = await startServer({ memoryOnly: true });
  try {
    const tokenFile = path.join(dir, 'token');
    writeFileSync(tokenFile, 's3cret-token\n');
    const nc = await connect({ servers: `127.0.0.1:${port}`, token: 's3cret-token' });
    try {
      const subject = uniqueId('token');
      await (await nc.jetstreamManager()).streams.add({ name: subject, subjects: [subject] });
      const url = (options) => `nats://127.0.0.1:${port}/${subject}?stream=${subject}${options}`;
      const refused = await post(server, '/v1/sessions', { source: { url: url('') } });
      assert.equal(refused.status, 503, refused.text);
      assert.equal(refused.body.error.field, 'source.url');
      assert.match(refused.body.error.message, /nats 127\.0\.0\.1:\d+: .*(authorization|authentication)/i);

      const s = await createSourceSession(server, driver, subject, {
        source: { url: url(`&token_file=${encodeURIComponent(tokenFile)}`) },
      });
      assert.ok(!JSON.stringify(s).includes('s3cret'), 'the token is nowhere in the session');
      const js = nc.jetstream();
      for (const m of ['t-0', 't-1']) await js.publish(subject, sc.encode(m));
      await waitSession(server, s.id, (x) => x.source.messages === 2 && x.last_seq_ingested === x.last_seq_pushed &&
        x.pending === 0, 'both read');
      assert.deepEqual(await heldRecords(server, s.id, /t-\d/g), ['t-0', 't-1']);
    } finally {
      await nc.close();
    }
  } finally {
    await server.stop();
    await stopBroker(child);
    rmSync(dir, { recursive: true, force: true });
  }
});

test('nats: /metrics counts the source and its lag in records', async () => {
  const server = await startServer({ memoryOnly: true, args: ['--metrics-per-session', '4'] });
  try {
    const subject = uniqueId('metrics');
    await createStream(subject);
    const s = await createSourceSession(server, driver, subject, { source: { format: 'json' } });
    await produce(subject, ['{"p": 1}', '{"p": ', '{"p": 3}']);
    await waitCaughtUp(server, driver, s.id, subject);
    const text = (await get(server, '/metrics')).text;
    const value = (name, labels = '') => {
      const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
      assert.ok(line, `${name}${labels} in /metrics`);
      return Number(line.split(' ').at(-1));
    };
    assert.equal(value('aoi_sources', '{state="connected"}'), 1);
    assert.equal(value('aoi_source_messages_total'), 3);
    assert.equal(value('aoi_source_rejected_total'), 1);
    assert.equal(value('aoi_session_source_connected', `{session="${s.id}",tenant=""}`), 1);
    const session = (await get(server, `/v1/sessions/${s.id}`)).body;
    assert.equal(session.source.lag_records, 0, JSON.stringify(session.source));
  } finally {
    await server.stop();
  }
});

test('nats: a consumer lost on the server is made again from the session\'s position, nothing read twice',
  async () => {
    const server = await startServer({ memoryOnly: true });
    try {
      const subject = uniqueId('lost');
      await createStream(subject);
      await produce(subject, ['old-0', 'old-1', 'old-2']);
      // start=$: the consumer starts after old-2 and has received nothing when it is lost; libnats then makes
      // it again from the stream's first message (it knows no sequence yet), which aoi recognises.
      const s = await createSourceSession(server, driver, subject, {
        source: { url: sourceUrl(subject, `?stream=${subject}&start=$`) },
      });
      await waitSession(server, s.id, (x) => x.source.connected, 'the consumer connects');
      const [first] = await client.jsm.consumers.list(subject).next();
      assert.ok(first, 'the session\'s consumer is on the stream');
      await client.jsm.consumers.delete(subject, first.name);
      // libnats notices the missing heartbeats (two of its 5 s intervals) and makes a consumer again.
      const deadline = Date.now() + WAIT_TIMEOUT_MS;
      for (;;) {
        const now = await client.jsm.consumers.list(subject).next();
        if (now.length > 0 && now[0].name !== first.name) break;
        assert.ok(Date.now() < deadline, 'the consumer is made again');
        await sleep(100);
      }
      const fresh = ['new-0', 'new-1', 'new-2'];
      await produce(subject, fresh);
      const caught = await waitCaughtUp(server, driver, s.id, subject);
      assert.deepEqual(await heldRecords(server, s.id, /(old|new)-\d/g), fresh);
      assert.equal(caught.source.messages, fresh.length, 'nothing before the position handed to the session');
      assert.equal(caught.source.connected, true);
    } finally {
      await server.stop();
    }
  });

test('nats: a stream deleted under the session is reported; made again, it is read again', async () => {
  const server = await startServer({ memoryOnly: true });
  try {
    const subject = uniqueId('deleted');
    await createStream(subject);
    const s = await createSourceSession(server, driver, subject);
    await produce(subject, ['a-0', 'a-1']);
    await waitCaughtUp(server, driver, s.id, subject);
    await client.jsm.streams.delete(subject);
    const down = await waitSession(server, s.id, (x) => x.source.connected === false,
      'the consumer notices the stream is gone');
    assert.match(down.source.error, new RegExp(`nats 127\\.0\\.0\\.1:\\d+: JetStream stream '${subject}'`));
    // A stream made again numbers from 1: the session, after sequence 2, reads from 3 on.
    await createStream(subject);
    await produce(subject, ['b-0', 'b-1', 'b-2']);
    await waitCaughtUp(server, driver, s.id, subject);
    assert.deepEqual(await heldRecords(server, s.id, /[ab]-\d/g), ['a-0', 'a-1', 'b-2']);
  } finally {
    await server.stop();
  }
});
