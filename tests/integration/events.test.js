// Session events over SSE: data_updated, resume with Last-Event-ID, error, session_deleted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventSource } from 'eventsource';
import {
  useServer, del, get, expectStatus, expectError, createSession, getSession, pushRecords, waitIngested,
  openSSE, textRecords, assertNonNegInt, assertNumber, assertErrorObject, sseErrorBody, withTimeout,
} from './harness.js';

const ctx = useServer();

const UPDATE_FIELDS = ['version', 'records_added', 'tokens_added', 'records_evicted', 'tokens_evicted', 'dropped',
  'dropped_total', 'rejected_total', 'pending', 'last_seq', 'rebuilt', 'ingest_ms'];

function assertDataUpdated(ev) {
  const c = JSON.stringify(ev);
  assert.equal(ev.event, 'data_updated', c);
  assert.ok(ev.id !== '' && ev.id != null, `events carry ids: ${c}`);
  assert.ok(/^\d+$/.test(ev.id), `event ids are integers: ${c}`);
  const d = ev.json;
  assert.ok(d && typeof d === 'object', `data is JSON: ${c}`);
  for (const k of UPDATE_FIELDS) assert.ok(k in d, `${k} missing: ${c}`);
  for (const k of UPDATE_FIELDS) {
    if (k === 'rebuilt') assert.equal(typeof d.rebuilt, 'boolean', c);
    else if (k === 'ingest_ms') assertNumber(d.ingest_ms, 'ingest_ms');
    else assertNonNegInt(d[k], k);
  }
}

test('data_updated after pushes, with increasing ids and versions', async () => {
  const s = await createSession(ctx.server);
  const { status, headers, reader, text } = await openSSE(ctx.server, `/v1/sessions/${s.id}/events`);
  assert.equal(status, 200, text);
  assert.match(headers.get('content-type') || '', /^text\/event-stream/);
  try {
    let last;
    let pushed = 0;
    for (let i = 0; i < 3; i++) {
      last = await pushRecords(ctx.server, s.id, textRecords(3, i * 3));
      pushed += 3;
      await waitIngested(ctx.server, s.id, last.last_seq);
    }
    const updates = [];
    for (;;) {
      const ev = await reader.waitFor((e) => e.event === 'data_updated', 'a data_updated event');
      assertDataUpdated(ev);
      updates.push(ev);
      if (ev.json.last_seq >= last.last_seq) break;
    }
    assert.ok(updates.length >= 3, `each separately ingested push makes an update: ${updates.length}`);
    for (let i = 1; i < updates.length; i++) {
      assert.ok(Number(updates[i].id) > Number(updates[i - 1].id), 'ids increase');
      assert.ok(updates[i].json.version > updates[i - 1].json.version, 'versions increase');
      assert.ok(updates[i].json.last_seq > updates[i - 1].json.last_seq, 'last_seq increases');
    }
    const added = updates.reduce((n, e) => n + e.json.records_added, 0);
    assert.equal(added, pushed, 'records_added sums to the records pushed');
    const final = await getSession(ctx.server, s.id);
    const lastUpdate = updates[updates.length - 1].json;
    assert.equal(lastUpdate.version, final.data_version);
    assert.equal(lastUpdate.last_seq, final.last_seq_ingested);
    assert.equal(lastUpdate.pending, 0);
    assert.equal(lastUpdate.dropped_total, final.records.dropped);
    assert.equal(lastUpdate.rejected_total, final.records.rejected);
    const tokens = updates.reduce((n, e) => n + e.json.tokens_added, 0);
    assert.equal(tokens, final.tokens_ingested, 'tokens_added sums to tokens_ingested');
  } finally {
    reader.close();
  }
});

