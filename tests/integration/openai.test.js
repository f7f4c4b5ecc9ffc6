// The OpenAI-compatible endpoints through the official `openai` SDK, and the raw SSE framing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { useServer, post, openSSE, expectError, expectStatus } from './harness.js';

const ctx = useServer();
const client = () => new OpenAI({ baseURL: `${ctx.server.url}/v1`, apiKey: 'sk-unused', maxRetries: 0, timeout: 60_000 });

function assertUsage(u) {
  assert.ok(u, 'usage present');
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
    assert.ok(Number.isInteger(u[k]) && u[k] >= 0, `usage.${k}: ${JSON.stringify(u)}`);
  }
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  assert.ok(u.prompt_tokens > 0);
  const cached = u.prompt_tokens_details?.cached_tokens;
  assert.ok(Number.isInteger(cached) && cached >= 0 && cached <= u.prompt_tokens, `cached_tokens: ${JSON.stringify(u)}`);
}

async function metric(name, labels = '') {
  const text = await (await fetch(`${ctx.server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  assert.ok(line, `${name}${labels} in /metrics`);
  return Number(line.split(' ')[1]);
}

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Say something about the weather.' },
];

test('models.list', async () => {
  const page = await client().models.list();
  const models = [];
  for await (const m of page) models.push(m);
  assert.ok(models.length >= 1, 'at least the loaded model');
  for (const m of models) {
    assert.equal(typeof m.id, 'string');
    assert.ok(m.id.length > 0);
    assert.equal(m.object, 'model');
    assert.equal(m.owned_by, 'aoi');
  }
  const raw = await fetch(`${ctx.server.url}/v1/models`);
  assert.equal(raw.status, 200);
  assert.equal((await raw.json()).object, 'list');
});

test('chat.completions.create non-stream: shape and usage', async () => {
  const r = await client().chat.completions.create({ model: 'anything', messages, max_tokens: 12, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(typeof r.id, 'string');
  assert.equal(typeof r.model, 'string');
  assert.ok(Number.isInteger(r.created));
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['stop', 'length'].includes(c.finish_reason), c.finish_reason);
  assertUsage(r.usage);
  assert.ok(r.usage.completion_tokens <= 12);
  if (c.finish_reason === 'length') assert.equal(r.usage.completion_tokens, 12);
});

test('max_completion_tokens is honoured like max_tokens', async () => {
  const r = await client().chat.completions.create({ model: 'm', messages, max_completion_tokens: 3, temperature: 0 });
  assertUsage(r.usage);
  assert.ok(r.usage.completion_tokens <= 3, JSON.stringify(r.usage));
});

test('chat.completions.create stream: chunks, usage, [DONE]; same text as non-stream', async () => {
  const params = { model: 'm', messages, max_tokens: 16, temperature: 0 };
  const full = await client().chat.completions.create(params);
  const stream = await client().chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage = null;
  let finish = null;
  let chunks = 0;
  let id = null;
  for await (const chunk of stream) {
    chunks += 1;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (id === null) id = chunk.id;
    assert.equal(chunk.id, id, 'one id for every chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const ch of chunk.choices) {
      if (ch.delta?.content) text += ch.delta.content;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.ok(chunks >= 2);
  assert.ok(['stop', 'length'].includes(finish), `a finish_reason in the last choice chunk: ${finish}`);
  assertUsage(usage);
  assert.equal(text, full.choices[0].message.content, 'greedy stream equals greedy non-stream');
  assert.equal(usage.completion_tokens, full.usage.completion_tokens);
});

test('chat stream raw framing ends with data: [DONE]', async () => {
  const { status, reader, text, headers } = await openSSE(ctx.server, '/v1/chat/completions', {
    method: 'POST', json: { model: 'm', messages, max_tokens: 4, stream: true },
  });
  assert.equal(status, 200, text);
  assert.match(headers.get('content-type') || '', /^text\/event-stream/);
  const events = await reader.all();
  assert.ok(events.length >= 2);
  assert.equal(events[events.length - 1].data, '[DONE]');
  for (const ev of events.slice(0, -1)) assert.ok(ev.json, `each chunk is JSON: ${ev.data}`);
});

test('seeded sampling is repeatable', async () => {
  const params = { model: 'm', messages, max_tokens: 16, temperature: 1.0, top_p: 0.9, seed: 42 };
  const a = await client().chat.completions.create(params);
  const b = await client().chat.completions.create(params);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
});

test('stop sequences end the message', async () => {
  const params = { model: 'm', messages, max_tokens: 32, temperature: 0 };
  const full = (await client().chat.completions.create(params)).choices[0].message.content;
  const m = /[\p{L}\p{N}]{2}/u.exec(full.slice(Math.floor(full.length / 2))) || /[\p{L}\p{N}]{2}/u.exec(full);
  assert.ok(m, `need letters in ${JSON.stringify(full)}`);
  const stop = m[0];
  const cut = full.indexOf(stop);
  const r = await client().chat.completions.create({ ...params, stop: [stop] });
  const got = r.choices[0].message.content;
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(got, full.slice(0, cut), `OpenAI answers exclude the stop string ${JSON.stringify(stop)}`);
});

test('completions.create non-stream and stream', async () => {
  const r = await client().completions.create({ model: 'm', prompt: 'Once upon a time', max_tokens: 10, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assertUsage(r.usage);
  assert.ok(r.usage.completion_tokens <= 10);

  const stream = await client().completions.create({ model: 'm', prompt: 'Once upon a time', max_tokens: 10, temperature: 0,
    stream: true });
  let text = '';
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'text_completion');
    for (const ch of chunk.choices) text += ch.text ?? '';
  }
  assert.equal(text, r.choices[0].text, 'greedy stream equals greedy non-stream');
});

test('the SDK ignores unused fields it sends; bad values are errors', async () => {
  const r = await client().chat.completions.create({
    model: 'm', messages, max_tokens: 2, user: 'someone', n: 1, presence_penalty: 0, frequency_penalty: 0,
    logit_bias: {}, response_format: { type: 'text' }, metadata: { a: 'b' },
  });
  assertUsage(r.usage);
  expectError(await post(ctx.server, '/v1/chat/completions', { model: 'm', max_tokens: 2 }), 422, 'invalid_value', 'messages');
  expectError(await post(ctx.server, '/v1/chat/completions', { model: 'm', messages: 'hi' }), 422, 'invalid_value', 'messages');
  expectError(await post(ctx.server, '/v1/chat/completions', { model: 'm', messages, max_tokens: -5 }), 422, 'invalid_value', 'max_tokens');
  expectError(await post(ctx.server, '/v1/completions', { model: 'm', prompt: 7 }), 422, 'invalid_value', 'prompt');
  await assert.rejects(client().chat.completions.create({ model: 'm', messages, max_tokens: -1 }),
    (e) => e instanceof OpenAI.APIError && e.status === 422);
  expectStatus(await post(ctx.server, '/v1/completions', { model: 'm', prompt: 'ok', max_tokens: 1 }), 200);
});

test('cached prompt tokens: a chat\'s next turn reuses its prefix, an identical request is answered from the cache', async () => {
  let system = 'You answer questions about the desk. ';
  for (let i = 0; i < 15; i++) system += `Rule ${i}: keep figures exact. `;
  const turn1 = [{ role: 'system', content: system }, { role: 'user', content: 'What is the first rule?' }];
  const hitsBefore = await metric('aoi_response_cache_lookups_total', '{result="hit"}');
  const first = await client().chat.completions.create({ model: 'm', messages: turn1, max_tokens: 6, temperature: 0 });
  assertUsage(first.usage);
  // The same request again: the same answer, every prompt token cached, no inference.
  const again = await client().chat.completions.create({ model: 'm', messages: turn1, max_tokens: 6, temperature: 0 });
  assert.equal(again.choices[0].message.content, first.choices[0].message.content);
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens);
  assert.equal(await metric('aoi_response_cache_lookups_total', '{result="hit"}'), hitsBefore + 1);
  // The next turn starts from the first turn's prompt and answer, held by its slot.
  const turn2 = [...turn1, { role: 'assistant', content: first.choices[0].message.content },
    { role: 'user', content: 'And the second?' }];
  const second = await client().chat.completions.create({ model: 'm', messages: turn2, max_tokens: 6, temperature: 0 });
  assertUsage(second.usage);
  assert.ok(second.usage.prompt_tokens_details.cached_tokens > first.usage.prompt_tokens / 2, JSON.stringify(second.usage));
  assert.ok(await metric('aoi_prefix_cache_tokens_total') > 0);
  // Sampled without a seed: never from the cache.
  const sampled = { model: 'm', messages: turn1, max_tokens: 4, temperature: 0.9 };
  await client().chat.completions.create(sampled);
  const s2 = await client().chat.completions.create(sampled);
  assert.ok(s2.usage.prompt_tokens_details.cached_tokens < s2.usage.prompt_tokens, JSON.stringify(s2.usage));
});
