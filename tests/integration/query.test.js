// Queries: the answer shape, read-your-writes, SSE streaming, max_tokens, stop strings, seeded sampling.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  useServer, get, post, expectStatus, expectError, createSession, getSession, pushRecords, waitIngested, query,
  openSSE, textRecords, assertAnswerShape, assertErrorObject, sseErrorBody,
  uniqueId, isNonNegInt,
} from './harness.js';

let sid; // a session with some data, shared by the read-only tests
const ctx = useServer({}, async (server) => {
  const s = await createSession(server, { id: uniqueId('keep'), system: 'You are a market analyst.' });
  sid = s.id;
  const r = await pushRecords(server, sid, textRecords(10));
  await waitIngested(server, sid, r.last_seq);
});

test('non-stream answer: shape and types', async () => {
  const res = await post(ctx.server, `/v1/sessions/${sid}/query`, { question: 'Is the trend UP or DOWN?', max_tokens: 8 });
  expectStatus(res, 200);
  assert.match(res.headers.get('content-type') || '', /application\/json/);
  assertAnswerShape(res.body, { maxTokens: 8 });
  assert.equal(res.body.path, 'standard');
  const s = await getSession(ctx.server, sid);
  assert.equal(res.body.data_version, s.data_version, 'nothing was pushed: the answer is at the current version');
});

test('a query leaves the session unchanged (Region 2 is removed)', async () => {
  const before = await getSession(ctx.server, sid);
  await query(ctx.server, sid, { question: 'What is the last close?', max_tokens: 12 });
  const after = await getSession(ctx.server, sid);
  assert.equal(after.data_version, before.data_version);
  assert.deepEqual(after.regions, before.regions);
  assert.equal(after.kv.cells_used, before.kv.cells_used);
});

test('a query on a session with no data answers', async () => {
  const s = await createSession(ctx.server);
  const a = await query(ctx.server, s.id, { question: 'Anything yet?', max_tokens: 4 });
  assertAnswerShape(a, { maxTokens: 4 });
  assert.equal(a.data_version, s.data_version);
});

test('max_tokens is respected', async () => {
  for (const n of [1, 3, 17]) {
    const a = await query(ctx.server, sid, { question: 'Describe the data.', max_tokens: n, temperature: 0 });
    assertAnswerShape(a, { maxTokens: n });
    if (a.finish_reason === 'length') assert.equal(a.tokens.answer, n, JSON.stringify(a));
  }
});

test('greedy answers are repeatable at the same version', async () => {
  const body = { question: 'Summarize the trend.', max_tokens: 24, temperature: 0 };
  const a = await query(ctx.server, sid, body);
  const b = await query(ctx.server, sid, body);
  assert.equal(a.data_version, b.data_version);
  assert.equal(b.answer, a.answer);
  assert.equal(b.tokens.answer, a.tokens.answer);
});

test('seeded sampling is repeatable', async () => {
  const body = { question: 'Tell me something about it.', max_tokens: 24, temperature: 1.0, seed: 7 };
  const a = await query(ctx.server, sid, body);
  const b = await query(ctx.server, sid, body);
  assert.equal(b.answer, a.answer, 'same seed, same version, same answer');
  assertAnswerShape(a, { maxTokens: 24 });
});

test('stop strings end the answer at their first occurrence', async () => {
  const question = 'Write a long description of the data.';
  const full = await query(ctx.server, sid, { question, max_tokens: 48, temperature: 0 });
  const text = full.answer;
  assert.ok(text.length >= 4, `the greedy answer is long enough to pick a stop string from: ${JSON.stringify(text)}`);
  // A stop string from the middle of the answer: its first occurrence decides where the answer ends.
  // Letters or digits only (no half of a surrogate pair, no replacement character).
  const ok = (ch) => /[\p{L}\p{N}]/u.test(ch) && !/[\uD800-\uDFFF]/.test(ch);
  let mid = Math.floor(text.length / 2);
  while (mid + 1 < text.length && !(ok(text[mid]) && ok(text[mid + 1]))) mid++;
  if (mid + 1 >= text.length) mid = text.search(/[\p{L}\p{N}]{2}/u);
  assert.ok(mid >= 0, `no two letters or digits in a row in ${JSON.stringify(text)}`);
  const stop = text.slice(mid, mid + 2);
  const cut = text.indexOf(stop);
  const a = await query(ctx.server, sid, { question, max_tokens: 48, temperature: 0, stop: [stop, 'never-appears-xyz'] });
  assert.equal(a.data_version, full.data_version);
  assert.equal(a.finish_reason, 'stop', JSON.stringify({ stop, full, a }));
  assert.ok(a.answer === text.slice(0, cut) || a.answer === text.slice(0, cut + stop.length),
    `answer should end at the stop string ${JSON.stringify(stop)}: full ${JSON.stringify(text)}, got ` +
    `${JSON.stringify(a.answer)}`);
  assert.ok(a.tokens.answer <= full.tokens.answer);
});

