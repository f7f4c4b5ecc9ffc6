// Soak: N sessions fed R records/s each, with a flash question per session and a question every few seconds,
// for a given time; then the checks. Not a CI test (scripts/soak.sh runs it): it runs for minutes.
//
//   node soak.js [--minutes 10] [--sessions 8] [--rate 100] [--ring 256] [--model PATH] [--out FILE.md]
//
// Checks, printed with their figures (exit status 1 when one fails):
//   - every record the server accepted (the sum of its 202 answers) is ingested, dropped or rejected, each
//     counted in the session (pending 0 once the pushes stop);
//   - the server's resident memory and the sessions' KV cells are flat after the warm-up: the mean of the last
//     minute differs from the mean of the first minute after the warm-up by less than 5%;
//   - no error event on any session's event stream, and no 5xx answer.
import { rmSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import {
  startServer, tempDataDir, get, post, openSSE, sleep, barRecords, BAR_TEMPLATE, AOI_MODEL,
} from './harness.js';

const { values: opt } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    sessions: { type: 'string', default: '8' },
    rate: { type: 'string', default: '100' },
    ring: { type: 'string', default: '256' },
    model: { type: 'string', default: AOI_MODEL },
    out: { type: 'string' },
  },
});
const MINUTES = Number(opt.minutes);
const SESSIONS = Number(opt.sessions);
const RATE = Number(opt.rate); // records per second per session
const PUSH_EVERY_MS = 100; // RATE/10 records every 100 ms
const QUESTION_EVERY_MS = 3000;
const SAMPLE_EVERY_MS = 5000;
// The first fifth of the run, and at least a minute, is warm-up: windows fill, caches and pools reach size.
const WARMUP_MS = Math.max(60_000, (MINUTES * 60_000) / 5);
const DRIFT_LIMIT = 0.05;

const durationMs = MINUTES * 60_000;
const dataDir = tempDataDir();
const server = await startServer({
  // --ring-capacity: what may wait per session. Fed faster than two cores ingest, each session's ring is full
  // throughout; when the feeds stop, what is in it must still be ingested before the checks.
  model: opt.model, dataDir, args: ['--max-sessions', String(SESSIONS), '--ring-capacity', opt.ring],
});
console.log(`soak: ${SESSIONS} sessions x ${RATE} records/s, a question every ${QUESTION_EVERY_MS / 1000} s per ` +
  `session and one flash question each, for ${MINUTES} min; model ${opt.model}; server ${server.url}`);

const stats = {
  accepted: new Map(), // session -> records the server said it accepted
  responses: new Map(), // "route status" -> count
  events: new Map(), // event type -> count
  errorEvents: [],
  failures: [], // the first requests that got no answer
  samples: [], // { t, rss_kib, cells }
};
const count = (map, key, n = 1) => map.set(key, (map.get(key) ?? 0) + n);

const ids = [];
for (let i = 0; i < SESSIONS; i++) {
  const id = `soak-${i}`;
  const created = await post(server, '/v1/sessions', {
    id,
    system: 'You are a market analyst. The lines below are OHLCV bars, oldest first.',
    template: BAR_TEMPLATE,
    retention: { max_tokens: 1024 },
    query_budget: 128,
  });
  if (created.status !== 201) throw new Error(`creating ${id}: HTTP ${created.status} ${created.text}`);
  const flash = await post(server, `/v1/sessions/${id}/flash`,
    { question: 'Is the trend up or down? One word.', max_tokens: 4 });
  if (flash.status !== 201) throw new Error(`flash on ${id}: HTTP ${flash.status} ${flash.text}`);
  ids.push(id);
  stats.accepted.set(id, 0);
}

const streams = [];
for (const id of ids) {
  const sse = await openSSE(server, `/v1/sessions/${id}/events`, { timeout: 60_000 });
  if (sse.status !== 200) throw new Error(`events of ${id}: HTTP ${sse.status}`);
  streams.push((async () => {
    for (;;) {
      let ev;
      try {
        ev = await sse.reader.next(24 * 3600_000);
      } catch {
        return;
      }
      if (ev === null) return;
      count(stats.events, ev.event);
      if (ev.event === 'error') stats.errorEvents.push({ id, ...ev.json });
    }
  })());
  stats.closeStreams = [...(stats.closeStreams ?? []), () => sse.reader.close()];
}

