// The Anthropic-compatible endpoint through the official `@anthropic-ai/sdk`.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { useServer, post, openSSE, expectError } from './harness.js';

const ctx = useServer();
const client = () => new Anthropic({ baseURL: ctx.server.url, apiKey: 'unused', maxRetries: 0, timeout: 60_000 });

const params = {
  model: 'anything',
  system: 'You are terse.',
  messages: [{ role: 'user', content: 'Say something about the weather.' }],
  max_tokens: 16,
  temperature: 0,
};

function assertUsage(u) {
  assert.ok(u, 'usage present');
  // A prompt served from the cache counts as read from it, not as input (Anthropic's prompt-caching fields).
  assert.ok(Number.isInteger(u.input_tokens) && u.input_tokens >= 0, JSON.stringify(u));
  const cached = u.cache_read_input_tokens ?? 0;
  assert.ok(Number.isInteger(cached) && cached >= 0, JSON.stringify(u));
  assert.ok(u.input_tokens + cached > 0, JSON.stringify(u));
  assert.ok(Number.isInteger(u.output_tokens) && u.output_tokens >= 0, JSON.stringify(u));
}

function textOf(message) {
  return message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

test('messages.create non-stream: shape and usage', async () => {
  const m = await client().messages.create(params);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(typeof m.id, 'string');
  assert.equal(typeof m.model, 'string');
  assert.ok(Array.isArray(m.content) && m.content.length >= 1, JSON.stringify(m));
  assert.equal(m.content[0].type, 'text');
  assert.equal(typeof m.content[0].text, 'string');
  assert.ok(['end_turn', 'max_tokens', 'stop_sequence'].includes(m.stop_reason), m.stop_reason);
  assertUsage(m.usage);
  assert.ok(m.usage.output_tokens <= 16);
  if (m.stop_reason === 'max_tokens') assert.equal(m.usage.output_tokens, 16);
});

test('messages.stream: the SDK parses every event; final message equals the streamed text', async () => {
  const full = await client().messages.create(params);
  const stream = client().messages.stream(params);
  const types = [];
  let streamed = '';
  stream.on('streamEvent', (ev) => types.push(ev.type));
  stream.on('text', (delta) => {
    streamed += delta;
  });
  const final = await stream.finalMessage();
  assert.equal(types[0], 'message_start', types.join(','));
  assert.equal(types[types.length - 1], 'message_stop', types.join(','));
  assert.ok(types.includes('content_block_start'), types.join(','));
  assert.ok(types.includes('content_block_stop'), types.join(','));
  assert.ok(types.includes('message_delta'), types.join(','));
  const known = new Set(['message_start', 'content_block_start', 'ping', 'content_block_delta', 'content_block_stop',
    'message_delta', 'message_stop']);
  for (const t of types) assert.ok(known.has(t), `unexpected event ${t}`);
  assert.ok(types.indexOf('content_block_start') < types.indexOf('content_block_stop'));
  assert.ok(types.lastIndexOf('content_block_delta') < types.indexOf('content_block_stop'));
  assert.ok(types.indexOf('content_block_stop') < types.indexOf('message_delta'));
  assert.equal(textOf(final), streamed);
  assert.equal(streamed, textOf(full), 'greedy stream equals greedy non-stream');
  assert.ok(['end_turn', 'max_tokens', 'stop_sequence'].includes(final.stop_reason), final.stop_reason);
  assertUsage(final.usage);
  assert.equal(final.usage.output_tokens, full.usage.output_tokens);
});

test('messages.create with stream: true iterates raw events', async () => {
  const stream = await client().messages.create({ ...params, stream: true });
  const types = [];
  let text = '';
  let outputTokens = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') text += ev.delta.text;
    if (ev.type === 'message_delta') {
      assert.ok(ev.usage, 'message_delta carries usage');
      outputTokens = ev.usage.output_tokens;
    }
    if (ev.type === 'message_start') assertUsage({ ...ev.message.usage, output_tokens: ev.message.usage.output_tokens ?? 0 });
  }
  assert.equal(types[0], 'message_start');
  assert.equal(types[types.length - 1], 'message_stop');
  assert.equal(typeof text, 'string');
  assert.ok(Number.isInteger(outputTokens), 'message_delta usage.output_tokens');
});

test('raw SSE framing: event names match the data types', async () => {
  const { status, reader, text } = await openSSE(ctx.server, '/v1/messages', { method: 'POST', json: { ...params, stream: true } });
  assert.equal(status, 200, text);
  const events = await reader.all();
  assert.ok(events.length >= 5, JSON.stringify(events));
  for (const ev of events) {
    assert.ok(ev.json, `JSON data: ${ev.data}`);
    assert.equal(ev.json.type, ev.event, 'the SSE event name is the data type');
  }
});

test('stop_sequences end the message with stop_reason stop_sequence', async () => {
  const full = textOf(await client().messages.create({ ...params, max_tokens: 32 }));
  const m = /[\p{L}\p{N}]{2}/u.exec(full.slice(Math.floor(full.length / 2))) || /[\p{L}\p{N}]{2}/u.exec(full);
  assert.ok(m, `need letters in ${JSON.stringify(full)}`);
  const stop = m[0];
  const cut = full.indexOf(stop);
  const r = await client().messages.create({ ...params, max_tokens: 32, stop_sequences: [stop] });
  assert.equal(r.stop_reason, 'stop_sequence');
  assert.equal(r.stop_sequence, stop);
  assert.equal(textOf(r), full.slice(0, cut), 'Anthropic answers exclude the stop sequence');
});

test('top_k, top_p and multi-turn messages with content blocks are accepted', async () => {
  const m = await client().messages.create({
    ...params,
    temperature: 0.7,
    top_p: 0.9,
    top_k: 40,
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'Hello.' }] },
      { role: 'assistant', content: 'Hi.' },
      { role: 'user', content: [{ type: 'text', text: 'And now?' }] },
    ],
    metadata: { user_id: 'u1' },
  });
  assertUsage(m.usage);
});

test('max_tokens is required; bad values are 422', async () => {
  const { max_tokens: _unused, ...noMax } = params;
  expectError(await post(ctx.server, '/v1/messages', noMax), 422, 'invalid_value', 'max_tokens');
  expectError(await post(ctx.server, '/v1/messages', { ...params, messages: 'hi' }), 422, 'invalid_value', 'messages');
  expectError(await post(ctx.server, '/v1/messages', { ...params, max_tokens: 0 }), 422, 'invalid_value', 'max_tokens');
  await assert.rejects(client().messages.create({ ...params, max_tokens: -1 }),
    (e) => e instanceof Anthropic.APIError && e.status === 422);
  const ok = await client().messages.create({ ...params, max_tokens: 1 });
  assertUsage(ok.usage);
});
