// Concurrent clients: parallel sessions pushing and querying, plus stateless traffic, all complete and correct.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import {
  useServer, http, post, del, expectStatus, expectAlive, createSession, pushRecords, waitIngested, query, openSSE,
  textRecords, assertAnswerShape, getSession,
} from './harness.js';

const ctx = useServer();
const N = 8;

// Short records and small sessions, so that eight of them fit the test server's KV cells.
const shortRecords = (n, start) => Array.from({ length: n }, (_, k) => `r${start + k} v=${(start + k) % 97}`);

async function sessionWorkload(i) {
  const s = await createSession(ctx.server, { system: `Session ${i} watches stream ${i}.`, retention: { max_tokens: 160 },
    query_budget: 64 });
  const pushes = [];
  pushes.push(await pushRecords(ctx.server, s.id, shortRecords(3, i * 100)));
  const t = await http(ctx.server, 'POST', `/v1/sessions/${s.id}/data`, {
    body: `${shortRecords(2, i * 100 + 3).join('\n')}\n`, headers: { 'content-type': 'text/plain' },
  });
  expectStatus(t, 202);
  pushes.push(t.body);
  const nd = await http(ctx.server, 'POST', `/v1/sessions/${s.id}/data`, {
    body: `${shortRecords(2, i * 100 + 5).map((r) => JSON.stringify(r)).join('\n')}\n`,
    headers: { 'content-type': 'application/x-ndjson' },
  });
  expectStatus(nd, 202);
  pushes.push(nd.body);
  for (let k = 1; k < pushes.length; k++) assert.equal(pushes[k].first_seq, pushes[k - 1].last_seq + 1, `session ${i} seqs`);
  const lastSeq = pushes[pushes.length - 1].last_seq;

  const a = await query(ctx.server, s.id, { question: `What does stream ${i} show?`, max_tokens: 8, min_seq: lastSeq,
    wait_ms: 60_000 });
  assertAnswerShape(a, { maxTokens: 8 });

  const { status, reader } = await openSSE(ctx.server, `/v1/sessions/${s.id}/query`, {
    method: 'POST', json: { question: `Stream ${i}, in detail?`, max_tokens: 12, stream: true, min_seq: lastSeq, wait_ms: 60_000 },
  });
  assert.equal(status, 200);
  const events = await reader.all();
  const done = events[events.length - 1];
  assert.equal(done?.event, 'done', `session ${i}: ${JSON.stringify(events.slice(-2))}`);
  assertAnswerShape(done.json, { maxTokens: 12 });
  assert.equal(events.slice(0, -1).map((e) => e.json.text).join(''), done.json.answer, `session ${i}: tokens = answer`);

  const final = await waitIngested(ctx.server, s.id, lastSeq);
  assert.equal(final.records.pushed, 7, `session ${i} sees only its own records`);
  assert.equal(final.regions.records, 7);
  assert.equal(a.data_version, final.data_version, `session ${i}: read-your-writes`);
  assert.equal(done.json.data_version, final.data_version);
  return s.id;
}

async function statelessWorkload(i) {
  if (i % 3 === 0) {
    const c = new OpenAI({ baseURL: `${ctx.server.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 120_000 });
    const r = await c.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: `Hello ${i}` }], max_tokens: 8 });
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(r.usage.completion_tokens <= 8);
  } else if (i % 3 === 1) {
    const c = new OpenAI({ baseURL: `${ctx.server.url}/v1`, apiKey: 'x', maxRetries: 0, timeout: 120_000 });
    const stream = await c.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: `Stream ${i}` }],
      max_tokens: 8, stream: true, stream_options: { include_usage: true } });
    let usage = null;
    let finish = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) if (ch.finish_reason) finish = ch.finish_reason;
    }
    assert.ok(usage, 'usage chunk');
    assert.ok(finish, 'finish_reason');
  } else {
    const c = new Anthropic({ baseURL: ctx.server.url, apiKey: 'x', maxRetries: 0, timeout: 120_000 });
    const m = await c.messages.stream({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: `Hi ${i}` }] }).finalMessage();
    assert.equal(m.type, 'message');
    assert.ok(m.usage.output_tokens <= 8);
  }
}

test(`${N} sessions pushing and querying in parallel, with stateless traffic`, async () => {
  const results = await Promise.allSettled([
    ...Array.from({ length: N }, (_, i) => sessionWorkload(i)),
    ...Array.from({ length: N }, (_, i) => statelessWorkload(i)),
  ]);
  const failures = results.map((r, i) => (r.status === 'rejected'
    ? `${i < N ? `session workload ${i}` : `stateless workload ${i - N}`}: ${String(r.reason?.message ?? r.reason).slice(0, 600)}`
    : null)).filter(Boolean);
  assert.deepEqual(failures, [], failures.join('\n\n'));
  const ids = results.slice(0, N).map((r) => r.value);
  assert.equal(new Set(ids).size, N);
  await Promise.all(ids.map(async (id) => expectStatus(await del(ctx.server, `/v1/sessions/${id}`), 200)));
  await expectAlive(ctx.server);
});

test('many queries on one session at once', async () => {
  const s = await createSession(ctx.server);
  const p = await pushRecords(ctx.server, s.id, textRecords(5));
  await waitIngested(ctx.server, s.id, p.last_seq);
  const version = (await getSession(ctx.server, s.id)).data_version;
  const answers = await Promise.all(Array.from({ length: 12 }, (_, i) =>
    query(ctx.server, s.id, { question: `Question number ${i}?`, max_tokens: 4 + (i % 4) })));
  answers.forEach((a, i) => {
    assertAnswerShape(a, { maxTokens: 4 + (i % 4) });
    assert.equal(a.data_version, version);
  });
});

test('pushes and queries interleaved on one session keep versions monotonic', async () => {
  const s = await createSession(ctx.server);
  const ops = [];
  for (let i = 0; i < 10; i++) {
    ops.push(pushRecords(ctx.server, s.id, textRecords(2, i * 2)));
    ops.push(post(ctx.server, `/v1/sessions/${s.id}/query`, { question: `q${i}?`, max_tokens: 3 }));
  }
  const results = await Promise.all(ops);
  let maxSeq = 0;
  for (let i = 0; i < results.length; i += 2) maxSeq = Math.max(maxSeq, results[i].last_seq);
  for (let i = 1; i < results.length; i += 2) {
    expectStatus(results[i], 200);
    assertAnswerShape(results[i].body, { maxTokens: 3 });
  }
  const final = await waitIngested(ctx.server, s.id, maxSeq);
  assert.equal(final.records.pushed, 20);
  for (let i = 1; i < results.length; i += 2) assert.ok(results[i].body.data_version <= final.data_version);
  const last = await query(ctx.server, s.id, { question: 'now?', max_tokens: 2, min_seq: maxSeq, wait_ms: 30_000 });
  assert.equal(last.data_version, final.data_version);
});
