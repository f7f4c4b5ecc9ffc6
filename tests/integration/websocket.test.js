// The session WebSocket: push and query frames, answers with ref, event frames, bad frames.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import {
  useServer, get, del, expectStatus, createSession, getSession, waitIngested, textRecords, assertAnswerShape,
  assertErrorObject, assertNonNegInt, expectAlive, waitSession, withTimeout,
} from './harness.js';

const ctx = useServer();

// A WebSocket with a queue of parsed incoming frames.
class Client {
  static async open(server, id, { key } = {}) {
    const k = key === undefined ? server.apiKey : key;
    const ws = new WebSocket(`ws://${server.host}:${server.port}/v1/sessions/${encodeURIComponent(id)}/ws`, {
      headers: k ? { authorization: `Bearer ${k}` } : {},
    });
    const c = new Client(ws);
    await withTimeout(new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
      ws.once('unexpected-response', (req, res) => reject(Object.assign(new Error(`handshake answered ${res.statusCode}`),
        { statusCode: res.statusCode })));
    }), 30_000, 'WebSocket open');
    return c;
  }

  constructor(ws) {
    this.ws = ws;
    this.frames = [];
    this.waiters = [];
    this.closed = false;
    this.nonText = [];
    ws.on('message', (data, isBinary) => {
      if (isBinary) {
        this.nonText.push(data);
        return;
      }
      let f;
      try {
        f = JSON.parse(data.toString('utf8'));
      } catch {
        f = { unparsable: data.toString('utf8') };
      }
      this.frames.push(f);
      this.wake();
    });
    ws.on('close', (code) => {
      this.closed = true;
      this.closeCode = code;
      this.wake();
    });
    ws.on('error', () => {});
  }

  wake() {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  send(obj) {
    this.ws.send(typeof obj === 'string' ? obj : JSON.stringify(obj));
  }

  // Waits for a frame matching pred and removes it from the queue.
  async expect(pred, what, timeout = 60_000) {
    const deadline = Date.now() + timeout;
    for (;;) {
      const i = this.frames.findIndex(pred);
      if (i >= 0) return this.frames.splice(i, 1)[0];
      if (this.closed) throw new Error(`socket closed (${this.closeCode}) before ${what}; frames: ${JSON.stringify(this.frames)}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no ${what} within ${timeout} ms; frames: ${JSON.stringify(this.frames).slice(0, 2000)}`);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  close() {
    this.ws.close();
  }
}

function assertPushed(f, accepted) {
  const c = JSON.stringify(f);
  assert.equal(f.op, 'pushed', c);
  assert.equal(f.accepted, accepted, c);
  assertNonNegInt(f.first_seq, 'first_seq');
  assertNonNegInt(f.last_seq, 'last_seq');
  assertNonNegInt(f.dropped, 'dropped');
  assert.equal(f.last_seq - f.first_seq + 1, accepted, c);
}

test('push frames are acknowledged with the 202 body and produce event frames', async () => {
  const s = await createSession(ctx.server);
  const c = await Client.open(ctx.server, s.id);
  try {
    c.send({ op: 'push', records: textRecords(3) });
    const p1 = await c.expect((f) => f.op === 'pushed', 'a pushed frame');
    assertPushed(p1, 3);
    c.send({ op: 'push', records: textRecords(2, 3) });
    const p2 = await c.expect((f) => f.op === 'pushed', 'a second pushed frame');
    assertPushed(p2, 2);
    assert.equal(p2.first_seq, p1.last_seq + 1);

    const ev = await c.expect((f) => f.op === 'event' && f.event === 'data_updated' && f.data?.last_seq >= p2.last_seq,
      'a data_updated event frame');
    assert.ok(Number.isInteger(ev.id), `event frames carry a numeric id: ${JSON.stringify(ev)}`);
    assertNonNegInt(ev.data.version, 'data.version');
    const sess = await waitIngested(ctx.server, s.id, p2.last_seq);
    assert.equal(sess.records.pushed, 5);
    assert.equal(ev.data.version, sess.data_version);
  } finally {
    c.close();
  }
});

test('query frames get answer frames carrying their ref', async () => {
  const s = await createSession(ctx.server);
  const c = await Client.open(ctx.server, s.id);
  try {
    c.send({ op: 'push', records: textRecords(4) });
    const p = await c.expect((f) => f.op === 'pushed', 'a pushed frame');
    c.send({ op: 'query', question: 'Trend?', max_tokens: 6, min_seq: p.last_seq, wait_ms: 30_000, ref: 'q-1' });
    c.send({ op: 'query', question: 'Volume?', max_tokens: 3, ref: 'q-2' });
    const a1 = await c.expect((f) => f.op === 'answer' && f.ref === 'q-1', 'the answer to q-1');
    assertAnswerShape(a1, { maxTokens: 6 });
    const a2 = await c.expect((f) => f.op === 'answer' && f.ref === 'q-2', 'the answer to q-2');
    assertAnswerShape(a2, { maxTokens: 3 });
    const sess = await getSession(ctx.server, s.id);
    assert.equal(a1.data_version, sess.data_version, 'min_seq over the socket sees the pushed records');

    // Greedy answers over the socket equal the HTTP answers.
    c.send({ op: 'query', question: 'Same?', max_tokens: 8, temperature: 0, ref: 'g' });
    const g = await c.expect((f) => f.op === 'answer' && f.ref === 'g', 'the answer to g');
    const res = await fetch(`${ctx.server.url}/v1/sessions/${s.id}/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(ctx.server.apiKey ? { authorization: `Bearer ${ctx.server.apiKey}` } : {}) },
      body: JSON.stringify({ question: 'Same?', max_tokens: 8, temperature: 0 }),
    });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).answer, g.answer);
  } finally {
    c.close();
  }
});

test('bad frames get error frames and the socket stays usable', async () => {
  const s = await createSession(ctx.server);
  const c = await Client.open(ctx.server, s.id);
  try {
    c.send('this is not json');
    const e1 = await c.expect((f) => f.op === 'error', 'an error frame for non-JSON');
    assertErrorObject(e1, 'malformed_request');

    c.send('[1, 2, 3]');
    const e2 = await c.expect((f) => f.op === 'error', 'an error frame for a non-object');
    assertErrorObject(e2);

    c.send({ op: 'no-such-op' });
    const e3 = await c.expect((f) => f.op === 'error', 'an error frame for an unknown op');
    assertErrorObject(e3, 'invalid_value', 'op');

    c.send({ op: 'query', question: 'q', max_tokens: -1, ref: 'bad-1' });
    const e4 = await c.expect((f) => f.op === 'error', 'an error frame for a bad query');
    assertErrorObject(e4, 'invalid_value', 'max_tokens');
    assert.equal(e4.ref, 'bad-1', 'the error carries the ref of the bad query');

    c.send({ op: 'push', records: ['ok', 7] });
    const e5 = await c.expect((f) => f.op === 'error', 'an error frame for a bad record');
    assertErrorObject(e5, 'invalid_value', /^records\[1\]/);

    c.send({ op: 'query', question: 'q', bogus_field: true, ref: 'bad-2' });
    const e6 = await c.expect((f) => f.op === 'error', 'an error frame for an unknown field');
    assertErrorObject(e6, 'invalid_value', 'bogus_field');

    c.ws.send(Buffer.from([0xff, 0xfe, 0x00]), { binary: true });
    c.send({ op: 'push', records: ['still works'] });
    const p = await c.expect((f) => f.op === 'pushed', 'a pushed frame after the bad frames');
    assertPushed(p, 1);
    c.send({ op: 'query', question: 'ok?', max_tokens: 2, ref: 'ok' });
    const a = await c.expect((f) => f.op === 'answer' && f.ref === 'ok', 'an answer after the bad frames');
    assertAnswerShape(a, { maxTokens: 2 });
    assert.equal(c.closed, false);
    const sess = await getSession(ctx.server, s.id);
    assert.equal(sess.records.pushed, 1, 'nothing of the refused push was accepted');
  } finally {
    c.close();
  }
});

test('flash_add over the socket registers a flash query', async () => {
  const s = await createSession(ctx.server);
  const c = await Client.open(ctx.server, s.id);
  try {
    c.send({ op: 'flash_add', question: 'Last close?', max_tokens: 4 });
    const noError = () => {
      const e = c.frames.find((f) => f.op === 'error');
      assert.ok(!e, `flash_add answered with an error frame: ${JSON.stringify(e)}`);
    };
    const sess = await waitSession(ctx.server, s.id, (x) => {
      noError();
      return x.flash.length === 1;
    }, 'the flash query was not registered');
    assert.equal(sess.flash.length, 1);
    const list = await get(ctx.server, `/v1/sessions/${s.id}/flash`);
    expectStatus(list, 200);
    assert.equal(list.body.flash[0].question, 'Last close?');
    const fid = list.body.flash[0].fid;
    c.send({ op: 'flash_list' });
    c.send({ op: 'flash_remove', fid });
    await waitSession(ctx.server, s.id, (x) => {
      noError();
      return x.flash.length === 0;
    }, 'the flash query was not removed');
    assert.equal(c.closed, false);
  } finally {
    c.close();
  }
});

test('deleting the session sends session_deleted to the socket', async () => {
  const s = await createSession(ctx.server);
  const c = await Client.open(ctx.server, s.id);
  try {
    expectStatus(await del(ctx.server, `/v1/sessions/${s.id}`), 200);
    const ev = await c.expect((f) => f.op === 'event' && f.event === 'session_deleted', 'a session_deleted frame');
    assert.equal(ev.data?.id, s.id, JSON.stringify(ev));
  } finally {
    c.close();
  }
  await expectAlive(ctx.server);
});

test('a WebSocket to an unknown session is refused with 404', async () => {
  const err = await Client.open(ctx.server, 'no-such-session').then(() => null, (e) => e);
  assert.ok(err, 'the handshake must fail');
  assert.equal(err.statusCode, 404, String(err));
  await expectAlive(ctx.server);
});
