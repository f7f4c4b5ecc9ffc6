// Bad input: every refusal is the right 4xx with the JSON error body (naming the field where there is one),
// and the server keeps serving afterwards.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  useServer, http, get, post, expectStatus, expectError, expectAlive, createSession, getSession, connectRaw, readRaw,
  completeResponse, parseRawResponse, checkEach,
  uniqueId,
} from './harness.js';

const MAX_BODY = 16384;
let sid;
const ctx = useServer({ maxBodyBytes: MAX_BODY }, async (server) => {
  sid = (await createSession(server, { id: uniqueId('keep') })).id;
});

// A create that should have been refused but was not: delete the session (it holds KV cells) and let the
// caller's assertion report the status.
async function dropCreated(res) {
  if (res.status === 201 && res.body?.id) await http(ctx.server, 'DELETE', `/v1/sessions/${encodeURIComponent(res.body.id)}`);
  return res;
}

const raw = (method, p, body, contentType = 'application/json') =>
  http(ctx.server, method, p, { body, headers: contentType ? { 'content-type': contentType } : {} });

test('malformed JSON: 400 malformed_request on every JSON endpoint', async () => {
  const cases = [
    ['/v1/sessions', '{"id":'],
    ['/v1/sessions', '{"id": "x",}'],
    ['/v1/sessions', "{'id': 'x'}"],
    [`/v1/sessions/${sid}/data`, '{"records": ['],
    [`/v1/sessions/${sid}/query`, '{"question": "q" "max_tokens": 3}'],
    [`/v1/sessions/${sid}/flash`, 'question=q'],
    ['/v1/chat/completions', '{"messages": [{"role": "user", "content": "hi"}'],
    ['/v1/completions', 'not json at all'],
    ['/v1/messages', '{"max_tokens": 5, "messages": [] } trailing'],
  ];
  await checkEach(cases, async ([p, body]) => expectError(await raw('POST', p, body), 400, 'malformed_request'));
  await expectAlive(ctx.server);
});

test('a JSON body that is not an object: 400 malformed_request', async () => {
  const cases = [];
  for (const body of ['[1, 2]', '"a string"', '42', 'null', 'true']) {
    for (const p of ['/v1/sessions', `/v1/sessions/${sid}/query`, '/v1/chat/completions']) cases.push([p, body]);
  }
  await checkEach(cases, async ([p, body]) => expectError(await dropCreated(await raw('POST', p, body)), 400,
    'malformed_request'));
  await expectAlive(ctx.server);
});

