// Sessions: create, list, get, delete.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  useServer, get, post, del, expectStatus, expectError, assertSessionShape, uniqueId, getSession, BAR_TEMPLATE,
  SMALL_SESSION,
} from './harness.js';

const ctx = useServer();

test('create with an id answers 201 and the session as GET shows it', async () => {
  const id = uniqueId('btc');
  const res = await post(ctx.server, '/v1/sessions', { id, system: 'You are a market analyst.' });
  expectStatus(res, 201);
  assert.match(res.headers.get('content-type') || '', /application\/json/);
  assertSessionShape(res.body);
  assert.equal(res.body.id, id);
  assert.equal(res.body.mode, 'stateful', 'default mode');
  assert.equal(res.body.eviction, 'recompute', 'default eviction');
  assert.equal(res.body.retention.evict_fraction, 0.25, 'default evict_fraction');
  assert.equal(res.body.query_budget, 512, 'default query_budget');
  assert.deepEqual(res.body.flash, []);
  assert.ok(res.body.regions.system_tokens > 0, 'the system text is decoded into Region 0');

  const got = await getSession(ctx.server, id);
  assertSessionShape(got);
  assert.equal(got.id, id);
  assert.equal(got.mode, res.body.mode);
  assert.equal(got.eviction, res.body.eviction);
  assert.deepEqual(got.retention, res.body.retention);
  assert.equal(got.query_budget, res.body.query_budget);
  assert.equal(got.created, res.body.created);
});

test('a fresh session has no data', async () => {
  const id = uniqueId();
  const created = await post(ctx.server, '/v1/sessions', { id });
  expectStatus(created, 201);
  const s = await getSession(ctx.server, id);
  assertSessionShape(s);
  assert.equal(s.regions.data_tokens, 0);
  assert.equal(s.regions.records, 0);
  assert.equal(s.last_seq_pushed, 0);
  assert.equal(s.last_seq_ingested, 0);
  assert.equal(s.pending, 0);
  assert.deepEqual(s.records, { pushed: 0, ingested: 0, dropped: 0, rejected: 0, evicted: 0 });
  assert.equal(s.tokens_ingested, 0);
  assert.equal(s.data_version, 0);
});

test('create without an id generates distinct ids', async () => {
  const a = await post(ctx.server, '/v1/sessions', { ...SMALL_SESSION });
  expectStatus(a, 201);
  assertSessionShape(a.body);
  const b = await post(ctx.server, '/v1/sessions', { ...SMALL_SESSION, system: 'x' });
  expectStatus(b, 201);
  assertSessionShape(b.body);
  assert.notEqual(a.body.id, b.body.id);
  const got = await getSession(ctx.server, a.body.id);
  assert.equal(got.id, a.body.id);
});

test('create with no body at all uses the defaults', async () => {
  const res = await post(ctx.server, '/v1/sessions', undefined);
  // An empty body is "all fields optional"; a JSON object is also fine.
  if (res.status === 201) {
    assertSessionShape(res.body);
  } else {
    // A server may insist on a JSON object: then it must say so with the error contract.
    expectError(res, 400, 'malformed_request');
  }
});

test('create with every option reflects them in GET', async () => {
  const id = uniqueId('all');
  const body = {
    id,
    system: 'You are a market analyst.',
    retention: { max_tokens: 2000, max_records: 100, eviction: 'shift', evict_fraction: 0.5 },
    template: BAR_TEMPLATE,
    scaffold: null,
    question_suffix: null,
    mode: 'naive',
    query_budget: 256,
    ready: { question: 'Is the trend UP or DOWN?', vocab: ['UP', 'DOWN'], tau: 2.0 },
  };
  const res = await post(ctx.server, '/v1/sessions', body);
  expectStatus(res, 201);
  assertSessionShape(res.body);
  const s = await getSession(ctx.server, id);
  assertSessionShape(s);
  assert.equal(s.id, id);
  assert.equal(s.mode, 'naive');
  assert.equal(s.eviction, 'shift');
  assert.equal(s.retention.max_tokens, 2000);
  assert.equal(s.retention.max_records, 100);
  assert.equal(s.retention.evict_fraction, 0.5);
  assert.equal(s.query_budget, 256);
});

