// Data: pushing records (JSON, text/plain, NDJSON, template objects), sequence numbers, ingestion accounting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  useServer, http, post, expectStatus, expectError, createSession, getSession, pushRecords, waitIngested,
  waitSession, textRecords, barRecords, BAR_TEMPLATE, assertSessionShape, assertNonNegInt,
} from './harness.js';

const ctx = useServer();

function assert202(body, accepted) {
  const c = JSON.stringify(body);
  for (const k of ['accepted', 'first_seq', 'last_seq', 'dropped']) assert.ok(k in body, `${k} missing: ${c}`);
  assert.equal(body.accepted, accepted, c);
  assertNonNegInt(body.first_seq, 'first_seq');
  assertNonNegInt(body.last_seq, 'last_seq');
  assertNonNegInt(body.dropped, 'dropped');
  if (accepted > 0) assert.equal(body.last_seq - body.first_seq + 1, accepted, `seq range != accepted: ${c}`);
}

function pushRaw(id, body, contentType) {
  return http(ctx.server, 'POST', `/v1/sessions/${id}/data`, { body, headers: { 'content-type': contentType } });
}

test('JSON records: 202 shape, sequence numbers continue across pushes, ingestion visible in GET', async () => {
  const s = await createSession(ctx.server, { system: 'You watch a market.' });
  const res = await post(ctx.server, `/v1/sessions/${s.id}/data`, { records: textRecords(3) });
  expectStatus(res, 202);
  assert.match(res.headers.get('content-type') || '', /application\/json/);
  assert202(res.body, 3);
  assert.ok(res.body.first_seq === 0 || res.body.first_seq === 1, `the first record's seq is 0 or 1: ${res.text}`);

  const second = await pushRecords(ctx.server, s.id, textRecords(2, 3));
  assert202(second, 2);
  assert.equal(second.first_seq, res.body.last_seq + 1, 'seq continues across pushes');

  const third = await pushRecords(ctx.server, s.id, textRecords(4, 5));
  assert202(third, 4);
  assert.equal(third.first_seq, second.last_seq + 1);

  const after = await waitIngested(ctx.server, s.id, third.last_seq);
  assertSessionShape(after);
  assert.equal(after.last_seq_pushed, third.last_seq);
  assert.equal(after.last_seq_ingested, third.last_seq);
  assert.equal(after.pending, 0);
  assert.equal(after.records.pushed, 9);
  assert.equal(after.records.ingested, 9);
  assert.equal(after.records.dropped, 0);
  assert.equal(after.records.rejected, 0);
  assert.equal(after.records.evicted, 0);
  assert.equal(after.regions.records, 9);
  assert.ok(after.regions.data_tokens > 0, 'data tokens after ingestion');
  assert.ok(after.tokens_ingested >= after.regions.data_tokens, 'tokens_ingested counts every ingested token');
  assert.ok(after.data_version >= 1, 'ingestion bumps the data version');
  assert.ok(after.kv.cells_used >= after.regions.system_tokens + after.regions.data_tokens,
    `kv.cells_used covers the regions: ${JSON.stringify(after)}`);
});

test('every ingested batch bumps data_version', async () => {
  const s = await createSession(ctx.server);
  const a = await pushRecords(ctx.server, s.id, textRecords(2));
  const s1 = await waitIngested(ctx.server, s.id, a.last_seq);
  const b = await pushRecords(ctx.server, s.id, textRecords(2, 2));
  const s2 = await waitIngested(ctx.server, s.id, b.last_seq);
  assert.ok(s1.data_version > s.data_version, `${s.data_version} -> ${s1.data_version}`);
  assert.ok(s2.data_version > s1.data_version, `${s1.data_version} -> ${s2.data_version}`);
  assert.ok(s2.regions.data_tokens > s1.regions.data_tokens);
});

test('text/plain: one record per line, empty lines skipped', async () => {
  const s = await createSession(ctx.server);
  const res = await pushRaw(s.id, 'first line\n\nsecond line\nthird line\n', 'text/plain');
  expectStatus(res, 202);
  assert202(res.body, 3);
  const crlf = await pushRaw(s.id, 'fourth\r\n\r\nfifth', 'text/plain; charset=utf-8');
  expectStatus(crlf, 202);
  assert202(crlf.body, 2);
  assert.equal(crlf.body.first_seq, res.body.last_seq + 1);
  const after = await waitIngested(ctx.server, s.id, crlf.body.last_seq);
  assert.equal(after.regions.records, 5);
  assert.equal(after.records.ingested, 5);
});