test('min_seq: read-your-writes answers at a version that includes the pushed records', async () => {
  const s = await createSession(ctx.server);
  const v0 = (await getSession(ctx.server, s.id)).data_version;
  const p = await pushRecords(ctx.server, s.id, textRecords(8));
  const a = await query(ctx.server, s.id, { question: 'What happened?', max_tokens: 4, min_seq: p.last_seq, wait_ms: 30_000 });
  assertAnswerShape(a, { maxTokens: 4 });
  assert.ok(a.data_version > v0, `the answer's version ${a.data_version} includes the push (was ${v0})`);
  const after = await waitIngested(ctx.server, s.id, p.last_seq);
  assert.equal(a.data_version, after.data_version, 'min_seq = the last pushed seq: the answer sees every record');
});

test('min_seq already ingested answers at once', async () => {
  const s = await getSession(ctx.server, sid);
  const a = await query(ctx.server, sid, { question: 'q?', max_tokens: 2, min_seq: s.last_seq_ingested, wait_ms: 1000 });
  assert.equal(a.data_version, s.data_version);
});

test('min_seq that never arrives: 504 timeout after wait_ms', async () => {
  const s = await getSession(ctx.server, sid);
  const res = await post(ctx.server, `/v1/sessions/${sid}/query`,
    { question: 'q?', max_tokens: 2, min_seq: s.last_seq_pushed + 1000, wait_ms: 300 });
  expectError(res, 504, 'timeout');
  const ok = await query(ctx.server, sid, { question: 'still there?', max_tokens: 2 });
  assertAnswerShape(ok);
});

test('min_seq pushed but not yet ingested, with a tiny wait_ms: 504 timeout', async () => {
  const s = await createSession(ctx.server, { retention: { max_records: 50 } });
  const p = await pushRecords(ctx.server, s.id, textRecords(300));
  const res = await post(ctx.server, `/v1/sessions/${s.id}/query`, { question: 'q?', max_tokens: 2, min_seq: p.last_seq, wait_ms: 1 });
  expectError(res, 504, 'timeout');
  const a = await query(ctx.server, s.id, { question: 'q?', max_tokens: 2, min_seq: p.last_seq, wait_ms: 120_000 });
  assertAnswerShape(a, { maxTokens: 2 });
});

test('stream: token events, then done; the tokens concatenate to the answer', async () => {
  const body = { question: 'Describe the data in detail.', max_tokens: 24, temperature: 0, stream: true };
  const { status, headers, reader, text } = await openSSE(ctx.server, `/v1/sessions/${sid}/query`, { method: 'POST', json: body });
  assert.equal(status, 200, text);
  assert.match(headers.get('content-type') || '', /^text\/event-stream/);
  const events = await reader.all();
  assert.ok(events.length >= 1, 'at least the done event');
  const done = events[events.length - 1];
  assert.equal(done.event, 'done', `the last event is done: ${JSON.stringify(events.slice(-3))}`);
  const tokens = events.slice(0, -1);
  for (const ev of tokens) {
    assert.equal(ev.event, 'token', `only token events before done: ${JSON.stringify(ev)}`);
    assert.equal(typeof ev.json?.text, 'string', ev.data);
  }
  assertAnswerShape(done.json, { maxTokens: 24 });
  assert.equal(tokens.map((e) => e.json.text).join(''), done.json.answer);
  if (done.json.tokens.answer > 0) assert.ok(tokens.length >= 1, 'a non-empty answer streams tokens');

  // The same greedy question without streaming gives the same answer.
  const plain = await query(ctx.server, sid, { ...body, stream: false });
  assert.equal(plain.answer, done.json.answer);
});

test('stream errors before the first byte are plain JSON errors', async () => {
  const res = await post(ctx.server, '/v1/sessions/no-such/query', { question: 'q', stream: true });
  expectError(res, 404, 'not_found');
  const bad = await post(ctx.server, `/v1/sessions/${sid}/query`, { question: 'q', stream: true, max_tokens: -1 });
  expectError(bad, 422, 'invalid_value', 'max_tokens');
});

