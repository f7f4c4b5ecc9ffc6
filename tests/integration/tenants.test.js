// --api-keys FILE: keys mapped to tenants. A tenant sees only its own sessions (another's answer 404 on every
// route, as if they did not exist), its quotas answer 429 naming the quota with Retry-After and never touch
// another tenant, /metrics is for admin keys and labels by tenant, and SIGHUP reloads the file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import {
  useServer, http, get, post, del, expectStatus, expectError, uniqueId, openSSE, SMALL_SESSION, textRecords,
  waitIngested, sleep, webSocketStatus,
} from './harness.js';

const ADMIN = 'admin-key-0123456789';
const ACME = 'acme-key-0123456789';
const ACME2 = 'acme-second-key-0123';
const BETA = 'beta-key-0123456789';
const LIMITED = 'limited-key-0123456789';
const LATER = 'later-key-0123456789';
const SMALL = 'small-key-0123456789';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'aoi-tenants-'));
const keyFile = path.join(dir, 'keys.txt');
const KEYS = [
  '# key tenant quotas',
  `${ACME} acme`,
  `${ACME2} acme   # a second key of the same tenant`,
  `${BETA} beta`,
  `${LIMITED} limited sessions=1 records_per_s=5 queries_per_s=1`,
  `${SMALL} small cells=1200`,
  '',
].join('\n');
fs.writeFileSync(keyFile, KEYS);

const ctx = useServer({ apiKey: ADMIN, args: ['--api-keys', keyFile, '--metrics-per-session', '100'] });

const as = (key) => ({ key });

async function createAs(key, body = {}) {
  const res = await post(ctx.server, '/v1/sessions', { id: uniqueId(), ...SMALL_SESSION, ...body }, as(key));
  expectStatus(res, 201);
  return res.body;
}

const wsStatus = (key, id) => webSocketStatus(ctx.server, `/v1/sessions/${id}/ws`, key);

test('a tenant sees only its own sessions; another tenant gets 404 on every route of them', async () => {
  const mine = await createAs(ACME);
  assert.equal(mine.tenant, 'acme');
  const id = mine.id;
  expectStatus(await post(ctx.server, `/v1/sessions/${id}/data`, { records: textRecords(2) }, as(ACME)), 202);

  const routes = [
    ['GET', `/v1/sessions/${id}`],
    ['DELETE', `/v1/sessions/${id}`],
    ['POST', `/v1/sessions/${id}/data`, { records: ['x'] }],
    ['POST', `/v1/sessions/${id}/query`, { question: 'q?', max_tokens: 2 }],
    ['GET', `/v1/sessions/${id}/context`],
    ['GET', `/v1/sessions/${id}/snapshot`],
    ['POST', `/v1/sessions/${id}/save`, {}],
    ['POST', `/v1/sessions/${id}/unload`, {}],
    ['POST', `/v1/sessions/${id}/load`, {}],
    ['GET', `/v1/sessions/${id}/flash`],
    ['POST', `/v1/sessions/${id}/flash`, { question: 'q?', max_tokens: 2 }],
    ['DELETE', `/v1/sessions/${id}/flash/f1`],
  ];
  const unknown = uniqueId('nobody');
  for (const [method, p, json] of routes) {
    const theirs = await http(ctx.server, method, p, { key: BETA, json });
    expectError(theirs, 404, 'not_found');
    // Indistinguishable from a session that does not exist.
    const none = await http(ctx.server, method, p.replace(id, unknown), { key: BETA, json });
    assert.equal(theirs.text.replace(id, unknown), none.text, `${method} ${p}`);
  }
  const events = await openSSE(ctx.server, `/v1/sessions/${id}/events`, { key: BETA });
  assert.equal(events.status, 404);
  assert.equal(await wsStatus(BETA, id), 404);

  // The owner (with either of its keys) and the admin still see it, untouched.
  for (const key of [ACME, ACME2, ADMIN]) expectStatus(await get(ctx.server, `/v1/sessions/${id}`, as(key)), 200);
  assert.equal(await wsStatus(ACME2, id), 'open');
  const own = await openSSE(ctx.server, `/v1/sessions/${id}/events`, { key: ACME });
  assert.equal(own.status, 200);
  own.reader.close();

  // Lists: each tenant its own; the admin all, with their tenants.
  const theirs = await createAs(BETA);
  const ids = async (key) => (await get(ctx.server, '/v1/sessions', as(key))).body.sessions.map((s) => s.id);
  assert.deepEqual(await ids(ACME), [id]);
  assert.deepEqual(await ids(BETA), [theirs.id]);
  const all = (await get(ctx.server, '/v1/sessions', as(ADMIN))).body.sessions;
  assert.deepEqual(all.map((s) => [s.id, s.tenant]).sort(), [[id, 'acme'], [theirs.id, 'beta']].sort());

  // Through the OpenAI and Anthropic endpoints too: another tenant's session is no model of its.
  const ask = { model: `session/${id}`, max_tokens: 2, messages: [{ role: 'user', content: 'q?' }] };
  for (const url of ['/v1/chat/completions', '/v1/messages']) {
    const theirs = await post(ctx.server, url, ask, as(BETA));
    expectError(theirs, 404, 'not_found');
    const none = await post(ctx.server, url, { ...ask, model: `session/${unknown}` }, as(BETA));
    assert.equal(theirs.text.replace(id, unknown), none.text, url);
    expectStatus(await post(ctx.server, url, ask, as(ACME)), 200);
  }
  const models = async (key) => (await get(ctx.server, '/v1/models', as(key))).body.data.map((m) => m.id);
  assert.ok((await models(ACME)).includes(`session/${id}`));
  assert.ok(!(await models(BETA)).includes(`session/${id}`));
  assert.ok((await models(BETA)).includes(`session/${theirs.id}`));
  assert.ok((await models(ADMIN)).includes(`session/${id}`));

  expectStatus(await del(ctx.server, `/v1/sessions/${id}`, as(ACME)), 200);
});

