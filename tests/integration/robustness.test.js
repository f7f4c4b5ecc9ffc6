// Robustness: slow clients, clients that vanish mid-request, mid-SSE and mid-WebSocket, abandoned streams,
// garbage on the wire. After each, the server still answers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import WebSocket from 'ws';
import {
  useServer, get, post, expectStatus, expectAlive, createSession, getSession, pushRecords, waitIngested, waitSession,
  query, openSSE, textRecords, connectRaw, readRaw, completeResponse, parseRawResponse, sleep, assertAnswerShape,
  withTimeout,
  uniqueId,
} from './harness.js';

let sid;
const ctx = useServer({}, async (server) => {
  sid = (await createSession(server, { id: uniqueId('keep') })).id;
  const p = await pushRecords(server, sid, textRecords(6));
  await waitIngested(server, sid, p.last_seq);
});

const authLine = () => (ctx.server.apiKey ? `Authorization: Bearer ${ctx.server.apiKey}\r\n` : '');

async function writeSlowly(sock, text, delayMs) {
  for (const ch of Buffer.from(text)) {
    sock.write(Buffer.from([ch]));
    await sleep(delayMs);
  }
}

test('a slow client sending its request byte by byte gets a full answer; others are served meanwhile', async () => {
  const sock = await connectRaw(ctx.server);
  sock.setNoDelay(true);
  const reading = readRaw(sock, { until: completeResponse, timeout: 60_000 });
  const request = `GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n${authLine()}Connection: close\r\n\r\n`;
  const half = Math.floor(request.length / 2);
  await writeSlowly(sock, request.slice(0, half), 15);
  // Mid-request, another client is served.
  const other = await get(ctx.server, '/v1/sessions');
  expectStatus(other, 200);
  await writeSlowly(sock, request.slice(half), 15);
  const r = parseRawResponse(await reading);
  sock.destroy();
  assert.equal(r.status, 200, r.body);
  assert.match(r.body, /"status"\s*:\s*"ok"/);
});

test('a slow client sending a POST body byte by byte', async () => {
  const sock = await connectRaw(ctx.server);
  sock.setNoDelay(true);
  const body = JSON.stringify({ records: ['slow record one', 'slow record two'] });
  const reading = readRaw(sock, { until: completeResponse, timeout: 60_000 });
  sock.write(`POST /v1/sessions/${sid}/data HTTP/1.1\r\nHost: x\r\n${authLine()}Content-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`);
  await writeSlowly(sock, body, 5);
  const r = parseRawResponse(await reading);
  sock.destroy();
  assert.equal(r.status, 202, r.body);
  assert.match(r.body, /"accepted"\s*:\s*2/);
});

test('clients that disconnect mid-request', async () => {
  const before = (await waitSession(ctx.server, sid, (x) => x.pending === 0, 'ingestion did not settle')).records.pushed;
  for (let i = 0; i < 10; i++) {
    const sock = await connectRaw(ctx.server);
    const body = JSON.stringify({ records: textRecords(20) });
    const head = `POST /v1/sessions/${sid}/data HTTP/1.1\r\nHost: x\r\n${authLine()}Content-Type: application/json\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n`;
    if (i % 3 === 0) sock.write(head.slice(0, 20)); // inside the request line
    else if (i % 3 === 1) sock.write(head); // headers, no body
    else sock.write(head + body.slice(0, body.length / 2)); // half the body
    await sleep(20);
    if (i % 2) sock.destroy();
    else sock.resetAndDestroy();
  }
  await expectAlive(ctx.server);
  assert.equal((await getSession(ctx.server, sid)).records.pushed, before, 'no partial body was accepted');
});

test('many idle connections do not block the server', async () => {
  const socks = [];
  for (let i = 0; i < 40; i++) socks.push(await connectRaw(ctx.server));
  try {
    const a = await query(ctx.server, sid, { question: 'Still answering?', max_tokens: 3 });
    assertAnswerShape(a, { maxTokens: 3 });
    await expectAlive(ctx.server);
  } finally {
    for (const s of socks) s.destroy();
  }
});

