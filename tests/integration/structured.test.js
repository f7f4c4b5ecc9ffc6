// Sampling beyond temperature on the OpenAI/Anthropic endpoints: response_format's JSON schemas become
// llama.cpp grammars that hold even for the tiny random-weight test model, the extra samplers are accepted
// and validated, and what aoi cannot do (tools the chat template cannot show, logprobs, n > 1) is refused naming
// the field.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import {
  useServer, get, post, expectError, expectStatus, createSession, pushRecords, waitIngested, waitSession, textRecords, query,
} from './harness.js';

const ctx = useServer();
const openai = () => new OpenAI({ baseURL: `${ctx.server.url}/v1`, apiKey: 'sk-unused', maxRetries: 0, timeout: 60_000 });

const COLOURS = ['red', 'green', 'blue'];
// An enum keeps the constrained answer short: it must complete well within max_tokens.
const SCHEMA = {
  type: 'object',
  properties: { colour: { type: 'string', enum: COLOURS } },
  required: ['colour'],
  additionalProperties: false,
};
const messages = [{ role: 'user', content: 'Pick a colour and answer in JSON.' }];

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function assertMatchesSchema(text) {
  const v = parseJson(text);
  assert.ok(v && typeof v === 'object' && !Array.isArray(v), `not a JSON object: ${JSON.stringify(text)}`);
  assert.deepEqual(Object.keys(v), ['colour'], text);
  assert.ok(COLOURS.includes(v.colour), text);
}