const t0 = Date.now();
const deadline = t0 + durationMs;
let stopping = false;

// A request that got no answer (a reset, a refused connection) is counted under "ROUTE failed: CODE".
async function send(route, request) {
  try {
    const res = await request();
    count(stats.responses, `${route} ${res.status}`);
    return res;
  } catch (err) {
    const code = err?.cause?.code ?? err?.code ?? err?.name;
    count(stats.responses, `${route} failed: ${code}`);
    if (stats.failures.length < 20) stats.failures.push({ t: Date.now() - t0, route, error: `${err?.message} ${code}` });
    return null;
  }
}

async function feed(id, index) {
  let n = 0;
  let next = Date.now();
  const batch = Math.max(1, Math.round((RATE * PUSH_EVERY_MS) / 1000));
  while (Date.now() < deadline) {
    const res = await send('data', () =>
      post(server, `/v1/sessions/${id}/data`, { records: barRecords(batch, index * 100_000 + (n % 100_000)) }));
    if (res?.status === 202) count(stats.accepted, id, res.body.accepted);
    n += batch;
    next += PUSH_EVERY_MS;
    await sleep(Math.max(0, next - Date.now()));
  }
}

async function ask(id) {
  await sleep(Math.random() * QUESTION_EVERY_MS);
  while (Date.now() < deadline) {
    const started = Date.now();
    await send('query', () => post(server, `/v1/sessions/${id}/query`,
      { question: 'What was the last close?', max_tokens: 8 }, { timeout: 300_000 }));
    await sleep(Math.max(0, QUESTION_EVERY_MS - (Date.now() - started)));
  }
}