test('an exported session imported by another tenant is that tenant\'s', async () => {
  const s = await createAs(ACME);
  const exported = await fetch(`${ctx.server.url}/v1/sessions/${s.id}/snapshot`, {
    headers: { authorization: `Bearer ${ACME}` },
  });
  assert.equal(exported.status, 200);
  const bytes = Buffer.from(await exported.arrayBuffer());
  const copy = uniqueId('copy');
  const imported = await http(ctx.server, 'POST', `/v1/sessions?id=${copy}`, {
    key: BETA, body: bytes, headers: { 'content-type': 'application/octet-stream' },
  });
  expectStatus(imported, 201);
  assert.equal(imported.body.tenant, 'beta');
  expectError(await get(ctx.server, `/v1/sessions/${copy}`, as(ACME)), 404, 'not_found');
  expectStatus(await get(ctx.server, `/v1/sessions/${copy}`, as(BETA)), 200);
});

test('quotas answer 429 naming the quota, with Retry-After, and leave other tenants alone', async () => {
  // sessions=1
  const s = await createAs(LIMITED);
  const second = await post(ctx.server, '/v1/sessions', { id: uniqueId(), ...SMALL_SESSION }, as(LIMITED));
  expectError(second, 429, 'quota_exceeded', 'sessions');
  assert.ok(Number(second.headers.get('retry-after')) >= 1, second.headers.get('retry-after'));
  await createAs(BETA); // another tenant is not limited

  // records_per_s=5: a second's worth passes, then the bucket is empty; nothing of a refused push is taken.
  expectStatus(await post(ctx.server, `/v1/sessions/${s.id}/data`, { records: textRecords(5) }, as(LIMITED)), 202);
  const over = await post(ctx.server, `/v1/sessions/${s.id}/data`, { records: textRecords(1, 5) }, as(LIMITED));
  expectError(over, 429, 'quota_exceeded', 'records_per_s');
  assert.ok(Number(over.headers.get('retry-after')) >= 1);
  await waitIngested(ctx.server, s.id, 5);
  const after = (await get(ctx.server, `/v1/sessions/${s.id}`, as(ADMIN))).body;
  assert.equal(after.records.pushed, 5, JSON.stringify(after.records));

  // queries_per_s=1, shared by questions, completions and flash registrations.
  expectStatus(await post(ctx.server, `/v1/sessions/${s.id}/query`, { question: 'q?', max_tokens: 1 }, as(LIMITED)), 200);
  expectError(await post(ctx.server, `/v1/sessions/${s.id}/query`, { question: 'q?', max_tokens: 1 }, as(LIMITED)),
    429, 'quota_exceeded', 'queries_per_s');
  expectError(await post(ctx.server, '/v1/completions', { prompt: 'hi', max_tokens: 1 }, as(LIMITED)),
    429, 'quota_exceeded', 'queries_per_s');
  // Another tenant asks at will.
  for (let i = 0; i < 3; ++i) {
    expectStatus(await post(ctx.server, '/v1/completions', { prompt: 'hi', max_tokens: 1 }, as(BETA)), 200);
  }
  // The bucket refills: after a second the limited tenant may ask again.
  await sleep(1100);
  expectStatus(await post(ctx.server, `/v1/sessions/${s.id}/query`, { question: 'q?', max_tokens: 1 }, as(LIMITED)), 200);
});

test('the cells quota bounds what the tenant\'s sessions may grow to; a session over it is not kept', async () => {
  const first = await createAs(SMALL, { retention: { max_tokens: 512 } });
  const over = await post(ctx.server, '/v1/sessions', { id: 'too-big', ...SMALL_SESSION }, as(SMALL));
  expectError(over, 429, 'quota_exceeded', 'cells');
  assert.match(over.body.error.message, /retention\.max_tokens/);
  expectError(await get(ctx.server, '/v1/sessions/too-big', as(ADMIN)), 404, 'not_found');
  // A smaller window fits beside the first.
  const used = 1200 - (first.regions.system_tokens + 512 + first.regions.scaffold_tokens + first.query_budget);
  const small = await post(ctx.server, '/v1/sessions', { id: uniqueId(), ...SMALL_SESSION,
    retention: { max_tokens: 16 }, query_budget: Math.max(2, used - 200) }, as(SMALL));
  expectStatus(small, 201);
});

