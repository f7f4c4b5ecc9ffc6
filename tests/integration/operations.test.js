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

// Samples by name and labels: 'aoi_prompt_tokens_total{kind="question"}' -> value.
function parseSamples(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    out.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return out;
}
const metricsNow = async (server) => {
  const res = await get(server, '/metrics');
  expectStatus(res, 200);
  return { text: res.text, samples: parseSamples(res.text) };
};
const at = (m, key) => m.samples.get(key) ?? 0;

test('/metrics: latency histograms, token counters and gauges by kind after a question, a streamed completion and a flash round', async () => {
  const before = await metricsNow(ctx.server);
  const s = await createSession(ctx.server);
  // A flash question, evaluated in a round once data is in.
  expectStatus(await post(ctx.server, `/v1/sessions/${s.id}/flash`, { question: 'What changed?', max_tokens: 4 }), 201);
  const p = await pushRecords(ctx.server, s.id, textRecords(3));
  await waitIngested(ctx.server, s.id, p.last_seq);
  await withTimeout((async () => {
    for (;;) {
      const list = await get(ctx.server, `/v1/sessions/${s.id}/flash`);
      if (list.body?.flash?.[0]?.version != null) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  })(), 60_000, 'the flash round');
  const q = await query(ctx.server, s.id, { question: 'Anything else?', max_tokens: 3 });
  assert.equal(q.path, 'standard', JSON.stringify(q));
  // A streamed completion, with its usage in the last chunk.
  const streamed = await post(ctx.server, '/v1/completions', {
    model: 'm', prompt: 'metrics stream ' + Date.now(), max_tokens: 3, stream: true, stream_options: { include_usage: true },
  });
  expectStatus(streamed, 200);
  const chunks = streamed.text.split('\n').filter((l) => l.startsWith('data: ') && l !== 'data: [DONE]')
    .map((l) => JSON.parse(l.slice(6)));
  const usage = chunks.map((c) => c.usage).filter((u) => u)[0];
  assert.ok(usage, `a chunk carries the usage: ${streamed.text.slice(0, 2000)}`);

  const after = await metricsNow(ctx.server);
  const grew = (key) => at(after, key) - at(before, key);
  for (const kind of ['question', 'completion', 'flash']) {
    for (const h of ['aoi_time_to_first_token_seconds', 'aoi_e2e_request_latency_seconds', 'aoi_request_queue_time_seconds']) {
      assert.ok(grew(`${h}_count{kind="${kind}"}`) >= 1, `${h}{kind="${kind}"} observed the ${kind}`);
      assert.equal(at(after, `${h}_bucket{kind="${kind}",le="+Inf"}`), at(after, `${h}_count{kind="${kind}"}`), h);
    }
    assert.ok(grew(`aoi_prompt_tokens_total{kind="${kind}"}`) >= 1, `prompt tokens of the ${kind}`);
    assert.ok(after.samples.has(`aoi_inter_token_latency_seconds_count{kind="${kind}"}`), 'inter-token series');
  }
  // The question and the completion ran alone of their kind: their counters grew by what they reported.
  assert.equal(grew('aoi_prompt_tokens_total{kind="question"}'), q.tokens.question);
  assert.equal(grew('aoi_generation_tokens_total{kind="question"}'), q.tokens.answer);
  assert.equal(grew('aoi_prompt_tokens_total{kind="completion"}'),
    usage.prompt_tokens - (usage.prompt_tokens_details?.cached_tokens ?? 0));
  assert.equal(grew('aoi_generation_tokens_total{kind="completion"}'), usage.completion_tokens);
  // Inter-token gaps: tokens - 1 per request (the end-of-generation token counts when sampled).
  if (usage.completion_tokens >= 2) {
    assert.ok(grew('aoi_inter_token_latency_seconds_count{kind="completion"}') >= usage.completion_tokens - 1);
  }
  for (const kind of ['question', 'completion']) {
    assert.equal(at(after, `aoi_requests_running{kind="${kind}"}`), 0, `nothing runs now: ${kind}`);
    assert.equal(at(after, `aoi_requests_waiting{kind="${kind}"}`), 0, `nothing waits now: ${kind}`);
  }
  // KV usage and capacity apart, and their ratio.
  const used = at(after, 'aoi_kv_cells_used');
  const capacity = at(after, 'aoi_kv_cells_capacity');
  const ratio = at(after, 'aoi_kv_cache_usage_ratio');
  assert.ok(capacity > 0 && used > 0 && used <= capacity, `cells ${used} of ${capacity}`);
  assert.ok(ratio > 0 && ratio <= 1, `ratio ${ratio}`);
  assert.ok(Math.abs(ratio - used / capacity) < 1e-9, `ratio ${ratio} is ${used}/${capacity}`);
  // Build and process.
  assert.match(after.text, /^aoi_build_info\{version="[^"]+",commit="[^"]+",llama_build_number="[^"]+",llama_commit="[^"]+",devices="[^"]+"\} 1$/m);
  for (const n of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'process_start_time_seconds', 'process_open_fds']) {
    assert.ok(at(after, n) > 0, `${n} = ${after.samples.get(n)}`);
  }
  assert.ok(at(after, 'process_start_time_seconds') <= Date.now() / 1000 + 1, 'started in the past');
  assert.ok(at(after, 'process_cpu_seconds_total') >= at(before, 'process_cpu_seconds_total'), 'CPU time grows');
  // No session series without --metrics-per-session.
  assert.doesNotMatch(after.text, /^aoi_session_[a-z_]+\{/m);
});

test('--metrics-per-session N: series for the N most active sessions only', async () => {
  const server = await startServer({ args: ['--metrics-per-session', '1'] });
  try {
    const quiet = await createSession(server);
    const busy = await createSession(server);
    for (const [s, n] of [[quiet, 1], [busy, 3]]) {
      for (let i = 0; i < n; i++) {
        const p = await pushRecords(server, s.id, textRecords(1, i));
        await waitIngested(server, s.id, p.last_seq);
      }
    }
    const m = await metricsNow(server);
    const ids = [...m.text.matchAll(/^aoi_session_data_version\{session="([^"]+)"/gm)].map((x) => x[1]);
    assert.deepEqual(ids, [busy.id], m.text.split('\n').filter((l) => l.startsWith('aoi_session_')).join('\n'));
    assert.equal(new Set([...m.text.matchAll(/^aoi_session_[a-z_]+\{session="([^"]+)"/gm)].map((x) => x[1])).size, 1);
    const r = spawnSync('/usr/bin/promtool', ['check', 'metrics'], { input: m.text, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 0, `promtool check metrics exited ${r.status}:\n${r.stdout}${r.stderr}`);
  } finally {
    await server.stop();
  }
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
