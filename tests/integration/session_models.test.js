// Sessions through the OpenAI and Anthropic endpoints, with the official SDKs: `model: "session/ID"` asks the
// session (the flash, speculative or standard path, as POST /query would), a conversation's earlier turns are
// decoded with the question and leave the session as it was, answers stream as chunks / events, usage counts
// the session's tokens as cached, and the answer names the data version it read. /v1/models lists the
// sessions beside the model.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import {
  useServer, get, post, del, openSSE, createSession, pushRecords, waitIngested, query, textRecords, expectStatus,
  expectError,
} from './harness.js';

const ctx = useServer();
const openai = () => new OpenAI({ baseURL: `${ctx.server.url}/v1`, apiKey: 'sk-unused', maxRetries: 0, timeout: 60_000 });
const anthropic = () => new Anthropic({ baseURL: ctx.server.url, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });

const QUESTION = 'Is the trend UP or DOWN?';

// A session with data ingested: { id, data_version }.
async function sessionWithData(n = 8) {
  const s = await createSession(ctx.server, { system: 'You are a market analyst.' });
  const pushed = await pushRecords(ctx.server, s.id, textRecords(n));
  const ingested = await waitIngested(ctx.server, s.id, pushed.last_seq);
  return { id: s.id, data_version: ingested.data_version };
}

function assertSessionField(r, id, version, where) {
  assert.equal(r.session?.id, id, `${where}: ${JSON.stringify(r)}`);
  assert.equal(r.session.data_version, version, `${where}: ${JSON.stringify(r)}`);
  assert.ok(['flash', 'speculative', 'standard'].includes(r.session.path), `${where}: ${JSON.stringify(r)}`);
}

test('/v1/models lists every session as session/ID beside the model, and forgets a deleted one', async () => {
  const s = await createSession(ctx.server);
  const ids = async () => {
    const out = [];
    for await (const m of await openai().models.list()) out.push(m.id);
    return out;
  };
  const listed = await ids();
  assert.ok(listed.includes(`session/${s.id}`), JSON.stringify(listed));
  assert.ok(!listed[0].startsWith('session/'), 'the model comes first');
  expectStatus(await del(ctx.server, `/v1/sessions/${s.id}`), 200);
  assert.ok(!(await ids()).includes(`session/${s.id}`));
});

test('chat.completions on session/ID answers as POST /query does, with the session\'s tokens as cached', async () => {
  const s = await sessionWithData();
  const asked = await query(ctx.server, s.id, { question: QUESTION, max_tokens: 8 });
  const r = await openai().chat.completions.create({
    model: `session/${s.id}`, messages: [{ role: 'user', content: QUESTION }], max_tokens: 8, temperature: 0,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, `session/${s.id}`);
  assert.equal(r.choices[0].message.content, asked.answer, 'the same greedy answer at the same data version');
  assertSessionField(r, s.id, s.data_version, 'chat');
  assert.equal(r.session.path, 'standard');
  const u = r.usage;
  assert.equal(u.completion_tokens, asked.tokens.answer);
  const context = (await get(ctx.server, `/v1/sessions/${s.id}/context`)).body.tokens.length;
  assert.equal(u.prompt_tokens_details.cached_tokens, context, JSON.stringify(u));
  assert.equal(u.prompt_tokens, context + asked.tokens.question, JSON.stringify(u));
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);

  // /v1/completions: the prompt is the question.
  const c = await openai().completions.create({ model: `session/${s.id}`, prompt: QUESTION, max_tokens: 8, temperature: 0 });
  assert.equal(c.choices[0].text, asked.answer);
  assertSessionField(c, s.id, s.data_version, 'completions');
});

test('a registered flash question is answered from the flash cache, nothing decoded', async () => {
  const s = await createSession(ctx.server);
  expectStatus(await post(ctx.server, `/v1/sessions/${s.id}/flash`, { question: QUESTION, max_tokens: 8 }), 201);
  const { reader } = await openSSE(ctx.server, `/v1/sessions/${s.id}/events`);
  let ready;
  try {
    const pushed = await pushRecords(ctx.server, s.id, textRecords(6));
    const ingested = await waitIngested(ctx.server, s.id, pushed.last_seq);
    ready = await reader.waitFor((e) => e.event === 'flash_ready' && e.json?.version === ingested.data_version,
      'flash_ready');
  } finally {
    reader.close();
  }
  const r = await openai().chat.completions.create({
    model: `session/${s.id}`, messages: [{ role: 'user', content: QUESTION }], max_tokens: 8, temperature: 0,
  });
  assert.equal(r.session.path, 'flash', JSON.stringify(r));
  assert.equal(r.session.data_version, ready.json.version);
  assert.equal(r.choices[0].message.content, ready.json.answer);
  assert.equal(r.usage.prompt_tokens_details.cached_tokens, r.usage.prompt_tokens, 'all of it from the cache');
  assert.ok(r.usage.prompt_tokens > 0);
});

