// GET /openapi.json against the live server: it serves src/server/openapi.json as it is in the repository,
// every documented path answers with exactly the documented methods (the server's 405 lists the methods a path
// has), and the bodies the server really sends (answers and errors) validate against the document's schemas.
// tests/unit/server/openapi_test.cpp holds the document to the route table in the other direction.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import {
  useServer, repoRoot, http, get, expectStatus, uniqueId, SMALL_SESSION, waitIngested,
} from './harness.js';

const KEY = 'openapi-test-key';
const ctx = useServer({ apiKey: KEY });
const spec = JSON.parse(readFileSync(path.join(repoRoot, 'src', 'server', 'openapi.json'), 'utf8'));
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

// ---- A JSON Schema check for the keywords the document uses ----------------------------------------------

function deref(node) {
  let n = node;
  for (let hops = 0; n && typeof n === 'object' && n.$ref; hops++) {
    assert.ok(hops < 16, `a $ref loop at ${node.$ref}`);
    assert.ok(n.$ref.startsWith('#/'), `only local references: ${n.$ref}`);
    const target = n.$ref.slice(2).split('/').reduce((o, k) => o?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], spec);
    assert.ok(target !== undefined, `unresolved $ref ${n.$ref}`);
    n = target;
  }
  return n;
}

function typeOf(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

// The problems of `value` against `schema` (empty: valid), each with its JSON path.
function validate(schema, value, at = '$') {
  const s = deref(schema);
  const problems = [];
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    const t = typeOf(value);
    if (!types.includes(t) && !(t === 'integer' && types.includes('number'))) {
      return [`${at}: ${JSON.stringify(value)} is not ${types.join('|')}`];
    }
  }
  if ('const' in s && JSON.stringify(s.const) !== JSON.stringify(value)) {
    problems.push(`${at}: ${JSON.stringify(value)} is not ${JSON.stringify(s.const)}`);
  }
  if (s.enum && !s.enum.some((e) => JSON.stringify(e) === JSON.stringify(value))) {
    problems.push(`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(s.enum)}`);
  }
  if (typeof value === 'number') {
    if (s.minimum !== undefined && value < s.minimum) problems.push(`${at}: ${value} < ${s.minimum}`);
    if (s.maximum !== undefined && value > s.maximum) problems.push(`${at}: ${value} > ${s.maximum}`);
  }
  if (typeof value === 'string' && s.pattern && !new RegExp(s.pattern, 'u').test(value)) {
    problems.push(`${at}: ${JSON.stringify(value)} does not match ${s.pattern}`);
  }
  if (s.oneOf) {
    const passing = s.oneOf.filter((alt) => validate(alt, value, at).length === 0).length;
    if (passing !== 1) problems.push(`${at}: matches ${passing} of oneOf's ${s.oneOf.length} schemas`);
  }
  if (typeOf(value) === 'object') {
    for (const name of s.required ?? []) {
      if (!(name in value)) problems.push(`${at}: "${name}" is required`);
    }
    for (const [name, v] of Object.entries(value)) {
      if (s.properties?.[name]) problems.push(...validate(s.properties[name], v, `${at}.${name}`));
      else if (s.additionalProperties === false) problems.push(`${at}: "${name}" is not allowed`);
    }
  }
  if (Array.isArray(value)) {
    if (s.minItems !== undefined && value.length < s.minItems) problems.push(`${at}: fewer than ${s.minItems} items`);
    if (s.maxItems !== undefined && value.length > s.maxItems) problems.push(`${at}: more than ${s.maxItems} items`);
    if (s.items) value.forEach((v, i) => problems.push(...validate(s.items, v, `${at}[${i}]`)));
  }
  return problems;
}

