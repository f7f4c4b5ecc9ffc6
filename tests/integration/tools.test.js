// Tool calling on /v1/chat/completions through the official `openai` SDK, and on /v1/messages through
// `@anthropic-ai/sdk`. The server renders chats with
// a Jinja template that knows tools (Qwen 2.5's, from the llama.cpp tree aoi builds), so that llama-common
// gives a grammar for the calls: with a call required, even the random-weight test model makes one whose
// arguments fit the schema, and without the grammar (tool_choice "none") it makes none.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { useServer, post, expectError, createSession, repoRoot } from './harness.js';

const llamaDir = process.env.AOI_LLAMA_DIR || path.join(repoRoot, 'deps', 'llama.cpp');
const TEMPLATE = path.join(llamaDir, 'models', 'templates', 'Qwen-Qwen2.5-7B-Instruct.jinja');
assert.ok(existsSync(TEMPLATE), `the tool-calling template is missing: ${TEMPLATE} (set AOI_LLAMA_DIR)`);

const ctx = useServer({ args: ['--chat-template', TEMPLATE] });
const client = () => new OpenAI({ baseURL: `${ctx.server.url}/v1`, apiKey: 'sk-unused', maxRetries: 0, timeout: 120_000 });

// Short strings and a closed object: random weights seldom end an unbounded string before max_tokens.
const WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['c', 'f'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};
const TIME = {
  type: 'function',
  function: {
    name: 'get_time',
    parameters: { type: 'object', properties: { zone: { type: 'string', enum: ['utc', 'cet'] } }, required: ['zone'] },
  },
};
const tools = [WEATHER, TIME];
const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
const base = { model: 'anything', tools, max_tokens: 300, temperature: 0 };

// A call that names one of the tools, with arguments that parse and hold the schema's required fields.
function assertValidCall(call, names = tools.map((t) => t.function.name)) {
  assert.equal(call.type, 'function');
  assert.match(call.id, /^call_/);
  assert.ok(names.includes(call.function.name), `a tool's name: ${call.function.name}`);
  assert.equal(typeof call.function.arguments, 'string');
  const args = JSON.parse(call.function.arguments);
  const schema = tools.find((t) => t.function.name === call.function.name).function.parameters;
  for (const field of schema.required) assert.ok(field in args, `${field} in ${call.function.arguments}`);
  for (const [field, value] of Object.entries(args)) {
    const spec = schema.properties[field];
    assert.ok(spec, `${field} is one of the schema's properties`);
    assert.equal(typeof value, spec.type === 'string' ? 'string' : typeof value);
    if (spec.enum) assert.ok(spec.enum.includes(value), `${field}: ${value}`);
  }
  return args;
}

test('tool_choice "required": the reply is a call that fits the schema', async () => {
  const r = await client().chat.completions.create({ ...base, messages, tool_choice: 'required' });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
  assert.equal(c.message.content, null);
  assert.ok(c.message.tool_calls.length >= 1, JSON.stringify(c.message));
  for (const call of c.message.tool_calls) assertValidCall(call);
});