test('explicit scaffold and question_suffix strings are accepted', async () => {
  const id = uniqueId('scaf');
  const res = await post(ctx.server, '/v1/sessions', {
    id, system: 'sys', scaffold: '\nQuestion: ', question_suffix: '\nAnswer:', retention: { max_records: 5 },
  });
  expectStatus(res, 201);
  const s = await getSession(ctx.server, id);
  assert.ok(s.regions.scaffold_tokens > 0, 'a non-empty scaffold has tokens');
  assert.equal(s.retention.max_records, 5);
  assert.equal(s.retention.max_tokens === null || Number.isInteger(s.retention.max_tokens), true);
});

test('retention with only max_records and the recompute eviction', async () => {
  const id = uniqueId();
  const res = await post(ctx.server, '/v1/sessions', { id, retention: { max_records: 3, eviction: 'recompute' } });
  expectStatus(res, 201);
  assert.equal(res.body.retention.max_records, 3);
  assert.equal(res.body.eviction, 'recompute');
  assert.equal(res.body.mode, 'stateful');
});

test('a duplicate id is a 409 conflict and leaves the first session alone', async () => {
  const id = uniqueId('dup');
  const first = await post(ctx.server, '/v1/sessions', { id, query_budget: 300 });
  expectStatus(first, 201);
  const second = await post(ctx.server, '/v1/sessions', { id, query_budget: 400 });
  expectError(second, 409, 'conflict');
  const s = await getSession(ctx.server, id);
  assert.equal(s.query_budget, 300);
});

test('list returns every session with the GET shape', async () => {
  const ids = [uniqueId('l'), uniqueId('l'), uniqueId('l')];
  for (const id of ids) expectStatus(await post(ctx.server, '/v1/sessions', { id, ...SMALL_SESSION }), 201);
  const res = await get(ctx.server, '/v1/sessions');
  expectStatus(res, 200);
  assert.ok(Array.isArray(res.body.sessions), res.text);
  const listed = res.body.sessions.map((s) => s.id);
  for (const id of ids) assert.ok(listed.includes(id), `${id} not listed: ${listed}`);
  assert.equal(new Set(listed).size, listed.length, 'ids are unique in the list');
  for (const s of res.body.sessions) assertSessionShape(s);
});

test('delete answers {id, deleted: true}; afterwards GET, DELETE, data and query are 404', async () => {
  const id = uniqueId('del');
  expectStatus(await post(ctx.server, '/v1/sessions', { id }), 201);
  const res = await del(ctx.server, `/v1/sessions/${id}`);
  expectStatus(res, 200);
  assert.deepEqual(res.body, { id, deleted: true });

  expectError(await get(ctx.server, `/v1/sessions/${id}`), 404, 'not_found');
  expectError(await del(ctx.server, `/v1/sessions/${id}`), 404, 'not_found');
  expectError(await post(ctx.server, `/v1/sessions/${id}/data`, { records: ['a'] }), 404, 'not_found');
  expectError(await post(ctx.server, `/v1/sessions/${id}/query`, { question: 'q?' }), 404, 'not_found');
  const list = await get(ctx.server, '/v1/sessions');
  assert.ok(!list.body.sessions.some((s) => s.id === id), 'a deleted session is not listed');
});

test('an id can be reused after delete', async () => {
  const id = uniqueId('reuse');
  expectStatus(await post(ctx.server, '/v1/sessions', { id, query_budget: 300 }), 201);
  expectStatus(await del(ctx.server, `/v1/sessions/${id}`), 200);
  const again = await post(ctx.server, '/v1/sessions', { id });
  expectStatus(again, 201);
  assert.equal(again.body.query_budget, 512);
  assert.equal(again.body.data_version, 0);
});

test('an unknown session id is a 404 not_found', async () => {
  expectError(await get(ctx.server, '/v1/sessions/no-such-session'), 404, 'not_found');
  expectError(await del(ctx.server, '/v1/sessions/no-such-session'), 404, 'not_found');
});
