// --api-key: every endpoint but /health needs the key (Bearer; x-api-key on the Anthropic endpoint).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import WebSocket from 'ws';
import {
  useServer, http, get, post, expectStatus, expectError, uniqueId, openSSE, assertErrorObject, SMALL_SESSION,
  webSocketStatus,
} from './harness.js';

const KEY = 'test-key-0123456789';
const ctx = useServer({ apiKey: KEY });

const protectedRoutes = [
  ['GET', '/v1/sessions'],
  ['POST', '/v1/sessions'],
  ['GET', '/v1/sessions/x'],
  ['DELETE', '/v1/sessions/x'],
  ['POST', '/v1/sessions/x/data'],
  ['POST', '/v1/sessions/x/query'],
  ['GET', '/v1/sessions/x/events'],
  ['GET', '/v1/sessions/x/flash'],
  ['POST', '/v1/sessions/x/flash'],
  ['GET', '/v1/models'],
  ['POST', '/v1/chat/completions'],
  ['POST', '/v1/completions'],
  ['POST', '/v1/messages'],
  ['GET', '/metrics'],
];

test('/health works without a key', async () => {
  const res = await get(ctx.server, '/health', { key: false });
  expectStatus(res, 200);
  assert.equal(res.body?.status, 'ok', res.text);
});

// Checks every route, then reports all the ones that did not answer 401 with the error body.
async function expectAll401(key) {
  const wrong = [];
  for (const [method, p] of protectedRoutes) {
    const res = await http(ctx.server, method, p, { key, json: method === 'POST' ? {} : undefined });
    try {
      expectError(res, 401, 'unauthorized');
    } catch {
      wrong.push(`${method} ${p} -> ${res.status} ${res.text.slice(0, 200)}`);
    }
  }
  assert.deepEqual(wrong, [], wrong.join('\n'));
}

test('no key: 401 with the JSON error body on every other endpoint', async () => {
  await expectAll401(false);
});

test('no key: an unknown path and a wrong method answer 401 too (no 404/405 oracle)', async () => {
  for (const [method, p] of [['GET', '/v1/nothing-here'], ['PUT', '/v1/sessions'], ['DELETE', '/metrics']]) {
    expectError(await http(ctx.server, method, p, { key: false }), 401, 'unauthorized');
  }
  // With the key, the same requests say what is wrong.
  expectError(await http(ctx.server, 'GET', '/v1/nothing-here'), 404, 'not_found');
  expectStatus(await http(ctx.server, 'PUT', '/v1/sessions'), 405);
});

test('wrong key: 401', async () => {
  await expectAll401('wrong-key');
  const variants = [`Bearer ${KEY}x`, `Bearer ${KEY.slice(0, -1)}`, KEY, `Basic ${KEY}`, 'Bearer ', 'Bearer'];
  for (const v of variants) {
    const res = await get(ctx.server, '/v1/sessions', { key: false, headers: { authorization: v } });
    expectError(res, 401, 'unauthorized');
  }
});

test('the right key works', async () => {
  const res = await get(ctx.server, '/v1/sessions');
  expectStatus(res, 200);
  const id = uniqueId();
  expectStatus(await post(ctx.server, '/v1/sessions', { id, ...SMALL_SESSION }), 201);
  expectStatus(await get(ctx.server, `/v1/sessions/${id}`), 200);
  expectStatus(await get(ctx.server, '/metrics'), 200);
});

test('x-api-key is accepted by the Anthropic endpoint', async () => {
  const body = { model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] };
  const ok = await http(ctx.server, 'POST', '/v1/messages', { key: false, json: body, headers: { 'x-api-key': KEY } });
  expectStatus(ok, 200);
  const bad = await http(ctx.server, 'POST', '/v1/messages', { key: false, json: body, headers: { 'x-api-key': 'nope' } });
  expectError(bad, 401, 'unauthorized');
});

test('SSE and WebSocket need the key', async () => {
  const id = uniqueId();
  expectStatus(await post(ctx.server, '/v1/sessions', { id, ...SMALL_SESSION }), 201);
  const denied = await openSSE(ctx.server, `/v1/sessions/${id}/events`, { key: false });
  assert.equal(denied.status, 401);
  assertErrorObject(denied.body, 'unauthorized');
  const allowed = await openSSE(ctx.server, `/v1/sessions/${id}/events`);
  assert.equal(allowed.status, 200);
  allowed.reader.close();

  const url = `ws://${ctx.server.host}:${ctx.server.port}/v1/sessions/${id}/ws`;
  const status = await webSocketStatus(ctx.server, `/v1/sessions/${id}/ws`, false);
  assert.equal(status, 401, 'a WebSocket handshake without the key is refused with 401');
  const opened = await new Promise((resolve) => {
    const ws = new WebSocket(url, { headers: { authorization: `Bearer ${KEY}` } });
    ws.on('open', () => {
      resolve(true);
      ws.close();
    });
    ws.on('unexpected-response', (req, res) => resolve(res.statusCode));
    ws.on('error', (e) => resolve(String(e)));
  });
  assert.equal(opened, true);
});

test('the OpenAI SDK works with the key and fails without it', async () => {
  const good = new OpenAI({ baseURL: `${ctx.server.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 60_000 });
  const r = await good.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 3 });
  assert.ok(r.usage);
  const models = await good.models.list();
  assert.ok(models.data.length >= 1);
  const bad = new OpenAI({ baseURL: `${ctx.server.url}/v1`, apiKey: 'wrong', maxRetries: 0, timeout: 60_000 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

test('the Anthropic SDK works with the key (x-api-key) and with a bearer token', async () => {
  const params = { model: 'm', max_tokens: 3, messages: [{ role: 'user', content: 'hi' }] };
  const good = new Anthropic({ baseURL: ctx.server.url, apiKey: KEY, maxRetries: 0, timeout: 60_000 });
  const m = await good.messages.create(params);
  assert.ok(m.usage);
  const viaBearer = new Anthropic({ baseURL: ctx.server.url, apiKey: null, authToken: KEY, maxRetries: 0, timeout: 60_000 });
  assert.ok((await viaBearer.messages.create(params)).usage);
  const bad = new Anthropic({ baseURL: ctx.server.url, apiKey: 'wrong', maxRetries: 0, timeout: 60_000 });
  await assert.rejects(bad.messages.create(params), (e) => e instanceof Anthropic.AuthenticationError && e.status === 401);
});