test('a named function is the one called', async () => {
  const r = await client().chat.completions.create({
    ...base,
    messages: [{ role: 'user', content: 'What time is it?' }],
    tool_choice: { type: 'function', function: { name: 'get_time' } },
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
  assert.equal(c.message.tool_calls.length, 1, JSON.stringify(c.message));
  assertValidCall(c.message.tool_calls[0], ['get_time']);
});

test('negative control: with tool_choice "none" there is no grammar and no call', async () => {
  const r = await client().chat.completions.create({ ...base, max_tokens: 40, messages, tool_choice: 'none' });
  const c = r.choices[0];
  assert.equal(c.message.tool_calls ?? undefined, undefined, JSON.stringify(c.message));
  assert.equal(typeof c.message.content, 'string');
  assert.notEqual(c.finish_reason, 'tool_calls');
  // The same reply is not what the required call's grammar makes.
  const forced = await client().chat.completions.create({ ...base, max_tokens: 40, messages, tool_choice: 'required' });
  assert.notEqual(forced.choices[0].message.content, c.message.content);
});

test('a conversation with a tool call and its result is rendered and answered', async () => {
  const call = { id: 'call_abc', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris","unit":"c"}' } };
  const asked = [...messages, { role: 'assistant', content: null, tool_calls: [call] }];
  const conversation = [...asked, { role: 'tool', tool_call_id: 'call_abc', content: 'Sunny and 21 degrees, a light breeze' }];
  const r = await client().chat.completions.create({ ...base, max_tokens: 8, messages: conversation });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  // Rendered: the call and its result are part of the prompt.
  const without = await client().chat.completions.create({ ...base, max_tokens: 8, messages });
  assert.ok(r.usage.prompt_tokens > without.usage.prompt_tokens + 10,
    `prompt tokens ${r.usage.prompt_tokens} with the call and result, ${without.usage.prompt_tokens} without`);
  // Also without tools in the request.
  const plain = await client().chat.completions.create({ model: 'anything', max_tokens: 4, temperature: 0, messages: conversation });
  assert.equal(plain.choices[0].message.role, 'assistant');
});

test('streamed, the call is the same as answered whole (temperature 0)', async () => {
  const ask = { ...base, messages: [{ role: 'user', content: 'Weather in Oslo, please.' }], tool_choice: 'required' };
  const stream = await client().chat.completions.create({ ...ask, stream: true });
  const calls = [];
  let finish = null;
  let pieces = 0;
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    if (choice.finish_reason) finish = choice.finish_reason;
    for (const d of choice.delta?.tool_calls ?? []) {
      pieces++;
      if (!calls[d.index]) {
        assert.ok(d.id && d.function?.name, `a call's first delta names it: ${JSON.stringify(d)}`);
        calls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: '' } };
      } else {
        assert.equal(d.function?.name, undefined, 'the name is told once');
      }
      calls[d.index].function.arguments += d.function?.arguments ?? '';
    }
  }
  assert.equal(finish, 'tool_calls');
  assert.ok(calls.length >= 1);
  assert.ok(pieces > 1, `the arguments come in pieces (${pieces} deltas)`);
  for (const call of calls) assertValidCall(call);
  const whole = await client().chat.completions.create(ask);
  const wholeCalls = whole.choices[0].message.tool_calls;
  assert.deepEqual(wholeCalls.map((c) => [c.function.name, c.function.arguments]),
    calls.map((c) => [c.function.name, c.function.arguments]));
});

const badTools = [
  ['tools[0].function.name', { tools: [{ type: 'function', function: { name: 'no spaces allowed' } }] }],
  ['tools[0].function', { tools: [{ type: 'function' }] }],
  ['tools[1].type', { tools: [WEATHER, { type: 'code_interpreter' }] }],
  ['tools[0].function.parameters', { tools: [{ type: 'function', function: { name: 'f', parameters: [1] } }] }],
  ['tools[1].function.name', { tools: [WEATHER, WEATHER] }],
  ['tools', { tools: { type: 'function' } }],
  ['tool_choice.function.name', { tools, tool_choice: { type: 'function', function: { name: 'missing' } } }],
  ['tool_choice', { tools, tool_choice: 'sometimes' }],
  ['tool_choice', { tool_choice: 'required' }],
  ['messages[1].tool_call_id', { messages: [...messages, { role: 'tool', content: 'x' }] }],
  ['messages[1].tool_calls[0].function.arguments',
    { messages: [...messages, { role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: 'not json' } }] }] }],
  ['response_format', { tools, tool_choice: 'required', response_format: { type: 'json_object' } }],
];

for (const [field, extra] of badTools) {
  test(`bad tools: 422 naming ${field}`, async () => {
    const res = await post(ctx.server, '/v1/chat/completions', { model: 'anything', messages, max_tokens: 4, ...extra });
    expectError(res, 422, 'invalid_value', field);
  });
}

test('a session question takes no tools', async () => {
  const s = await createSession(ctx.server);
  const res = await post(ctx.server, '/v1/chat/completions', { model: `session/${s.id}`, messages, tools, max_tokens: 4 });
  expectError(res, 422, 'invalid_value', 'tools');
});