test('a quota refusal on the WebSocket names the quota and when to retry', async () => {
  const s = await createAs(LIMITED);
  const ws = new WebSocket(`ws://${ctx.server.host}:${ctx.server.port}/v1/sessions/${s.id}/ws`,
    { headers: { authorization: `Bearer ${LIMITED}` } });
  await new Promise((resolve, reject) => { ws.on('open', resolve); ws.on('error', reject); });
  const replies = [];
  ws.on('message', (m) => {
    const f = JSON.parse(m.toString());
    if (f.op !== 'event') replies.push(f);
  });
  for (let i = 0; i < 3; ++i) ws.send(JSON.stringify({ op: 'push', ref: i, records: textRecords(4, 100 + 4 * i) }));
  for (let i = 0; i < 100 && replies.length < 3; ++i) await sleep(20);
  ws.close();
  const refused = replies.filter((f) => f.op === 'error');
  assert.ok(refused.length >= 1, JSON.stringify(replies));
  assert.equal(refused[0].error.type, 'quota_exceeded');
  assert.equal(refused[0].error.field, 'records_per_s');
  assert.ok(refused[0].error.retry_after > 0);
});

test('/metrics is for admin keys and labels by tenant', async () => {
  await createAs(ACME);
  expectError(await get(ctx.server, '/metrics', as(ACME)), 403, 'forbidden');
  const res = await get(ctx.server, '/metrics', as(ADMIN));
  expectStatus(res, 200);
  assert.match(res.text, /aoi_tenant_sessions\{tenant="acme"\} 1/);
  assert.match(res.text, /aoi_http_requests_total\{route="\/v1\/sessions",method="POST",status="201",tenant="acme"\}/);
  assert.match(res.text, /aoi_quota_refusals_total\{tenant="limited",quota="sessions"\} [1-9]/);
  assert.match(res.text, /aoi_session_data_version\{session="[^"]+",tenant="acme"\}/);
});

test('SIGHUP reloads the keys without a restart; a broken file keeps the keys in use', async () => {
  expectError(await get(ctx.server, '/v1/sessions', as(LATER)), 401, 'unauthorized');
  // Without its key line, beta is gone; a new tenant comes.
  fs.writeFileSync(keyFile, KEYS.replace(`${BETA} beta`, `${LATER} later sessions=0`));
  const reloaded = async (pred) => {
    ctx.server.child.kill('SIGHUP');
    for (let i = 0; i < 100; ++i) {
      if (await pred()) return;
      await sleep(50);
    }
    assert.fail('the reload did not take effect');
  };
  await reloaded(async () => (await get(ctx.server, '/v1/sessions', as(LATER))).status === 200);
  expectError(await get(ctx.server, '/v1/sessions', as(BETA)), 401, 'unauthorized');
  expectError(await post(ctx.server, '/v1/sessions', { ...SMALL_SESSION }, as(LATER)), 429, 'quota_exceeded',
    'sessions');

  fs.writeFileSync(keyFile, `${ACME} acme bogus=1\n`);
  ctx.server.child.kill('SIGHUP');
  await sleep(300);
  assert.match(ctx.server.logs(), /keys in use stay.*unknown quota "bogus"/);
  expectStatus(await get(ctx.server, '/v1/sessions', as(LATER)), 200);
  fs.writeFileSync(keyFile, KEYS);
  await reloaded(async () => (await get(ctx.server, '/v1/sessions', as(BETA))).status === 200);
});

test('a session keeps its tenant across a restart', async () => {
  const { startServer, tempDataDir } = await import('./harness.js');
  const data = tempDataDir();
  const opts = { apiKey: ADMIN, args: ['--api-keys', keyFile], dataDir: data };
  let server = await startServer(opts);
  const id = uniqueId('durable');
  try {
    expectStatus(await post(server, '/v1/sessions', { id, ...SMALL_SESSION }, as(ACME)), 201);
    await server.stop();
    server = await startServer(opts);
    expectStatus(await get(server, `/v1/sessions/${id}`, as(ACME)), 200);
    expectError(await get(server, `/v1/sessions/${id}`, as(BETA)), 404, 'not_found');
    assert.equal((await get(server, `/v1/sessions/${id}`, as(ADMIN))).body.tenant, 'acme');
  } finally {
    await server.stop();
    fs.rmSync(data, { recursive: true, force: true });
  }
});

test('a tenants file with a mistake refuses to start, naming the line', async () => {
  const { startServer } = await import('./harness.js');
  const bad = path.join(dir, 'bad.txt');
  fs.writeFileSync(bad, `${ACME} acme\n${BETA} beta queries_per_s=-1\n`);
  await assert.rejects(startServer({ args: ['--api-keys', bad] }), /bad\.txt:2: queries_per_s must be a number > 0/);
});