test('invalid UTF-8 bytes: 400 malformed_request (JSON, text/plain, NDJSON)', async () => {
  const json = (bytes) => Buffer.concat([Buffer.from('{"id": "'), Buffer.from(bytes), Buffer.from('"}')]);
  const bad = [
    [0xff, 0xfe], // never valid
    [0xc3, 0x28], // a lead byte without its continuation
    [0xc0, 0xaf], // an overlong encoding of '/'
    [0xed, 0xa0, 0x80], // a UTF-16 surrogate encoded in UTF-8
    [0xf4, 0x90, 0x80, 0x80], // above U+10FFFF
    [0xe2, 0x82], // truncated
  ];
  const cases = bad.map((b) => ['/v1/sessions', json(b), 'application/json']);
  cases.push([`/v1/sessions/${sid}/data`,
    Buffer.concat([Buffer.from('{"records": ["ok", "'), Buffer.from([0xc3, 0x28]), Buffer.from('"]}')]), 'application/json']);
  cases.push([`/v1/sessions/${sid}/data`,
    Buffer.concat([Buffer.from('line one\nline '), Buffer.from([0xff]), Buffer.from(' two\n')]), 'text/plain']);
  cases.push([`/v1/sessions/${sid}/data`,
    Buffer.concat([Buffer.from('"ok"\n"'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"\n')]), 'application/x-ndjson']);
  cases.push(['/v1/chat/completions', Buffer.concat([Buffer.from('{"messages": [{"role": "user", "content": "'),
    Buffer.from([0xfe]), Buffer.from('"}], "max_tokens": 2}')]), 'application/json']);
  // A lone surrogate escape is valid JSON syntax but not Unicode text.
  cases.push([`/v1/sessions/${sid}/query`, Buffer.from('{"question": "\\ud800", "max_tokens": 2}'), 'application/json']);
  await checkEach(cases, async ([p, body, type]) => expectError(await dropCreated(await raw('POST', p, body, type)), 400,
    'malformed_request'), ([p, body, type]) => `${p} ${type} ${JSON.stringify(body.toString('latin1'))}`);
  const s = await getSession(ctx.server, sid);
  assert.equal(s.records.pushed, 0, 'nothing of the refused bodies was accepted');
  await expectAlive(ctx.server);
});

test('valid multi-byte UTF-8 is fine', async () => {
  const s = await createSession(ctx.server, { system: 'Café — 東京 — 🚀' });
  const p = await post(ctx.server, `/v1/sessions/${s.id}/data`, { records: ['prix: 12,50 €', '株価 上昇 📈'] });
  expectStatus(p, 202);
  const q = await post(ctx.server, `/v1/sessions/${s.id}/query`, { question: '¿Qué pasó? 🤔', max_tokens: 2 });
  expectStatus(q, 200);
});

test('wrong types and values on POST /v1/sessions: 422 naming the field', async () => {
  const cases = [
    [{ id: 5 }, 'id'],
    [{ system: 1 }, 'system'],
    [{ system: ['a'] }, 'system'],
    [{ retention: 'big' }, 'retention'],
    [{ retention: { max_tokens: '8000' } }, 'retention.max_tokens'],
    [{ retention: { max_tokens: 0 } }, 'retention.max_tokens'],
    [{ retention: { max_tokens: -5 } }, 'retention.max_tokens'],
    [{ retention: { max_tokens: 1.5 } }, 'retention.max_tokens'],
    [{ retention: { max_tokens: 1e30 } }, 'retention.max_tokens'],
    [{ retention: { max_records: 0 } }, 'retention.max_records'],
    [{ retention: { max_records: -1 } }, 'retention.max_records'],
    [{ retention: { eviction: 'fifo' } }, 'retention.eviction'],
    [{ retention: { evict_fraction: 1 } }, 'retention.evict_fraction'],
    [{ retention: { evict_fraction: -0.1 } }, 'retention.evict_fraction'],
    [{ retention: { evict_fraction: '0.5' } }, 'retention.evict_fraction'],
    [{ mode: 'fast' }, 'mode'],
    [{ mode: 1 }, 'mode'],
    [{ template: 3 }, 'template'],
    [{ scaffold: 3 }, 'scaffold'],
    [{ question_suffix: false }, 'question_suffix'],
    [{ query_budget: 0 }, 'query_budget'],
    [{ query_budget: -1 }, 'query_budget'],
    [{ query_budget: 1e30 }, 'query_budget'],
    [{ query_budget: '512' }, 'query_budget'],
    [{ ready: 'Is it up?' }, 'ready'],
    [{ ready: { question: 'q', vocab: 'UP' } }, 'ready.vocab'],
    [{ ready: { question: 'q', vocab: ['UP', 2] } }, /^ready\.vocab(\[1\])?$/],
    [{ ready: { question: 'q', vocab: ['UP'], tau: 'high' } }, 'ready.tau'],
    [{ ready: { question: 7, vocab: ['UP'] } }, 'ready.question'],
  ];
  await checkEach(cases, async ([body, field]) => {
    expectError(await dropCreated(await post(ctx.server, '/v1/sessions', body)), 422, 'invalid_value', field);
  });
  await expectAlive(ctx.server);
});

test('unknown fields on aoi endpoints: 422 naming the field', async () => {
  const cases = [
    ['/v1/sessions', { sytem: 'typo' }, 'sytem'],
    ['/v1/sessions', { retention: { max_token: 5 } }, 'retention.max_token'],
    ['/v1/sessions', { ready: { question: 'q', vocab: ['A'], extra: 1 } }, 'ready.extra'],
    [`/v1/sessions/${sid}/query`, { question: 'q', max_token: 4 }, 'max_token'],
    [`/v1/sessions/${sid}/data`, { records: ['a'], source: 'x' }, 'source'],
    [`/v1/sessions/${sid}/flash`, { question: 'q', max_token: 4 }, 'max_token'],
  ];
  await checkEach(cases, async ([p, body, field]) => {
    expectError(await dropCreated(await post(ctx.server, p, body)), 422, 'invalid_value', field);
  });
  assert.equal((await getSession(ctx.server, sid)).records.pushed, 0);
  await expectAlive(ctx.server);
});

test('query: negative, huge and mistyped numbers are 422 naming the field', async () => {
  const cases = [
    [{}, 'question'],
    [{ question: 5 }, 'question'],
    [{ question: null }, 'question'],
    [{ question: 'q', max_tokens: -1 }, 'max_tokens'],
    [{ question: 'q', max_tokens: 1e30 }, 'max_tokens'],
    [{ question: 'q', max_tokens: 2 ** 53 }, 'max_tokens'],
    [{ question: 'q', max_tokens: 1.5 }, 'max_tokens'],
    [{ question: 'q', max_tokens: '8' }, 'max_tokens'],
    [{ question: 'q', temperature: -1 }, 'temperature'],
    [{ question: 'q', temperature: 'hot' }, 'temperature'],
    [{ question: 'q', temperature: 1e30 }, 'temperature'],
    [{ question: 'q', seed: 'x' }, 'seed'],
    [{ question: 'q', seed: 1.5 }, 'seed'],
    [{ question: 'q', stop: 5 }, 'stop'],
    [{ question: 'q', stop: [1] }, /^stop(\[0\])?$/],
    [{ question: 'q', min_seq: -1 }, 'min_seq'],
    [{ question: 'q', min_seq: 'x' }, 'min_seq'],
    [{ question: 'q', wait_ms: -5 }, 'wait_ms'],
    [{ question: 'q', wait_ms: 1e30 }, 'wait_ms'],
    [{ question: 'q', stream: 'yes' }, 'stream'],
  ];
  await checkEach(cases, async ([body, field]) => {
    expectError(await post(ctx.server, `/v1/sessions/${sid}/query`, body, { timeout: 120_000 }), 422, 'invalid_value', field);
  });
  const ok = await post(ctx.server, `/v1/sessions/${sid}/query`, { question: 'q', max_tokens: 2 });
  expectStatus(ok, 200);
});

test('data: missing or mistyped records are 422', async () => {
  await checkEach([{}, { records: 'a line' }, { records: { a: 1 } }, { records: null }], async (body) => {
    expectError(await post(ctx.server, `/v1/sessions/${sid}/data`, body), 422, 'invalid_value', 'records');
  });
  const nd = await raw('POST', `/v1/sessions/${sid}/data`, '"ok"\n{not json}\n', 'application/x-ndjson');
  assert.ok([400, 422].includes(nd.status), `a broken NDJSON line is a 400 or 422: ${nd.status} ${nd.text}`);
  expectError(nd, nd.status, nd.status === 400 ? 'malformed_request' : 'invalid_value');
  const s = await getSession(ctx.server, sid);
  assert.equal(s.records.pushed, 0);
});

test('data with an unsupported Content-Type: 400 malformed_request', async () => {
  expectError(await raw('POST', `/v1/sessions/${sid}/data`, 'a,b,c\n', 'application/xml'), 400, 'malformed_request');
  const s = await getSession(ctx.server, sid);
  assert.equal(s.records.pushed, 0);
});

test('stateless endpoints: missing and bad fields are 422', async () => {
  const messages = [{ role: 'user', content: 'hi' }];
  const cases = [
    ['/v1/chat/completions', { messages, max_tokens: 1e30 }, 'max_tokens'],
    ['/v1/chat/completions', { messages, max_tokens: -1 }, 'max_tokens'],
    ['/v1/chat/completions', { messages, max_completion_tokens: -1 }, /^max_(completion_)?tokens$/],
    ['/v1/chat/completions', { messages, max_tokens: 2, temperature: 'x' }, 'temperature'],
    ['/v1/chat/completions', { messages: [{ role: 'user' }], max_tokens: 2 }, /^messages/],
    ['/v1/chat/completions', { messages: [{ role: 'nobody', content: 'x' }], max_tokens: 2 }, /^messages/],
    ['/v1/completions', { max_tokens: 2 }, 'prompt'],
    ['/v1/completions', { prompt: 'x', max_tokens: 1e30 }, 'max_tokens'],
    ['/v1/messages', { messages }, 'max_tokens'],
    ['/v1/messages', { messages, max_tokens: -1 }, 'max_tokens'],
    ['/v1/messages', { messages, max_tokens: 1e30 }, 'max_tokens'],
    ['/v1/messages', { messages: [{ role: 'user', content: 5 }], max_tokens: 2 }, /^messages/],
  ];
  await checkEach(cases, async ([p, body, field]) => {
    expectError(await post(ctx.server, p, body, { timeout: 120_000 }), 422, 'invalid_value', field);
  }, ([p, body]) => `${p} ${JSON.stringify(body)}`);
  await expectAlive(ctx.server);
});

test(`body over --max-body-bytes (${MAX_BODY}): 413 too_large`, async () => {
  const big = 'x'.repeat(MAX_BODY + 100);
  const cases = [
    ['/v1/sessions', JSON.stringify({ system: big }), 'application/json'],
    [`/v1/sessions/${sid}/data`, JSON.stringify({ records: [big] }), 'application/json'],
    [`/v1/sessions/${sid}/data`, `${big}\n`, 'text/plain'],
    ['/v1/chat/completions', JSON.stringify({ messages: [{ role: 'user', content: big }] }), 'application/json'],
    // Ten times the limit: the client must still get the 413, not a reset connection.
    [`/v1/sessions/${sid}/data`, `${'y'.repeat(MAX_BODY * 10)}\n`, 'text/plain'],
  ];
  await checkEach(cases, async ([p, body, type]) => expectError(await dropCreated(await raw('POST', p, body, type)), 413,
    'too_large'), ([p, body, type]) => `${p} ${type} ${body.length} bytes`);
  const s = await getSession(ctx.server, sid);
  assert.equal(s.records.pushed, 0);
  // Just under the limit is fine.
  const under = await raw('POST', `/v1/sessions/${sid}/data`, `${'z'.repeat(1000)}\n`, 'text/plain');
  expectStatus(under, 202);
  await expectAlive(ctx.server);
});

test('a chunked body over --max-body-bytes: 413 too_large', async () => {
  const sock = await connectRaw(ctx.server);
  const auth = ctx.server.apiKey ? `Authorization: Bearer ${ctx.server.apiKey}\r\n` : '';
  sock.write(`POST /v1/sessions/${sid}/data HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: text/plain\r\n` +
    'Transfer-Encoding: chunked\r\n\r\n');
  const chunk = 'c'.repeat(4000);
  const reading = readRaw(sock, { until: completeResponse });
  for (let i = 0; i < 8; i++) {
    if (sock.destroyed) break;
    sock.write(`${(chunk.length).toString(16)}\r\n${chunk}\r\n`);
  }
  if (!sock.destroyed) sock.write('0\r\n\r\n');
  const text = await reading;
  sock.destroy();
  const r = parseRawResponse(text);
  assert.equal(r.status, 413, text.slice(0, 500));
  const body = JSON.parse(r.body.includes('{') ? r.body.slice(r.body.indexOf('{'), r.body.lastIndexOf('}') + 1) : '{}');
  assert.equal(body.error?.type, 'too_large', text.slice(0, 500));
  await expectAlive(ctx.server);
});

test('unknown session: 404 not_found everywhere', async () => {
  const p = '/v1/sessions/does-not-exist';
  expectError(await get(ctx.server, p), 404, 'not_found');
  expectError(await http(ctx.server, 'DELETE', p), 404, 'not_found');
  expectError(await post(ctx.server, `${p}/data`, { records: ['a'] }), 404, 'not_found');
  expectError(await post(ctx.server, `${p}/query`, { question: 'q' }), 404, 'not_found');
  expectError(await get(ctx.server, `${p}/events`), 404, 'not_found');
  expectError(await get(ctx.server, `${p}/flash`), 404, 'not_found');
  expectError(await post(ctx.server, `${p}/flash`, { question: 'q' }), 404, 'not_found');
  await expectAlive(ctx.server);
});

const wrongMethods = [
  ['PUT', '/v1/sessions'],
  ['PATCH', `/v1/sessions/SID`],
  ['GET', '/v1/sessions/SID/query'],
  ['GET', '/v1/sessions/SID/data'],
  ['POST', '/v1/sessions/SID/events'],
  ['DELETE', '/v1/models'],
  ['GET', '/v1/chat/completions'],
  ['GET', '/v1/completions'],
  ['GET', '/v1/messages'],
  ['POST', '/health'],
  ['POST', '/metrics'],
];

test('wrong method: 405 method_not_allowed', async () => {
  await checkEach(wrongMethods, async ([method, p]) => {
    const res = await http(ctx.server, method, p.replace('SID', sid), { json: method === 'GET' || method === 'DELETE' ? undefined : {} });
    expectError(res, 405, 'method_not_allowed');
  });
  await expectAlive(ctx.server);
});

test('405 answers carry an Allow header (RFC 9110)', async () => {
  await checkEach(wrongMethods, async ([method, p]) => {
    const res = await http(ctx.server, method, p.replace('SID', sid), { json: method === 'GET' || method === 'DELETE' ? undefined : {} });
    expectStatus(res, 405);
    assert.ok(res.headers.get('allow'), 'no Allow header');
  });
});

test('unknown route: 404 not_found', async () => {
  const routes = [['GET', '/v1/nope'], ['GET', '/nope'], ['POST', `/v1/sessions/${sid}/nope`], ['GET', '/v2/sessions'],
    ['GET', `/v1/sessions/${sid}/flash/f1/extra`], ['POST', '/v1/chat'], ['GET', '/v1/sessions/a/b/c/d/e']];
  await checkEach(routes, async ([method, p]) => {
    const res = await http(ctx.server, method, p, { json: method === 'POST' ? {} : undefined });
    expectError(res, 404, 'not_found');
  });
  await expectAlive(ctx.server);
});