test('application/x-ndjson: one JSON string per line', async () => {
  const s = await createSession(ctx.server);
  const body = textRecords(3).map((r) => JSON.stringify(r)).join('\n') + '\n';
  const res = await pushRaw(s.id, body, 'application/x-ndjson');
  expectStatus(res, 202);
  assert202(res.body, 3);
  const after = await waitIngested(ctx.server, s.id, res.body.last_seq);
  assert.equal(after.regions.records, 3);
});

test('template objects in JSON and NDJSON, mixed with plain strings', async () => {
  const s = await createSession(ctx.server, { template: BAR_TEMPLATE });
  const res = await post(ctx.server, `/v1/sessions/${s.id}/data`, { records: [...barRecords(3), 'a plain text line'] });
  expectStatus(res, 202);
  assert202(res.body, 4);
  const nd = barRecords(2, 3).map((r) => JSON.stringify(r)).join('\n') + '\n"another plain line"\n';
  const res2 = await pushRaw(s.id, nd, 'application/x-ndjson');
  expectStatus(res2, 202);
  assert202(res2.body, 3);
  assert.equal(res2.body.first_seq, res.body.last_seq + 1);
  const after = await waitIngested(ctx.server, s.id, res2.body.last_seq);
  assert.equal(after.regions.records, 7);
  assert.ok(after.regions.data_tokens >= 7 * 10, `a rendered bar is many tokens: ${after.regions.data_tokens}`);
});

test('object records without a template are read as name=value text; an empty object is refused (422 records[i])', async () => {
  const s = await createSession(ctx.server);
  const ok = await pushRecords(ctx.server, s.id, ['before']);
  const res = await post(ctx.server, `/v1/sessions/${s.id}/data`, { records: ['fine', {}] });
  expectError(res, 422, 'invalid_value', /^records\[1\]$/);
  const after = await getSession(ctx.server, s.id);
  assert.equal(after.last_seq_pushed, ok.last_seq, 'nothing of a refused body is accepted');
  assert.equal(after.records.pushed, 1);
});

// The decoding rules of docs/api.md ("Decoding records"), read back as the model reads them.
const REAL_MESSAGE = '{"p": 101.50, "m": true, "meta": {"unit": "C", "tags": ["a", "b c"]}, "x": null}';

async function retainedTexts(id, lastSeq) {
  await waitIngested(ctx.server, id, lastSeq);
  const res = await http(ctx.server, 'GET', `/v1/sessions/${id}/records?last=10`);
  expectStatus(res, 200);
  return res.body.records.map((r) => r.text);
}

test('nested, boolean and null fields are accepted: flattened on a templated session', async () => {
  const s = await createSession(ctx.server, { template: '{p} m={m} unit={meta.unit} tags={meta.tags.1} x={x}' });
  const json = await pushRaw(s.id, `{"records": [${REAL_MESSAGE}]}`, 'application/json');
  expectStatus(json, 202);
  const nd = await pushRaw(s.id, `${REAL_MESSAGE}\n`, 'application/x-ndjson');
  expectStatus(nd, 202);
  assert.deepEqual(await retainedTexts(s.id, nd.body.last_seq),
    ['101.50 m=true unit=C tags=b c x=null', '101.50 m=true unit=C tags=b c x=null']);
  // A field the template names and the record lacks is still refused, named with its flattened path.
  const missing = await pushRaw(s.id, '{"records": [{"p": 1, "m": false, "meta": {"tags": []}, "x": 0}]}',
    'application/json');
  expectError(missing, 422, 'invalid_value', /^records\[0\]\.meta\.unit$/);
});

test('nested, boolean and null fields are accepted: name=value text on a plain session', async () => {
  const s = await createSession(ctx.server);
  const json = await pushRaw(s.id, `{"records": [${REAL_MESSAGE}, {"note": "two words", "k=v": ""}]}`,
    'application/json');
  expectStatus(json, 202);
  assert.deepEqual(await retainedTexts(s.id, json.body.last_seq), [
    'p=101.50 m=true meta.unit=C meta.tags.0=a meta.tags.1="b c" x=null',
    'note="two words" "k=v"=""',
  ]);
});

test('a template object missing a field refuses the whole body (422 records[i]...)', async () => {
  const s = await createSession(ctx.server, { template: BAR_TEMPLATE });
  const bars = barRecords(3);
  delete bars[2].c;
  const res = await post(ctx.server, `/v1/sessions/${s.id}/data`, { records: bars });
  expectError(res, 422, 'invalid_value', /^records\[2\]/);
  const after = await getSession(ctx.server, s.id);
  assert.equal(after.last_seq_pushed, 0);
  assert.equal(after.records.pushed, 0);
});

