// Flash queries: register, list, flash_ready events, the flash answer path, remove.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  useServer, get, post, del, expectStatus, expectError, createSession, getSession, pushRecords, waitIngested,
  openSSE, textRecords, query, assertAnswerShape, assertNonNegInt, assertNumber,
} from './harness.js';

const ctx = useServer();

function assertFlashEntry(f) {
  const c = JSON.stringify(f);
  for (const k of ['fid', 'question', 'max_tokens', 'answer', 'logit_gap', 'version', 'eval_ms']) {
    assert.ok(k in f, `${k} missing: ${c}`);
  }
  assert.equal(typeof f.fid, 'string', c);
  assert.equal(typeof f.question, 'string', c);
  assertNonNegInt(f.max_tokens, 'max_tokens');
}

test('register, list, flash_ready after data, flash answer path, remove', async () => {
  const s = await createSession(ctx.server, { system: 'You watch a market.' });
  const question = 'What is the last close?';
  const created = await post(ctx.server, `/v1/sessions/${s.id}/flash`, { question, max_tokens: 8 });
  expectStatus(created, 201);
  assert.equal(typeof created.body.fid, 'string', created.text);
  const fid = created.body.fid;

  const list = await get(ctx.server, `/v1/sessions/${s.id}/flash`);
  expectStatus(list, 200);
  assert.ok(Array.isArray(list.body.flash), list.text);
  const entry = list.body.flash.find((f) => f.fid === fid);
  assert.ok(entry, `the new flash query is listed: ${list.text}`);
  assert.equal(entry.question, question);
  assert.equal(entry.max_tokens, 8);
  assert.equal((await getSession(ctx.server, s.id)).flash.length, 1, 'GET session lists it too');

  const { status, reader, text } = await openSSE(ctx.server, `/v1/sessions/${s.id}/events`);
  assert.equal(status, 200, text);
  let ready;
  try {
    const p = await pushRecords(ctx.server, s.id, textRecords(6));
    const ingested = await waitIngested(ctx.server, s.id, p.last_seq);
    ready = await reader.waitFor((e) => e.event === 'flash_ready' && e.json?.version === ingested.data_version,
      `flash_ready at version ${ingested.data_version}`);
    const d = ready.json;
    for (const k of ['id', 'question', 'answer', 'logit_gap', 'version', 'eval_ms']) assert.ok(k in d, `${k}: ${ready.data}`);
    assert.equal(d.id, fid);
    assert.equal(d.question, question);
    assert.equal(typeof d.answer, 'string');
    assertNumber(d.logit_gap, 'logit_gap');
    assertNumber(d.eval_ms, 'eval_ms');
    assert.ok(/^\d+$/.test(ready.id), `flash_ready carries an event id: ${ready.id}`);
  } finally {
    reader.close();
  }

  const listed = (await get(ctx.server, `/v1/sessions/${s.id}/flash`)).body.flash.find((f) => f.fid === fid);
  assertFlashEntry(listed);
  assert.equal(listed.answer, ready.json.answer);
  assert.equal(listed.version, ready.json.version);

  const a = await query(ctx.server, s.id, { question, max_tokens: 8 });
  assertAnswerShape(a, { maxTokens: 8 });
  assert.equal(a.path, 'flash', `a registered question at its version is a flash hit: ${JSON.stringify(a)}`);
  assert.equal(a.answer, ready.json.answer);
  assert.equal(a.data_version, ready.json.version);

  const removed = await del(ctx.server, `/v1/sessions/${s.id}/flash/${fid}`);
  expectStatus(removed, 200);
  const after = await get(ctx.server, `/v1/sessions/${s.id}/flash`);
  assert.ok(!after.body.flash.some((f) => f.fid === fid), 'removed');
  expectError(await del(ctx.server, `/v1/sessions/${s.id}/flash/${fid}`), 404, 'not_found');
  const again = await query(ctx.server, s.id, { question, max_tokens: 8 });
  assert.equal(again.path, 'standard', 'no flash hit after removal');
});

test('a flash query not yet evaluated lists every documented field (null until evaluated)', async () => {
  const s = await createSession(ctx.server);
  const created = await post(ctx.server, `/v1/sessions/${s.id}/flash`, { question: 'Anything?', max_tokens: 4 });
  expectStatus(created, 201);
  const list = await get(ctx.server, `/v1/sessions/${s.id}/flash`);
  expectStatus(list, 200);
  assert.equal(list.body.flash.length, 1);
  assertFlashEntry(list.body.flash[0]);
});

test('flash errors: unknown session, unknown fid, bad fields', async () => {
  const s = await createSession(ctx.server);
  expectError(await post(ctx.server, '/v1/sessions/no-such/flash', { question: 'q' }), 404, 'not_found');
  expectError(await get(ctx.server, '/v1/sessions/no-such/flash'), 404, 'not_found');
  expectError(await del(ctx.server, `/v1/sessions/${s.id}/flash/f-unknown`), 404, 'not_found');
  expectError(await post(ctx.server, `/v1/sessions/${s.id}/flash`, { question: 'q', bogus: 1 }), 422, 'invalid_value', 'bogus');
  expectError(await post(ctx.server, `/v1/sessions/${s.id}/flash`, { question: 5 }), 422, 'invalid_value', 'question');
  expectError(await post(ctx.server, `/v1/sessions/${s.id}/flash`, { question: 'q', max_tokens: -1 }), 422, 'invalid_value', 'max_tokens');
  const list = await get(ctx.server, `/v1/sessions/${s.id}/flash`);
  expectStatus(list, 200);
  assert.deepEqual(list.body.flash, []);
});