test('response_format json_schema: the answer is JSON that validates against the schema', async () => {
  for (const temperature of [0, 1]) {
    const r = await openai().chat.completions.create({
      model: 'anything', messages, max_tokens: 64, temperature, seed: 5,
      response_format: { type: 'json_schema', json_schema: { name: 'colour', strict: true, schema: SCHEMA } },
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'stop', `temperature ${temperature}: ${JSON.stringify(c)}`);
    assertMatchesSchema(c.message.content);
  }
});

test('response_format json_schema constrains a streamed answer and /v1/completions too', async () => {
  const stream = await openai().chat.completions.create({
    model: 'anything', messages, max_tokens: 64, stream: true,
    response_format: { type: 'json_schema', json_schema: { name: 'colour', schema: SCHEMA } },
  });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
  assertMatchesSchema(text);
  const res = await post(ctx.server, '/v1/completions', {
    prompt: 'Colour:', max_tokens: 64,
    response_format: { type: 'json_schema', json_schema: { name: 'colour', schema: SCHEMA } },
  });
  expectStatus(res, 200);
  assertMatchesSchema(res.body.choices[0].text);
});

test('response_format json_object gives a JSON object', async () => {
  const r = await openai().chat.completions.create({
    model: 'anything', messages, max_tokens: 256, temperature: 0, response_format: { type: 'json_object' },
  });
  const c = r.choices[0];
  // An open object may run past max_tokens with random weights; what was written is then a JSON prefix.
  if (c.finish_reason === 'stop') {
    const v = parseJson(c.message.content);
    assert.ok(v && typeof v === 'object' && !Array.isArray(v), c.message.content);
  } else {
    assert.match(c.message.content, /^\s*\{/);
  }
});

test('negative control: without response_format the random weights do not write valid JSON', async () => {
  const r = await openai().chat.completions.create({ model: 'anything', messages, max_tokens: 64, temperature: 0 });
  const v = parseJson(r.choices[0].message.content);
  assert.ok(!(v && typeof v === 'object'), `unexpectedly JSON: ${r.choices[0].message.content}`);
});

test('a grammar, a bias or a penalty never shares a cached answer with the plain request', async () => {
  const base = { model: 'anything', messages, max_tokens: 64, temperature: 0 };
  const plain = (await openai().chat.completions.create(base)).choices[0].message.content;
  const constrained = (await openai().chat.completions.create({
    ...base, response_format: { type: 'json_schema', json_schema: { name: 'colour', schema: SCHEMA } },
  })).choices[0].message.content;
  assert.notEqual(constrained, plain);
  assertMatchesSchema(constrained);
  const penalized = await openai().chat.completions.create({ ...base, frequency_penalty: 2, presence_penalty: 2 });
  const again = await openai().chat.completions.create({ ...base, frequency_penalty: 2, presence_penalty: 2 });
  assert.equal(again.choices[0].message.content, penalized.choices[0].message.content, 'greedy: deterministic');
});

test('the extra samplers are accepted through the SDKs', async () => {
  const r = await openai().chat.completions.create({
    model: 'anything', messages, max_tokens: 8, temperature: 0.8, seed: 3, top_p: 0.9,
    presence_penalty: 0.5, frequency_penalty: 0.5, logit_bias: { 42: -100, 7: 5 },
    // llama.cpp's fields that OpenAI lacks
    min_p: 0.05, repeat_penalty: 1.1, repeat_last_n: 32,
    user: 'u1', store: false, metadata: { k: 'v' }, service_tier: 'auto', parallel_tool_calls: false,
  });
  assert.equal(typeof r.choices[0].message.content, 'string');
  const anthropic = new Anthropic({ baseURL: ctx.server.url, apiKey: 'unused', maxRetries: 0 });
  const m = await anthropic.messages.create({ model: 'anything', max_tokens: 8, messages, top_k: 40 });
  assert.equal(m.type, 'message');
});

const refusals = [
  // test-micro's chat template shows no tools to the model (tools.test.js gives the server one that does).
  ['tools', { tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] }],
  ['tool_choice', { tool_choice: 'required' }], // no tools to call
  ['functions', { functions: [{ name: 'f' }] }],
  ['function_call', { function_call: { name: 'f' } }],
  ['logprobs', { logprobs: true }],
  ['top_logprobs', { top_logprobs: 3 }],
  ['n', { n: 2 }],
  ['messages[0].role', { messages: [{ role: 'function', name: 'f', content: '1' }] }],
  ['messages[0].tool_call_id', { messages: [{ role: 'tool', content: '1' }] }],
  ['min_p', { min_p: 2 }],
  ['repeat_penalty', { repeat_penalty: 0 }],
  ['presence_penalty', { presence_penalty: 3 }],
  ['frequency_penalty', { frequency_penalty: -3 }],
  ['logit_bias', { logit_bias: { x: 1 } }],
  ['logit_bias.5', { logit_bias: { 5: 200 } }],
  ['logit_bias', { logit_bias: { 99999999: 1 } }],
  ['response_format.type', { response_format: { type: 'yaml' } }],
  ['response_format.json_schema.schema',
    { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#/definitions/none' } } } }],
];

for (const [field, extra] of refusals) {
  test(`422 naming ${field}`, async () => {
    const res = await post(ctx.server, '/v1/chat/completions', { model: 'anything', messages, max_tokens: 4, ...extra });
    expectError(res, 422, 'invalid_value', field);
  });
}

test('Anthropic: tools are refused naming the field', async () => {
  const res = await post(ctx.server, '/v1/messages', {
    model: 'anything', max_tokens: 4, messages, tools: [{ name: 'f', input_schema: { type: 'object' } }],
  });
  expectError(res, 422, 'invalid_value', 'tools');
});

test('a session question with json_schema gets an answer that validates', async () => {
  const s = await createSession(ctx.server);
  const pushed = await pushRecords(ctx.server, s.id, textRecords(4));
  await waitIngested(ctx.server, s.id, pushed.last_seq);
  const a = await query(ctx.server, s.id, { question: 'Which colour?', max_tokens: 64, json_schema: SCHEMA });
  assert.equal(a.finish_reason, 'eog', `the grammar ended the answer: ${JSON.stringify(a)}`);
  assertMatchesSchema(a.answer);
  const plain = await query(ctx.server, s.id, { question: 'Which colour?', max_tokens: 64 });
  assert.notEqual(plain.answer, a.answer);
  const bad = await post(ctx.server, `/v1/sessions/${s.id}/query`, { question: 'q', json_schema: [1] });
  expectError(bad, 422, 'invalid_value', 'json_schema');
});

test('a flash query with json_schema answers in it, and serves only questions asking with that schema', async () => {
  const s = await createSession(ctx.server);
  const question = 'Which colour, as JSON?';
  const created = await post(ctx.server, `/v1/sessions/${s.id}/flash`, { question, max_tokens: 64, json_schema: SCHEMA });
  expectStatus(created, 201);
  assert.deepEqual(created.body.json_schema, SCHEMA, 'the registration shows its schema');
  const pushed = await pushRecords(ctx.server, s.id, textRecords(4));
  const { data_version: version } = await waitIngested(ctx.server, s.id, pushed.last_seq);
  const listed = await waitSession(ctx.server, s.id, (x) => x.flash[0]?.version === version, 'the flash answer');
  assert.deepEqual(listed.flash[0].json_schema, SCHEMA);
  assertMatchesSchema(listed.flash[0].answer);
  const hit = await query(ctx.server, s.id, { question, max_tokens: 64, json_schema: SCHEMA });
  assert.equal(hit.path, 'flash', JSON.stringify(hit));
  assert.equal(hit.answer, listed.flash[0].answer);
  const plain = await query(ctx.server, s.id, { question, max_tokens: 64 });
  assert.equal(plain.path, 'standard', 'a question without the schema is not the flash query\'s');
  assert.equal(parseJson(plain.answer), undefined, `control: the random weights alone write no JSON: ${plain.answer}`);
  const other = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
  assert.equal((await query(ctx.server, s.id, { question, max_tokens: 64, json_schema: other })).path, 'standard');
  // The same question again, with or without a schema, is a conflict; a schema the converter cannot take is a 422.
  expectError(await post(ctx.server, `/v1/sessions/${s.id}/flash`, { question, max_tokens: 64 }), 409, 'conflict');
  expectError(await post(ctx.server, `/v1/sessions/${s.id}/flash`, { question: 'q2', json_schema: [1] }),
    422, 'invalid_value', 'json_schema');
  expectError(await post(ctx.server, `/v1/sessions/${s.id}/flash`,
    { question: 'q3', json_schema: { $ref: '#/definitions/none' } }), 422, 'invalid_value', 'json_schema');
  assert.equal((await get(ctx.server, `/v1/sessions/${s.id}/flash`)).body.flash.length, 1);
});