test('a record of the wrong type refuses the whole body', async () => {
  const s = await createSession(ctx.server);
  for (const bad of [42, null, true, ['nested']]) {
    const res = await post(ctx.server, `/v1/sessions/${s.id}/data`, { records: ['ok', 'ok', bad] });
    expectError(res, 422, 'invalid_value', /^records\[2\]/);
  }
  const after = await getSession(ctx.server, s.id);
  assert.equal(after.records.pushed, 0);
});

test('eviction by max_records keeps the window; ingested = retained + evicted', async () => {
  for (const eviction of ['recompute', 'shift']) {
    const s = await createSession(ctx.server, { retention: { max_records: 4, eviction } });
    let last;
    for (let i = 0; i < 4; i++) last = await pushRecords(ctx.server, s.id, textRecords(5, i * 5));
    const after = await waitIngested(ctx.server, s.id, last.last_seq);
    const c = JSON.stringify(after);
    assert.equal(after.eviction, eviction);
    assert.ok(after.regions.records <= 4, `max_records 4 holds: ${c}`);
    assert.ok(after.regions.records >= 1, `the newest record is kept: ${c}`);
    assert.equal(after.records.pushed, 20, c);
    assert.equal(after.records.ingested + after.records.dropped + after.records.rejected, 20, c);
    assert.equal(after.records.ingested - after.records.evicted, after.regions.records, c);
  }
});

test('eviction by max_tokens keeps data_tokens within the window', async () => {
  const s = await createSession(ctx.server, { retention: { max_tokens: 200 } });
  let last;
  for (let i = 0; i < 5; i++) last = await pushRecords(ctx.server, s.id, textRecords(6, i * 6));
  const after = await waitIngested(ctx.server, s.id, last.last_seq);
  const c = JSON.stringify(after);
  assert.ok(after.regions.data_tokens <= 200, c);
  assert.ok(after.records.evicted > 0, `30 bars are more than 200 tokens: ${c}`);
  assert.equal(after.records.ingested - after.records.evicted, after.regions.records, c);
});

test('dropped accounting: the 202 dropped counts add up to records.dropped', async () => {
  // A burst of pushes; whether the queue overflows depends on the server, the accounting must hold either way.
  const s = await createSession(ctx.server, { retention: { max_records: 20 } });
  const pushes = [];
  for (let i = 0; i < 10; i++) pushes.push(post(ctx.server, `/v1/sessions/${s.id}/data`, { records: textRecords(50, i * 50) }));
  const results = await Promise.all(pushes);
  let dropped = 0;
  let accepted = 0;
  let maxSeq = 0;
  const seqs = [];
  for (const r of results) {
    expectStatus(r, 202);
    assert202(r.body, 50);
    dropped += r.body.dropped;
    accepted += r.body.accepted;
    maxSeq = Math.max(maxSeq, r.body.last_seq);
    seqs.push([r.body.first_seq, r.body.last_seq]);
  }
  seqs.sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i][0], seqs[i - 1][1] + 1, 'concurrent pushes get disjoint, contiguous seq ranges');
  // The newest record is never the one dropped, so ingestion ends at maxSeq.
  const after = await waitIngested(ctx.server, s.id, maxSeq, { timeout: 120_000 });
  const c = JSON.stringify(after);
  assert.equal(after.records.pushed, accepted, c);
  assert.equal(after.records.dropped, dropped, `sum of 202 dropped (${dropped}) vs records.dropped: ${c}`);
  assert.equal(after.records.ingested + after.records.dropped + after.records.rejected, accepted, c);
  assert.ok(after.regions.records <= 20, c);
});

test('a record too long for the window is rejected and counted; later records still ingest', async () => {
  const s = await createSession(ctx.server, { retention: { max_tokens: 32 } });
  const long = Array.from({ length: 200 }, (_, i) => `word${i}`).join(' ');
  const first = await pushRecords(ctx.server, s.id, [long]);
  const after = await waitSession(ctx.server, s.id, (x) => x.pending === 0 && x.records.rejected >= 1,
    'the long record was not rejected');
  assert.equal(after.records.rejected, 1, JSON.stringify(after));
  assert.equal(after.regions.records, 0);
  const next = await pushRecords(ctx.server, s.id, ['short one']);
  assert.equal(next.first_seq, first.last_seq + 1);
  const later = await waitIngested(ctx.server, s.id, next.last_seq);
  assert.equal(later.regions.records, 1);
  assert.equal(later.records.rejected, 1);
  assert.equal(later.records.ingested, 1);
});

test('pushing to an unknown session is a 404', async () => {
  expectError(await post(ctx.server, '/v1/sessions/nope-nope/data', { records: ['x'] }), 404, 'not_found');
  expectError(await pushRaw('nope-nope', 'x\n', 'text/plain'), 404, 'not_found');
});