// ---- Anthropic: tools, tool_use and tool_result blocks ----

const anthropic = () => new Anthropic({ baseURL: ctx.server.url, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
const anthropicTools = tools.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters }));
const anthropicBase = { model: 'anything', max_tokens: 300, temperature: 0, tools: anthropicTools };

function assertToolUse(block, names = tools.map((t) => t.function.name)) {
  assert.equal(block.type, 'tool_use');
  assert.match(block.id, /^toolu_/);
  return assertValidCall({ id: 'call_', type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input) } }, names);
}

test('Anthropic: tool_choice any gives tool_use blocks that fit the schema', async () => {
  const m = await anthropic().messages.create({ ...anthropicBase, messages, tool_choice: { type: 'any' } });
  assert.equal(m.stop_reason, 'tool_use', JSON.stringify(m));
  const uses = m.content.filter((b) => b.type === 'tool_use');
  assert.ok(uses.length >= 1, JSON.stringify(m.content));
  for (const u of uses) assertToolUse(u);
  const named = await anthropic().messages.create({
    ...anthropicBase, messages: [{ role: 'user', content: 'Time?' }], tool_choice: { type: 'tool', name: 'get_time' },
  });
  assert.equal(named.stop_reason, 'tool_use');
  assertToolUse(named.content.find((b) => b.type === 'tool_use'), ['get_time']);
});

test('Anthropic: streamed tool_use is the same as answered whole', async () => {
  const ask = { ...anthropicBase, messages: [{ role: 'user', content: 'Weather in Rome?' }], tool_choice: { type: 'any' } };
  const stream = anthropic().messages.stream(ask);
  let inputDeltas = 0;
  stream.on('streamEvent', (e) => {
    if (e.type === 'content_block_delta' && e.delta.type === 'input_json_delta') inputDeltas++;
  });
  const streamed = await stream.finalMessage();
  assert.equal(streamed.stop_reason, 'tool_use');
  assert.ok(inputDeltas > 1, `the input comes in pieces (${inputDeltas})`);
  const whole = await anthropic().messages.create(ask);
  const uses = (m) => m.content.filter((b) => b.type === 'tool_use').map((b) => [b.name, b.input]);
  assert.ok(uses(streamed).length >= 1);
  for (const u of streamed.content.filter((b) => b.type === 'tool_use')) assertToolUse(u);
  assert.deepEqual(uses(streamed), uses(whole));
});

test('Anthropic: a tool_result conversation is rendered; tool choice none makes no call', async () => {
  const convo = [
    ...messages,
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris', unit: 'c' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'Sunny and 21 degrees, a light breeze' }] },
  ];
  const m = await anthropic().messages.create({ ...anthropicBase, max_tokens: 8, messages: convo, tool_choice: { type: 'none' } });
  assert.equal(m.type, 'message');
  assert.ok(!m.content.some((b) => b.type === 'tool_use'), JSON.stringify(m.content));
  assert.notEqual(m.stop_reason, 'tool_use');
  const without = await anthropic().messages.create({ ...anthropicBase, max_tokens: 8, messages, tool_choice: { type: 'none' } });
  assert.ok(m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0) >
    without.usage.input_tokens + (without.usage.cache_read_input_tokens ?? 0) + 10, 'the call and result are in the prompt');
});

for (const [field, extra] of [
  ['tools[0].input_schema', { tools: [{ name: 'f' }] }],
  ['tools[0].name', { tools: [{ name: 'no spaces', input_schema: {} }] }],
  ['tool_choice.name', { tools: anthropicTools, tool_choice: { type: 'tool', name: 'missing' } }],
  ['messages[1].content[0].tool_use_id', { messages: [...messages, { role: 'user', content: [{ type: 'tool_result', content: 'x' }] }] }],
]) {
  test(`Anthropic bad tools: 422 naming ${field}`, async () => {
    const res = await post(ctx.server, '/v1/messages', { model: 'anything', max_tokens: 4, messages, ...extra });
    expectError(res, 422, 'invalid_value', field);
  });
}
