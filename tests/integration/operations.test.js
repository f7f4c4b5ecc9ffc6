// Operations: /health, /metrics (Prometheus text format, promtool when installed), clean shutdown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import {
  useServer, startServer, get, post, expectStatus, createSession, pushRecords, waitIngested, query, textRecords,
  openSSE, withTimeout,
} from './harness.js';

const ctx = useServer();

test('/health answers {"status": "ok"}', async () => {
  const res = await get(ctx.server, '/health');
  expectStatus(res, 200);
  assert.match(res.headers.get('content-type') || '', /application\/json/);
  assert.equal(res.body?.status, 'ok', res.text);
});

// The Prometheus text exposition format, line by line.
function checkExposition(text) {
  const problems = [];
  const name = '[a-zA-Z_:][a-zA-Z0-9_:]*';
  const label = '[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
  const value = '(?:[+-]?(?:\\d+\\.?\\d*(?:[eE][+-]?\\d+)?|\\.\\d+(?:[eE][+-]?\\d+)?)|[+-]?Inf|NaN)';
  const sample = new RegExp(`^(${name})(\\{(?:${label}(?:,${label})*,?)?\\})? ${value}(?: -?\\d+)?$`);
  const help = new RegExp(`^# HELP (${name}) .*$`);
  const type = new RegExp(`^# TYPE (${name}) (counter|gauge|histogram|summary|untyped)$`);
  const samples = [];
  const typed = new Map();
  text.split('\n').forEach((line, i) => {
    if (line === '') return;
    if (line.startsWith('# HELP ')) {
      if (!help.test(line)) problems.push(`line ${i + 1}: bad HELP: ${line}`);
    } else if (line.startsWith('# TYPE ')) {
      const m = type.exec(line);
      if (!m) problems.push(`line ${i + 1}: bad TYPE: ${line}`);
      else if (typed.has(m[1])) problems.push(`line ${i + 1}: second TYPE for ${m[1]}`);
      else typed.set(m[1], m[2]);
    } else if (line.startsWith('#')) {
      // a comment
    } else {
      const m = sample.exec(line);
      if (!m) problems.push(`line ${i + 1}: bad sample: ${line}`);
      else samples.push(m[1]);
    }
  });
  if (!text.endsWith('\n')) problems.push('the text does not end with a newline');
  return { problems, samples, typed };
}

test('/metrics is Prometheus text', async () => {
  // Some activity first, so that counters have moved.
  const s = await createSession(ctx.server);
  const p = await pushRecords(ctx.server, s.id, textRecords(3));
  await waitIngested(ctx.server, s.id, p.last_seq);
  await query(ctx.server, s.id, { question: 'q?', max_tokens: 2 });
  expectStatus(await post(ctx.server, '/v1/completions', { model: 'm', prompt: 'hi', max_tokens: 2 }), 200);

  const res = await get(ctx.server, '/metrics');
  expectStatus(res, 200);
  assert.match(res.headers.get('content-type') || '', /^text\/plain/);
  const { problems, samples, typed } = checkExposition(res.text);
  assert.deepEqual(problems, [], res.text.slice(0, 3000));
  assert.ok(samples.length > 0, 'at least one sample');
  assert.ok(typed.size > 0, 'TYPE lines');
  for (const n of samples) {
    const base = n.replace(/_(bucket|sum|count|total|created)$/, '');
    assert.ok(typed.has(n) || typed.has(base), `sample ${n} has a TYPE line`);
  }
});

test('promtool check metrics accepts /metrics', async () => {
  // Debian's prometheus package brings it (scripts/setup.sh --tests): without it the test fails, naming it.
  assert.ok(existsSync('/usr/bin/promtool'), 'no /usr/bin/promtool (Debian package prometheus; scripts/setup.sh --tests)');
  const res = await get(ctx.server, '/metrics');
  expectStatus(res, 200);
  const r = spawnSync('/usr/bin/promtool', ['check', 'metrics'], { input: res.text, encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 0, `promtool check metrics exited ${r.status} (1: errors, 3: lint problems):\n${r.stdout}${r.stderr}`);
});

test('SIGTERM with open streams and sockets stops cleanly (exit status 0)', async () => {
  const server = await startServer();
  try {
    const s = await createSession(server);
    const events = await openSSE(server, `/v1/sessions/${s.id}/events`);
    assert.equal(events.status, 200);
    const p = await pushRecords(server, s.id, textRecords(3));
    await waitIngested(server, s.id, p.last_seq);
    const stream = await openSSE(server, `/v1/sessions/${s.id}/query`, {
      method: 'POST', json: { question: 'Go on at length.', max_tokens: 200, stream: true },
    });
    assert.equal(stream.status, 200);
    const res = await withTimeout(server.stop(), 60_000, 'the server to stop');
    assert.equal(res.forced, false, 'stopped within the grace period');
    assert.equal(res.code, 0, `exit status ${res.code}, signal ${res.signal}\n${server.logs().slice(-3000)}`);
    // The open streams end rather than hang.
    await withTimeout(events.reader.all().catch(() => []), 30_000, 'the events stream to end');
    await withTimeout(stream.reader.all().catch(() => []), 30_000, 'the query stream to end');
  } finally {
    await server.stop();
  }
});