// The schema the document gives an operation's answer with this status (JSON only).
function responseSchema(pathTemplate, method, status) {
  const operation = spec.paths[pathTemplate]?.[method];
  assert.ok(operation, `${method} ${pathTemplate} is not in the document`);
  const response = operation.responses[String(status)];
  assert.ok(response, `${method} ${pathTemplate}: the document has no ${status} answer`);
  const schema = deref(response).content?.['application/json']?.schema;
  assert.ok(schema, `${method} ${pathTemplate} ${status}: no application/json schema`);
  return schema;
}

function requestSchema(pathTemplate, method) {
  return deref(spec.paths[pathTemplate][method].requestBody).content['application/json'].schema;
}

// Calls the route, checks the request against the document (when it has a JSON body), and the answer's status
// and body against the document's schema for that status.
async function call(pathTemplate, method, urlPath, { json, key, status }) {
  if (json !== undefined) {
    assert.deepEqual(validate(requestSchema(pathTemplate, method), json), [],
      `the request to ${method} ${pathTemplate} does not fit the document: ${JSON.stringify(json)}`);
  }
  const res = await http(ctx.server, method.toUpperCase(), urlPath, { json, key });
  expectStatus(res, status);
  assert.deepEqual(validate(responseSchema(pathTemplate, method, status), res.body), [],
    `${method.toUpperCase()} ${urlPath} → ${status}: ${res.text.slice(0, 2000)}`);
  return res.body;
}

// ---- Tests ---------------------------------------------------------------------------------------------------

test('GET /openapi.json serves the repository\'s document, without a key, with an ETag', async () => {
  const res = await get(ctx.server, '/openapi.json', { key: false });
  expectStatus(res, 200);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  assert.deepEqual(res.body, spec);
  const etag = res.headers.get('etag');
  assert.ok(etag, 'an ETag');
  const again = await get(ctx.server, '/openapi.json', { key: false, headers: { 'if-none-match': etag } });
  expectStatus(again, 304);
});

test('the document is OpenAPI 3.1 and every $ref in it resolves', () => {
  assert.equal(spec.openapi, '3.1.0');
  assert.equal(typeof spec.info?.title, 'string');
  assert.equal(typeof spec.info?.version, 'string');
  assert.ok(Object.keys(spec.paths ?? {}).length > 20);
  const refs = [];
  const walk = (node) => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === 'object') {
      if (typeof node.$ref === 'string') refs.push(node.$ref);
      Object.values(node).forEach(walk);
    }
  };
  walk(spec);
  assert.ok(refs.length > 20);
  for (const ref of refs) deref({ $ref: ref });
});

// A method no path has: the server answers 405 with the path's methods in Allow (an unknown path: 404).
test('every documented path answers with exactly the documented methods', async () => {
  const mismatches = [];
  for (const [template, item] of Object.entries(spec.paths)) {
    const documented = Object.keys(item).filter((m) => METHODS.includes(m)).map((m) => m.toUpperCase()).sort();
    const concrete = template.replace('{id}', 'openapi-probe').replace('{fid}', 'f1').replace('{file}', 'app.js');
    const res = await http(ctx.server, 'PATCH', concrete);
    const served = res.status === 405 ? (res.headers.get('allow') ?? '').split(/,\s*/).sort() : [];
    if (res.status !== 405 || JSON.stringify(served) !== JSON.stringify(documented)) {
      mismatches.push(`${template}: documented ${documented.join(',')}, served ${res.status} ${served.join(',')}`);
    }
  }
  assert.deepEqual(mismatches, []);
});