test('stream with min_seq that never arrives: a 504 or an SSE error event', async () => {
  const s = await getSession(ctx.server, sid);
  const r = await openSSE(ctx.server, `/v1/sessions/${sid}/query`, {
    method: 'POST', json: { question: 'q', stream: true, min_seq: s.last_seq_pushed + 1000, wait_ms: 300 },
  });
  if (r.status === 200) {
    const events = await r.reader.all();
    const err = events.find((e) => e.event === 'error');
    assert.ok(err, `an error event: ${JSON.stringify(events)}`);
    assertErrorObject(sseErrorBody(err.json), 'timeout');
  } else {
    assert.equal(r.status, 504, r.text);
    assertErrorObject(r.body, 'timeout');
  }
});

test('naive mode answers with the same shape', async () => {
  const s = await createSession(ctx.server, { mode: 'naive' });
  const p = await pushRecords(ctx.server, s.id, textRecords(4));
  const a = await query(ctx.server, s.id, { question: 'Trend?', max_tokens: 6, min_seq: p.last_seq, wait_ms: 30_000 });
  assertAnswerShape(a, { maxTokens: 6 });
  assert.equal(a.path, 'standard');
});

test('a session with a ready question answers it on the speculative or the standard path', async () => {
  const s = await createSession(ctx.server, { ready: { question: 'Is the trend UP or DOWN?', vocab: ['UP', 'DOWN'], tau: 2.0 } });
  const p = await pushRecords(ctx.server, s.id, textRecords(5));
  await waitIngested(ctx.server, s.id, p.last_seq);
  const a = await query(ctx.server, s.id, { question: 'Is the trend UP or DOWN?', max_tokens: 4 });
  assertAnswerShape(a, { maxTokens: 4 });
  assert.ok(['speculative', 'standard'].includes(a.path), a.path);
  if (a.path === 'speculative') {
    assert.ok(['UP', 'DOWN'].includes(a.answer.trim()), `a speculative answer is from the vocabulary: ${a.answer}`);
    assert.ok(a.logit_gap >= 2.0, `the gap is above tau: ${a.logit_gap}`);
  }
  const other = await query(ctx.server, s.id, { question: 'Is the volume rising?', max_tokens: 4 });
  assert.equal(other.path, 'standard', 'never speculative for another question');
});

// GET /v1/sessions/{id}/context is what the streaming benchmark sends llama-server as its prompt: it must be
// exactly what a full recompute of the session decodes, the retained window only, for either mode.
test('GET /context: the tokens a full recompute decodes, the window only, the same in either mode', async () => {
  const config = { system: 'You are a market analyst.', retention: { max_tokens: 200 } };
  const stateful = await createSession(ctx.server, { ...config, id: uniqueId('ctx') });
  const naive = await createSession(ctx.server, { ...config, id: uniqueId('ctxn'), mode: 'naive' });
  const records = textRecords(30);
  for (const s of [stateful, naive]) {
    const r = await pushRecords(ctx.server, s.id, records);
    await waitIngested(ctx.server, s.id, r.last_seq);
  }
  const s = await getSession(ctx.server, stateful.id);
  assert.ok(s.records.evicted > 0, 'the window should have evicted records');

  const plain = await get(ctx.server, `/v1/sessions/${stateful.id}/context`);
  expectStatus(plain, 200);
  const c = plain.body;
  assert.equal(c.data_version, s.data_version);
  assert.ok(c.tokens.every(isNonNegInt));
  assert.deepEqual(c.question_tokens, []);
  assert.equal(c.tokens.length, s.regions.system_tokens + s.regions.data_tokens + s.regions.scaffold_tokens);
  assert.ok(c.text.includes(config.system));
  assert.ok(c.text.includes(records.at(-1)), 'the newest record is in the window');
  assert.ok(!c.text.includes(records[0]), 'an evicted record is not');
  const retained = records.filter((r) => c.text.includes(r));
  assert.equal(retained.length, s.regions.records);
  assert.deepEqual(retained, records.slice(-s.regions.records), 'the newest records, in order');

  const question = 'Is the trend UP or DOWN?';
  const asked = await get(ctx.server, `/v1/sessions/${stateful.id}/context?question=${encodeURIComponent(question)}`);
  expectStatus(asked, 200);
  assert.deepEqual(asked.body.tokens, c.tokens);
  assert.ok(asked.body.text.includes(question));
  const a = await query(ctx.server, stateful.id, { question, max_tokens: 4 });
  assert.equal(asked.body.question_tokens.length, a.tokens.question, 'the question as the session decodes it');

  const n = await get(ctx.server, `/v1/sessions/${naive.id}/context?question=${encodeURIComponent(question)}`);
  expectStatus(n, 200);
  assert.deepEqual(n.body.tokens, c.tokens, 'a naive session of the same configuration holds the same window');
  assert.deepEqual(n.body.question_tokens, asked.body.question_tokens);

  expectError(await get(ctx.server, '/v1/sessions/no-such-session/context'), 404, 'not_found');
});