async function rssKib() {
  const status = await readFile(`/proc/${server.child.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]);
}

async function sample() {
  while (!stopping) {
    const list = await get(server, '/v1/sessions');
    const cells = (list.body?.sessions ?? []).reduce((sum, s) => sum + s.kv.cells_used, 0);
    const s = { t: Date.now() - t0, rss_kib: await rssKib(), cells };
    stats.samples.push(s);
    process.stdout.write(`  ${(s.t / 1000).toFixed(0).padStart(5)} s  rss ${(s.rss_kib / 1024).toFixed(1)} MiB  ` +
      `kv cells ${cells}\n`);
    await sleep(SAMPLE_EVERY_MS);
  }
}

const sampler = sample();
await Promise.all(ids.flatMap((id, i) => [feed(id, i), ask(id)]));

// The pushes have stopped: every accepted record must now be accounted for.
const DRAIN_MS = 600_000;
let states = [];
for (const drainUntil = Date.now() + DRAIN_MS; ;) {
  states = await Promise.all(ids.map(async (id) => (await get(server, `/v1/sessions/${id}`)).body));
  if (states.every((s) => s.pending === 0) || Date.now() > drainUntil) break;
  await sleep(1000);
}
console.log(`drained in ${((Date.now() - deadline) / 1000).toFixed(0)} s after the feeds stopped`);
const accounting = states.map((s) => ({
  id: s.id, accepted: stats.accepted.get(s.id), pushed: s.records.pushed, ingested: s.records.ingested,
  dropped: s.records.dropped, rejected: s.records.rejected, pending: s.pending, version: s.data_version,
}));
stopping = true;
await sampler;
for (const close of stats.closeStreams) close();
await Promise.all(streams);
const serverLog = server.logs();
const stopped = await server.stop();
rmSync(dataDir, { recursive: true, force: true });

// Drift: the last minute's mean against the mean of the first minute after the warm-up.
function drift(key) {
  const after = stats.samples.filter((s) => s.t >= WARMUP_MS);
  const first = after.filter((s) => s.t < WARMUP_MS + 60_000);
  const last = after.filter((s) => s.t >= after.at(-1).t - 60_000);
  const mean = (xs) => xs.reduce((a, s) => a + s[key], 0) / xs.length;
  if (first.length === 0 || last.length === 0) return { first: NaN, last: NaN, drift: NaN };
  const a = mean(first);
  const b = mean(last);
  return { first: a, last: b, drift: a === 0 ? (b === 0 ? 0 : Infinity) : (b - a) / a };
}
const rss = drift('rss_kib');
const cells = drift('cells');
const fiveXX = [...stats.responses].filter(([k]) => / 5\d\d$/.test(k));
const unanswered = [...stats.responses].filter(([k]) => / failed: /.test(k));
const checks = [
  ['every accepted record ingested, dropped or rejected, and counted',
    accounting.every((a) => a.pending === 0 && a.pushed === a.accepted &&
      a.ingested + a.dropped + a.rejected === a.pushed)],
  [`resident memory flat after the warm-up (${(rss.first / 1024).toFixed(1)} -> ${(rss.last / 1024).toFixed(1)} MiB, ` +
    `${(rss.drift * 100).toFixed(2)}%)`, Math.abs(rss.drift) < DRIFT_LIMIT],
  [`KV cells flat after the warm-up (${cells.first.toFixed(0)} -> ${cells.last.toFixed(0)}, ` +
    `${(cells.drift * 100).toFixed(2)}%)`, Math.abs(cells.drift) < DRIFT_LIMIT],
  [`no error events (${stats.errorEvents.length})`, stats.errorEvents.length === 0],
  [`every request answered (${unanswered.map(([k, n]) => `${k}: ${n}`).join(', ') || 'all were'})`,
    unanswered.length === 0],
  [`no 5xx answers (${fiveXX.map(([k, n]) => `${k}: ${n}`).join(', ') || 'none'})`, fiveXX.length === 0],
  [`the server stopped cleanly on SIGTERM (exit ${stopped.code})`, stopped.code === 0 && !stopped.forced],
];

console.log('\nper session:');
console.table(accounting);
console.log('answers:', Object.fromEntries(stats.responses));
console.log('events:', Object.fromEntries(stats.events));
if (stats.errorEvents.length) console.log('error events:', stats.errorEvents.slice(0, 10));
if (stats.failures.length) console.log('unanswered:', stats.failures, `\nserver log:\n${serverLog.slice(-4000)}`);
console.log(`warm-up ${WARMUP_MS / 1000} s; ${stats.samples.length} samples every ${SAMPLE_EVERY_MS / 1000} s\n`);
for (const [what, ok] of checks) console.log(`${ok ? 'PASS' : 'FAIL'}  ${what}`);
// The summary in markdown, for docs/benchmarks.md (bench/update_docs.py soak FILE).
if (opt.out) {
  const md = [
    `${SESSIONS} sessions x ${RATE} records/s for ${MINUTES} min, a question every ${QUESTION_EVERY_MS / 1000} s per ` +
      `session and one flash question each; model \`${opt.model.split('/').pop()}\`, \`--ring-capacity ${opt.ring}\`; ` +
      `warm-up ${WARMUP_MS / 1000} s.`,
    '',
    '| session | accepted | ingested | dropped | rejected | pending | data versions |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...accounting.map((a) => `| ${a.id} | ${a.accepted} | ${a.ingested} | ${a.dropped} | ${a.rejected} | ` +
      `${a.pending} | ${a.version} |`),
    '',
    `Answers: ${[...stats.responses].map(([k, n]) => `${k}: ${n}`).join(', ')}. ` +
      `Events: ${[...stats.events].map(([k, n]) => `${k}: ${n}`).join(', ')}.`,
    '',
    '| check | result |',
    '| --- | --- |',
    ...checks.map(([what, ok]) => `| ${what} | ${ok ? 'pass' : '**fail**'} |`),
  ];
  writeFileSync(opt.out, `${md.join('\n')}\n`);
}
process.exit(checks.every(([, ok]) => ok) ? 0 : 1);