test('streamed through the SDK: the same text, the session in the last chunk, usage when asked', async () => {
  const s = await sessionWithData();
  const req = { model: `session/${s.id}`, messages: [{ role: 'user', content: QUESTION }], max_tokens: 8, temperature: 0 };
  const whole = await openai().chat.completions.create(req);
  const stream = await openai().chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let last = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.choices.length > 0) {
      text += chunk.choices[0].delta?.content ?? '';
      if (chunk.choices[0].finish_reason) last = chunk;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, whole.choices[0].message.content);
  assertSessionField(last, s.id, s.data_version, 'last chunk');
  assert.deepEqual(usage, whole.usage);
});

test('a conversation: earlier turns are decoded with the question and never kept in the session', async () => {
  const s = await sessionWithData();
  const before = (await get(ctx.server, `/v1/sessions/${s.id}/context`)).body;
  const single = await openai().chat.completions.create({
    model: `session/${s.id}`, messages: [{ role: 'user', content: 'And the volume?' }], max_tokens: 6, temperature: 0,
  });
  const talk = await openai().chat.completions.create({
    model: `session/${s.id}`,
    messages: [
      { role: 'system', content: 'Answer in one word.' },
      { role: 'user', content: QUESTION },
      { role: 'assistant', content: 'UP.' },
      { role: 'user', content: 'And the volume?' },
    ],
    max_tokens: 6,
    temperature: 0,
  });
  assert.equal(talk.session.path, 'standard');
  const cached = before.tokens.length;
  assert.equal(talk.usage.prompt_tokens_details.cached_tokens, cached);
  assert.equal(single.usage.prompt_tokens_details.cached_tokens, cached);
  assert.ok(talk.usage.prompt_tokens > single.usage.prompt_tokens + 6, 'the earlier turns were decoded');
  const after = (await get(ctx.server, `/v1/sessions/${s.id}/context`)).body;
  assert.deepEqual(after.tokens, before.tokens, 'nothing of the conversation stayed in the session');
  assert.equal(after.data_version, before.data_version);
  const again = await openai().chat.completions.create({
    model: `session/${s.id}`, messages: [{ role: 'user', content: 'And the volume?' }], max_tokens: 6, temperature: 0,
  });
  assert.equal(again.choices[0].message.content, single.choices[0].message.content);
});

test('messages.create and messages.stream on session/ID (Anthropic)', async () => {
  const s = await sessionWithData();
  const asked = await query(ctx.server, s.id, { question: QUESTION, max_tokens: 8 });
  const req = { model: `session/${s.id}`, max_tokens: 8, temperature: 0, messages: [{ role: 'user', content: QUESTION }] };
  const m = await anthropic().messages.create(req);
  assert.equal(m.model, `session/${s.id}`);
  assert.equal(m.content[0].text, asked.answer);
  assertSessionField(m, s.id, s.data_version, 'message');
  const context = (await get(ctx.server, `/v1/sessions/${s.id}/context`)).body.tokens.length;
  assert.equal(m.usage.cache_read_input_tokens, context, JSON.stringify(m.usage));
  assert.equal(m.usage.input_tokens, asked.tokens.question, 'the question was decoded for the request');
  assert.equal(m.usage.output_tokens, asked.tokens.answer);

  const stream = anthropic().messages.stream(req);
  let text = '';
  stream.on('text', (t) => { text += t; });
  const final = await stream.finalMessage();
  assert.equal(text, asked.answer);
  assert.equal(final.content[0].text, asked.answer);
  assert.equal(final.usage.output_tokens, asked.tokens.answer);

  // A top-level system prompt goes before the question; the session's own system text stays.
  const withSystem = await anthropic().messages.create({ ...req, system: 'Answer in one word.' });
  assert.ok(withSystem.usage.input_tokens > m.usage.input_tokens, JSON.stringify(withSystem.usage));
  assert.equal(withSystem.usage.cache_read_input_tokens, context);
});

test('an unknown session is 404; a conversation that does not end with a question is 422 naming the message', async () => {
  await assert.rejects(
    openai().chat.completions.create({ model: 'session/no-such-session', messages: [{ role: 'user', content: 'q?' }] }),
    (e) => e.status === 404 && e.error?.type === 'not_found');
  await assert.rejects(
    anthropic().messages.create({ model: 'session/no-such-session', max_tokens: 4, messages: [{ role: 'user', content: 'q?' }] }),
    (e) => e.status === 404);
  const s = await createSession(ctx.server);
  const model = `session/${s.id}`;
  const url = '/v1/chat/completions';
  expectError(await post(ctx.server, url, {
    model, messages: [{ role: 'user', content: 'q?' }, { role: 'assistant', content: 'a' }],
  }), 422, 'invalid_value', 'messages[1].role');
  expectError(await post(ctx.server, url, {
    model, messages: [{ role: 'assistant', content: 'a' }, { role: 'user', content: 'q?' }],
  }), 422, 'invalid_value', 'messages[0].role');
  expectError(await post(ctx.server, url, { model, messages: [{ role: 'user', content: '   ' }] }), 422, 'invalid_value',
    'question');
  expectError(await post(ctx.server, '/v1/messages', {
    model, max_tokens: 4, messages: [{ role: 'user', content: 'q?' }, { role: 'assistant', content: 'a' }],
  }), 422, 'invalid_value', 'messages[1].role');
});