test('resume with Last-Event-ID gets only the later events', async () => {
  const s = await createSession(ctx.server);
  const first = await openSSE(ctx.server, `/v1/sessions/${s.id}/events`);
  assert.equal(first.status, 200, first.text);
  const seen = [];
  try {
    let last;
    for (let i = 0; i < 3; i++) {
      last = await pushRecords(ctx.server, s.id, textRecords(2, i * 2));
      await waitIngested(ctx.server, s.id, last.last_seq);
    }
    for (;;) {
      const ev = await first.reader.waitFor((e) => e.event === 'data_updated', 'a data_updated event');
      seen.push(ev);
      if (ev.json.last_seq >= last.last_seq) break;
    }
  } finally {
    first.reader.close();
  }
  assert.ok(seen.length >= 2, `need two updates to resume between: ${seen.length}`);

  const resumeFrom = seen[0].id;
  const second = await openSSE(ctx.server, `/v1/sessions/${s.id}/events`, { headers: { 'last-event-id': resumeFrom } });
  assert.equal(second.status, 200, second.text);
  try {
    const replayed = [];
    for (let i = 1; i < seen.length; i++) {
      const ev = await second.reader.waitFor((e) => e.event === 'data_updated', `replayed event after id ${resumeFrom}`);
      replayed.push(ev);
    }
    assert.deepEqual(replayed.map((e) => e.id), seen.slice(1).map((e) => e.id),
      'the replay is exactly the events after Last-Event-ID, in order');
    assert.deepEqual(replayed.map((e) => e.json.version), seen.slice(1).map((e) => e.json.version));

    // Then live events follow on the same stream.
    const p = await pushRecords(ctx.server, s.id, ['one more']);
    const live = await second.reader.waitFor((e) => e.event === 'data_updated' && e.json.last_seq >= p.last_seq,
      'a live data_updated after the replay');
    assert.ok(Number(live.id) > Number(seen[seen.length - 1].id));
  } finally {
    second.reader.close();
  }

  // Resuming from the newest id replays nothing: the next event is a new one.
  const newest = await openSSE(ctx.server, `/v1/sessions/${s.id}/events`, { headers: { 'last-event-id': seen[seen.length - 1].id } });
  try {
    const p = await pushRecords(ctx.server, s.id, ['and another']);
    const ev = await newest.reader.waitFor((e) => e.event === 'data_updated', 'a data_updated event');
    assert.ok(Number(ev.id) > Number(seen[seen.length - 1].id), `no event at or before Last-Event-ID: ${ev.id}`);
    assert.ok(ev.json.last_seq > seen[seen.length - 1].json.last_seq);
    assert.ok(ev.json.last_seq <= p.last_seq);
  } finally {
    newest.reader.close();
  }
});

test('the eventsource client parses the named events and tracks the last id', async () => {
  const s = await createSession(ctx.server);
  const key = ctx.server.apiKey;
  const es = new EventSource(`${ctx.server.url}/v1/sessions/${s.id}/events`, {
    fetch: (input, init) => fetch(input, {
      ...init,
      headers: { ...init.headers, ...(key ? { authorization: `Bearer ${key}` } : {}) },
    }),
  });
  try {
    await withTimeout(new Promise((resolve, reject) => {
      es.addEventListener('open', resolve, { once: true });
      es.addEventListener('error', (e) => reject(new Error(`EventSource error: ${e.message ?? e.code}`)), { once: true });
    }), 30_000, 'EventSource open');
    const got = new Promise((resolve) => es.addEventListener('data_updated', resolve));
    const p = await pushRecords(ctx.server, s.id, textRecords(2));
    const ev = await withTimeout(got, 60_000, 'a data_updated event through EventSource');
    const data = JSON.parse(ev.data);
    assert.ok(data.last_seq <= p.last_seq);
    assert.ok(ev.lastEventId !== '', 'the event has an id');
  } finally {
    es.close();
  }
});

test('a record too long for the window is reported as an error event', async () => {
  const s = await createSession(ctx.server, { retention: { max_tokens: 32 } });
  const { status, reader, text } = await openSSE(ctx.server, `/v1/sessions/${s.id}/events`);
  assert.equal(status, 200, text);
  try {
    await pushRecords(ctx.server, s.id, [Array.from({ length: 200 }, (_, i) => `word${i}`).join(' ')]);
    const ev = await reader.waitFor((e) => e.event === 'error', 'an error event');
    assertErrorObject(sseErrorBody(ev.json));
  } finally {
    reader.close();
  }
});

test('session_deleted is the last event and the stream ends', async () => {
  const s = await createSession(ctx.server);
  const { status, reader, text } = await openSSE(ctx.server, `/v1/sessions/${s.id}/events`);
  assert.equal(status, 200, text);
  try {
    const p = await pushRecords(ctx.server, s.id, textRecords(2));
    await reader.waitFor((e) => e.event === 'data_updated' && e.json.last_seq >= p.last_seq, 'data_updated');
    expectStatus(await del(ctx.server, `/v1/sessions/${s.id}`), 200);
    const rest = await reader.all(30_000);
    assert.ok(rest.length >= 1, 'session_deleted arrives');
    const lastEv = rest[rest.length - 1];
    assert.equal(lastEv.event, 'session_deleted', JSON.stringify(rest));
    assert.equal(lastEv.json?.id, s.id, lastEv.data);
    assert.equal(rest.filter((e) => e.event === 'session_deleted').length, 1);
  } finally {
    reader.close();
  }
  expectStatus(await get(ctx.server, '/health'), 200);
});

test('events of an unknown session: 404', async () => {
  const r = await openSSE(ctx.server, '/v1/sessions/no-such-session/events');
  assert.equal(r.status, 404, r.text);
  assertErrorObject(r.body, 'not_found');
  expectError(await get(ctx.server, '/v1/sessions/no-such-session/events'), 404, 'not_found');
});