test('pipelined requests on one connection get answers in order', async () => {
  const sock = await connectRaw(ctx.server);
  const reqs = `GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/sessions/${sid} HTTP/1.1\r\nHost: x\r\n${authLine()}\r\n` +
    `GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`;
  const reading = readRaw(sock, { timeout: 30_000 });
  sock.write(reqs);
  const text = await reading;
  sock.destroy();
  const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));
  assert.deepEqual(statuses, [200, 200, 200], text.slice(0, 2000));
  assert.ok(text.indexOf(`"id":"${sid}"`) > 0 || text.indexOf(`"id": "${sid}"`) > 0, 'the second answer is the session');
});

test('an HTTP/1.0 request without Host is answered', async () => {
  const sock = await connectRaw(ctx.server);
  const reading = readRaw(sock, { timeout: 30_000 });
  sock.write('GET /health HTTP/1.0\r\n\r\n');
  const r = parseRawResponse(await reading);
  sock.destroy();
  assert.equal(r.status, 200);
});

test('garbage on the wire gets a 400 or a closed connection, never a crash', async () => {
  const garbage = [
    Buffer.from([0, 1, 2, 3, 255, 254, 13, 10, 13, 10]),
    Buffer.from('NOT-HTTP\r\n\r\n'),
    Buffer.from('GET / HTTP/9.9\r\n\r\n'),
    Buffer.from('GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n'),
    Buffer.from('POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n{}'),
    Buffer.from('GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n'),
    Buffer.from(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(200_000)}\r\n\r\n`),
  ];
  for (const g of garbage) {
    const sock = await connectRaw(ctx.server);
    const reading = readRaw(sock, { timeout: 30_000 });
    sock.write(g);
    const text = await reading.catch((e) => `(no close: ${e.message})`);
    sock.destroy();
    const r = parseRawResponse(text);
    if (r.status !== null) assert.ok((r.status >= 400 && r.status < 500) || r.status === 505, `${JSON.stringify(g.subarray(0, 60).toString())} -> ${text.slice(0, 200)}`);
    else assert.ok(!text.startsWith('(no close'), `the server neither answered nor closed: ${JSON.stringify(g.subarray(0, 60).toString())}`);
    await expectAlive(ctx.server);
  }
});

test('clients that disconnect mid-SSE (events)', async () => {
  const s = await createSession(ctx.server);
  for (let i = 0; i < 5; i++) {
    const { status, reader } = await openSSE(ctx.server, `/v1/sessions/${s.id}/events`);
    assert.equal(status, 200);
    reader.close();
  }
  // One more that reads an event, then goes away while more are coming.
  const { reader } = await openSSE(ctx.server, `/v1/sessions/${s.id}/events`);
  const p1 = await pushRecords(ctx.server, s.id, textRecords(2));
  await reader.waitFor((e) => e.event === 'data_updated', 'data_updated');
  reader.close();
  // The server now writes events to dead connections.
  let last = p1;
  for (let i = 0; i < 5; i++) last = await pushRecords(ctx.server, s.id, textRecords(2, 2 + i * 2));
  const after = await waitIngested(ctx.server, s.id, last.last_seq);
  assert.equal(after.records.pushed, 12);
  await expectAlive(ctx.server);
  // A live subscriber still gets events.
  const fresh = await openSSE(ctx.server, `/v1/sessions/${s.id}/events`);
  const p = await pushRecords(ctx.server, s.id, ['after']);
  const ev = await fresh.reader.waitFor((e) => e.event === 'data_updated' && e.json.last_seq >= p.last_seq, 'data_updated');
  assert.ok(ev);
  fresh.reader.close();
});

test('an abandoned SSE query stream: the session answers again and its Region 2 is cleared', async () => {
  const baseline = await waitSession(ctx.server, sid, (x) => x.pending === 0, 'ingestion did not settle');
  const { status, reader } = await openSSE(ctx.server, `/v1/sessions/${sid}/query`, {
    method: 'POST', json: { question: 'Write a very long essay about the data.', max_tokens: 400, stream: true },
  });
  assert.equal(status, 200);
  await reader.waitFor((e) => e.event === 'token' || e.event === 'done', 'the first token');
  reader.close();
  const a = await query(ctx.server, sid, { question: 'Short answer?', max_tokens: 3 });
  assertAnswerShape(a, { maxTokens: 3 });
  await waitSession(ctx.server, sid, (x) => x.kv.cells_used === baseline.kv.cells_used && x.pending === 0,
    'the KV cells of the abandoned query were not released');
  await expectAlive(ctx.server);
});

test('abandoned OpenAI and Anthropic streams', async () => {
  const chat = await openSSE(ctx.server, '/v1/chat/completions', {
    method: 'POST', json: { model: 'm', messages: [{ role: 'user', content: 'Go on forever.' }], max_tokens: 400, stream: true },
  });
  assert.equal(chat.status, 200);
  await chat.reader.next();
  chat.reader.close();
  const msg = await openSSE(ctx.server, '/v1/messages', {
    method: 'POST', json: { model: 'm', messages: [{ role: 'user', content: 'Go on forever.' }], max_tokens: 400, stream: true },
  });
  assert.equal(msg.status, 200);
  await msg.reader.next();
  msg.reader.close();
  const r = await post(ctx.server, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
  expectStatus(r, 200);
  await expectAlive(ctx.server);
});

test('clients that disconnect mid-WebSocket', async () => {
  const url = `ws://${ctx.server.host}:${ctx.server.port}/v1/sessions/${sid}/ws`;
  const headers = ctx.server.apiKey ? { authorization: `Bearer ${ctx.server.apiKey}` } : {};
  for (let i = 0; i < 4; i++) {
    const ws = new WebSocket(url, { headers });
    ws.on('error', () => {});
    await withTimeout(new Promise((resolve, reject) => {
      ws.once('open', resolve);
      ws.once('error', reject);
    }), 30_000, 'WebSocket open');
    ws.send(JSON.stringify({ op: 'query', question: 'A long answer please.', max_tokens: 200, ref: `r${i}` }));
    if (i % 2) ws.send(JSON.stringify({ op: 'push', records: ['pushed then gone'] }));
    await sleep(i * 20);
    ws.terminate();
  }
  // A raw upgrade followed by half a frame, then gone.
  const sock = await connectRaw(ctx.server);
  sock.write(`GET /v1/sessions/${sid}/ws HTTP/1.1\r\nHost: x\r\n${authLine()}Upgrade: websocket\r\nConnection: Upgrade\r\n` +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
  const hs = await readRaw(sock, { until: (t) => t.includes('\r\n\r\n'), timeout: 30_000 });
  assert.match(hs, /^HTTP\/1\.1 101/);
  sock.write(Buffer.from([0x81, 0xfe, 0x01, 0x00, 1, 2, 3, 4, 5, 6])); // masked text frame of 256 bytes, 2 sent
  await sleep(50);
  sock.destroy();

  await expectAlive(ctx.server);
  const a = await query(ctx.server, sid, { question: 'Still fine?', max_tokens: 3 });
  assertAnswerShape(a, { maxTokens: 3 });
  // And a new socket works.
  const ws = new WebSocket(url, { headers });
  const answer = await withTimeout(new Promise((resolve, reject) => {
    ws.on('open', () => ws.send(JSON.stringify({ op: 'query', question: 'ok?', max_tokens: 2, ref: 'fine' })));
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString());
      if (f.op === 'answer' && f.ref === 'fine') resolve(f);
    });
    ws.on('error', reject);
  }), 60_000, 'an answer on a new socket');
  ws.close();
  assertAnswerShape(answer, { maxTokens: 2 });
});

test('an unmasked client frame or a protocol violation closes that socket only', async () => {
  const sock = await connectRaw(ctx.server);
  sock.write(`GET /v1/sessions/${sid}/ws HTTP/1.1\r\nHost: x\r\n${authLine()}Upgrade: websocket\r\nConnection: Upgrade\r\n` +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n');
  await readRaw(sock, { until: (t) => t.includes('\r\n\r\n'), timeout: 30_000 });
  const reading = readRaw(sock, { timeout: 30_000 });
  sock.write(Buffer.concat([Buffer.from([0x81, 0x05]), Buffer.from('hello')])); // unmasked: a protocol error
  await withTimeout(reading, 30_000, 'the server to close the violating socket');
  sock.destroy();
  await expectAlive(ctx.server);
});