test('the bodies the server sends fit the document', async () => {
  const id = uniqueId('openapi');
  const s = `/v1/sessions/${id}`;
  const sid = '/v1/sessions/{id}';
  await call('/health', 'get', '/health', { key: false, status: 200 });
  await call('/ready', 'get', '/ready', { key: false, status: 200 });
  await call('/dashboard.json', 'get', '/dashboard.json', { key: false, status: 200 });
  await call('/v1/sessions', 'post', '/v1/sessions', {
    json: { id, system: 'You read numbers.', ...SMALL_SESSION, retention: { max_tokens: 256, eviction: 'recompute' } },
    status: 201,
  });
  await call('/v1/sessions', 'get', '/v1/sessions', { status: 200 });
  const pushed = await call(`${sid}/data`, 'post', `${s}/data`, { json: { records: ['1 2 3', '4 5 6'] }, status: 202 });
  await waitIngested(ctx.server, id, pushed.last_seq);
  await call(sid, 'get', s, { status: 200 });
  await call(`${sid}/query`, 'post', `${s}/query`, {
    json: { question: 'Which number came last?', max_tokens: 4, details: true }, status: 200,
  });
  const flash = await call(`${sid}/flash`, 'post', `${s}/flash`, { json: { question: 'First?', max_tokens: 2 }, status: 201 });
  await call(`${sid}/flash`, 'get', `${s}/flash`, { status: 200 });
  await call(`${sid}/flash/{fid}`, 'delete', `${s}/flash/${flash.fid}`, { status: 200 });
  await call(`${sid}/records`, 'get', `${s}/records?last=5`, { status: 200 });
  await call(`${sid}/context`, 'get', `${s}/context?question=Why`, { status: 200 });
  await call(`${sid}/save`, 'post', `${s}/save`, { status: 200 });
  await call(`${sid}/unload`, 'post', `${s}/unload`, { status: 200 });
  await call(`${sid}/load`, 'post', `${s}/load`, { status: 200 });
  await call('/v1/models', 'get', '/v1/models', { status: 200 });
  await call('/v1/chat/completions', 'post', '/v1/chat/completions', {
    json: { model: 'any', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, temperature: 0 }, status: 200,
  });
  await call('/v1/completions', 'post', '/v1/completions', {
    json: { model: 'any', prompt: 'Once', max_tokens: 3, temperature: 0 }, status: 200,
  });
  await call('/v1/messages', 'post', '/v1/messages', {
    json: { model: 'any', max_tokens: 3, messages: [{ role: 'user', content: 'Hi' }] }, status: 200,
  });
  await call(sid, 'delete', s, { status: 200 });

  // Errors: every kind has the one body, {"type": "error", "error": {"type", "message", "field"?}}.
  await call('/v1/sessions', 'get', '/v1/sessions', { key: false, status: 401 });
  await call(sid, 'get', s, { status: 404 });
  await call('/metrics', 'get', '/metrics', { key: false, status: 401 });
  const invalid = await http(ctx.server, 'POST', '/v1/sessions', { json: { retention: { max_tokens: 0 } } });
  expectStatus(invalid, 422);
  assert.deepEqual(validate(responseSchema('/v1/sessions', 'post', 422), invalid.body), [], invalid.text);
  assert.equal(invalid.body.error.field, 'retention.max_tokens');
  const malformed = await http(ctx.server, 'POST', '/v1/sessions', { body: '{', headers: { 'content-type': 'application/json' } });
  expectStatus(malformed, 400);
  assert.deepEqual(validate(responseSchema('/v1/sessions', 'post', 400), malformed.body), [], malformed.text);
});

// The check itself: a body that breaks the schema is caught (so that the test above can fail).
test('the schema check refuses bodies that do not fit', () => {
  const errorBody = spec.components.schemas.ErrorBody;
  assert.deepEqual(validate(errorBody, { type: 'error', error: { type: 'not_found', message: 'x' } }), []);
  assert.notDeepEqual(validate(errorBody, { error: { type: 'not_found', message: 'x' } }), []);
  assert.notDeepEqual(validate(errorBody, { type: 'error', error: { type: 'nope', message: 'x' } }), []);
  assert.notDeepEqual(validate(spec.components.schemas.SessionCreate, { id: 'a', colour: 'red' }), []);
  assert.notDeepEqual(validate(spec.components.schemas.Pushed, { accepted: '3' }), []);
});
