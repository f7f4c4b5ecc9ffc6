// Sessions that outlive the process, black-box: a crash loop (kill -9 at random moments while records are
// pushed and flash rounds run, then a restart, 20 times) loses no acknowledged record, keeps exactly the records
// pushed, and answers as a recompute token by token, on the test model and on the trained analyst model (whose
// answers follow the bars); sessions beyond --max-sessions wait on disk, listed and deletable; a session moves
// between servers as a snapshot file.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import {
  startServer, tempDataDir, get, post, del, http, expectStatus, expectError, waitIngested, getSession, waitSession,
  sleep, AOI_BIN, AOI_ANALYST_MODEL,
} from './harness.js';

const dirs = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

// Record i's text: the same for every server and every round, so that a recompute can be fed the same data.
const bar = (i) => `2024-03-${String(1 + (i % 28)).padStart(2, '0')} ${String(i % 24).padStart(2, '0')}:00,` +
  `O=${100 + (i % 17)},H=${101 + (i % 13)},L=${99 - (i % 7)},C=${100 + (i % 11)},V=${1000 + 37 * i}`;
const bars = (from, n) => Array.from({ length: n }, (_, k) => bar(from + k));

const SESSION = { system: 'You read hourly bars.', retention: { max_tokens: 600 }, query_budget: 64 };
const QUESTION = { question: 'What was the last close?', max_tokens: 8, stop: ['\u0001'] };
const FLASH = 'Is the trend UP or DOWN?';

// The strict rule (tests/support/equivalence.h) on two answers' details: the same greedy tokens, or a
// difference at a near-tie (the recompute's top two within TIE_GAP) where the recovered token is the
// recompute's runner-up. Returns 'identical', 'excused' or a description of the failure. LOGIT_NOISE and TIE_GAP
// are equivalence.h's kLogitNoise and kTieGap.
const LOGIT_NOISE = 0.02;
const TIE_GAP = 1.5 * 2 * LOGIT_NOISE;
function compareAnswers(recovered, recompute) {
  const a = recovered.details.steps;
  const b = recompute.details.steps;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i].token === b[i].token) continue;
    const gap = b[i].logit - b[i].runner_up_logit;
    if (a[i].token === b[i].runner_up && gap < TIE_GAP) return 'excused';
    return `step ${i}: token ${a[i].token} where the recompute has ${b[i].token} (runner-up ${b[i].runner_up}, gap ${gap})`;
  }
  return a.length === b.length ? 'identical' : `${a.length} steps where the recompute has ${b.length}`;
}

// The bars the analyst model was trained on (aoi feed ohlcv: the benchmark's generator and line format).
const feedLines = execFileSync(AOI_BIN, ['feed', 'ohlcv', '--rate', '0', '--count', '3000'], { encoding: 'utf8' })
  .trim().split('\n');
const feedBar = (i) => feedLines[i - 1];

// A crash loop on one model. `bar(i)` is record i's text; `check(answer, lastBar)` judges the recovered session's
// answer to QUESTION by what it says (beyond the equivalence with a recompute).
async function crashLoop({ model, session, bar, rounds, check }) {
  const bars = (from, n) => Array.from({ length: n }, (_, k) => bar(from + k));
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const serverOpts = {
    model, dataDir, ctxSize: 4 * 4096, maxSessions: 2,
    args: ['--fsync', 'everysec', '--snapshot-tokens', '150', '--snapshot-interval', '1', '--pool-slots', '1'],
  };
  let acknowledged = 0; // the highest sequence number a 202 acknowledged
  let roundsWithPushes = 0;
  let fid = null;
  for (let round = 0; round < rounds; round++) {
    const server = await startServer(serverOpts);
    try {
      if (round === 0) {
        expectStatus(await post(server, '/v1/sessions', { id: 'crash', ...session }), 201);
        const f = await post(server, '/v1/sessions/crash/flash', { question: FLASH, max_tokens: 4 });
        expectStatus(f, 201);
        fid = f.body.fid;
      }
      const s = await getSession(server, 'crash');
      // Everything acknowledged before the crash is there: ingested, or waiting to be.
      assert.ok(s.last_seq_pushed >= acknowledged,
        `round ${round}: ${acknowledged} records were acknowledged, the server knows ${s.last_seq_pushed}`);
      assert.equal(s.records.dropped, 0, `round ${round}: ${JSON.stringify(s.records)}`);
      assert.deepEqual(s.flash.map((q) => q.fid), [fid], `round ${round}: the flash query survives`);
      // Push (and ask) until a kill -9 at a random moment.
      let next = s.last_seq_pushed + 1;
      let stop = false;
      const before = acknowledged;
      const pusher = (async () => {
        while (!stop) {
          let res;
          try {
            res = await post(server, '/v1/sessions/crash/data', { records: bars(next, 2) }, { timeout: 10_000 });
          } catch (err) {
            if (stop || !server.alive) return; // killed mid-request: not acknowledged
            throw err;
          }
          // Refused while the server is up: a failure, not the end of the round.
          assert.equal(res.status, 202, `round ${round}: push refused: ${res.text}`);
          assert.equal(res.body.first_seq, next, 'records keep their sequence numbers');
          acknowledged = res.body.last_seq;
          next = res.body.last_seq + 1;
          // A stream's pace (far below what ingestion takes, and every record fits the session's queue, so
          // that none is ever dropped and a recompute can be fed exactly the same records).
          await sleep(40);
        }
      })();
      const asker = (async () => {
        while (!stop) {
          try {
            await post(server, '/v1/sessions/crash/query', QUESTION, { timeout: 10_000 });
          } catch {
            return;
          }
        }
      })();
      await sleep(200 + Math.floor(Math.random() * 1300));
      stop = true;
      server.child.kill('SIGKILL');
      await Promise.all([pusher, asker, server.exited]);
      if (acknowledged > before) roundsWithPushes++;
    } finally {
      if (server.alive) server.child.kill('SIGKILL');
    }
  }

  // Every round was pushed to: a server refusing pushes after a restart would leave rounds without any.
  assert.ok(roundsWithPushes >= rounds * 0.75, `only ${roundsWithPushes} of ${rounds} rounds had a push acknowledged`);

  // The last restart: every record accounted for, and the answers of a session that never crashed.
  const server = await startServer(serverOpts);
  try {
    const s0 = await getSession(server, 'crash');
    assert.ok(s0.last_seq_pushed >= acknowledged);
    const s = await waitIngested(server, 'crash', s0.last_seq_pushed, { timeout: 120_000 });
    const r = s.records;
    assert.equal(r.pushed, s.last_seq_pushed);
    assert.equal(r.ingested + r.dropped + r.rejected, r.pushed, JSON.stringify(r));
    assert.equal(r.dropped, 0);
    // The same records into a recompute (a naive session), in other batches: the same window, the same answer.
    expectStatus(await post(server, '/v1/sessions', { id: 'reference', ...session, mode: 'naive' }), 201);
    for (let i = 1; i <= r.pushed; i += 50) {
      expectStatus(await post(server, '/v1/sessions/reference/data',
        { records: bars(i, Math.min(50, r.pushed - i + 1)) }), 202);
    }
    const ref = await waitIngested(server, 'reference', r.pushed);
    assert.equal(ref.regions.records, s.regions.records, 'the same records are retained');
    // Record by record, what the model reads is what was pushed under that sequence number.
    const kept = (await get(server, `/v1/sessions/crash/records?last=${s.regions.records}`)).body.records;
    const refKept = (await get(server, `/v1/sessions/reference/records?last=${s.regions.records}`)).body.records;
    assert.equal(kept.length, s.regions.records);
    assert.equal(kept[kept.length - 1].seq, r.pushed, 'the window ends with the last record pushed');
    for (const rec of kept) assert.equal(rec.text, bar(rec.seq), `record ${rec.seq}`);
    assert.deepEqual(kept, refKept, 'the recompute holds the same records');
    // Token by token (and step by step, the logits), under the strict rule.
    const a = await post(server, '/v1/sessions/crash/query', { ...QUESTION, details: true });
    const b = await post(server, '/v1/sessions/reference/query', { ...QUESTION, details: true });
    expectStatus(a, 200);
    expectStatus(b, 200);
    assert.equal(a.body.data_version, s.data_version);
    const verdict = compareAnswers(a.body, b.body);
    assert.ok(verdict === 'identical' || verdict === 'excused', `the recovered session vs a recompute: ${verdict}`);
    console.log(`recovered vs recompute: ${verdict} (${a.body.details.token_ids.length} tokens; first step's ` +
      `logits ${a.body.details.steps[0].logit} / ${b.body.details.steps[0].logit}); answer ${JSON.stringify(a.body.answer)}`);
    check(a.body.answer, bar(r.pushed));
    // The first step's logits agree within the measured noise (a restored cache holds what a recompute would).
    assert.ok(Math.abs(a.body.details.steps[0].logit - b.body.details.steps[0].logit) <= LOGIT_NOISE,
      `first-step logits ${a.body.details.steps[0].logit} and ${b.body.details.steps[0].logit}`);
    // Its flash query was answered for the current version and is served from the flash cache.
    const listed = (await get(server, '/v1/sessions/crash/flash')).body.flash;
    assert.equal(listed.length, 1);
    await waitSession(server, 'crash', (x) => x.flash[0].version === x.data_version, 'the flash answer is current');
    const f = await post(server, '/v1/sessions/crash/query', { question: FLASH, max_tokens: 4 });
    expectStatus(f, 200);
    assert.equal(f.body.path, 'flash');
    assert.equal(f.body.data_version, s.data_version);
  } finally {
    await server.stop();
  }
}

test('a crash loop loses no acknowledged record, and the session answers as a recompute', async () => {
  await crashLoop({ session: SESSION, bar, rounds: 20, check: () => {} });
});

test('a crash loop on the analyst model: after the last restart it answers with a price near the last close', async () => {
  // About 44 bars of 30 tokens in the window, and the prompt the analyst model was trained on (src/workload).
  const session = {
    system: execFileSync(AOI_BIN, ['feed', 'ohlcv', '--instructions'], { encoding: 'utf8' }).trimEnd(),
    retention: { max_tokens: 1320 }, query_budget: 64,
  };
  await crashLoop({
    model: AOI_ANALYST_MODEL, session, bar: feedBar, rounds: 10,
    check: (answer, lastBar) => {
      // A model that reads the data answers a price in the bars' range (the strict rule above already holds it to
      // the recompute's tokens); the random-weight test model says nothing of the kind. Not the exact close: this
      // model gets that right 95% of the time at 52 bars (models/analyst.md), and a test must not fail one run in
      // twenty.
      const close = Number(lastBar.split(',C=')[1].split(',')[0]);
      assert.match(answer, /^\s*\d+\.\d\d\s*$/, `answered ${JSON.stringify(answer)}, not a price`);
      const said = Number(answer.trim());
      assert.ok(Math.abs(said - close) <= 0.25 * close, `answered ${JSON.stringify(answer)}; the last close is ${close}`);
    },
  });
});

test('sessions beyond --max-sessions wait on disk, are listed, come back and can be deleted', async () => {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const server = await startServer({ dataDir, ctxSize: 4 * 4096, maxSessions: 1, args: ['--pool-slots', '1'] });
  try {
    const answers = {};
    for (const id of ['d0', 'd1', 'd2']) {
      expectStatus(await post(server, '/v1/sessions', { id, ...SESSION }), 201);
      const pushed = await post(server, `/v1/sessions/${id}/data`, { records: bars(id === 'd1' ? 100 : 0, 12) });
      expectStatus(pushed, 202);
      await waitIngested(server, id, pushed.body.last_seq);
      answers[id] = (await post(server, `/v1/sessions/${id}/query`, QUESTION)).body.answer;
    }
    const list = (await get(server, '/v1/sessions')).body.sessions;
    const residency = Object.fromEntries(list.map((s) => [s.id, s.residency]));
    assert.equal(list.length, 3);
    assert.equal(Object.values(residency).filter((r) => r === 'resident').length, 1, JSON.stringify(residency));
    assert.equal(Object.values(residency).filter((r) => r === 'on_disk').length, 2, JSON.stringify(residency));
    // Each comes back with the same answer.
    for (const id of ['d0', 'd1', 'd2', 'd0']) {
      const res = await post(server, `/v1/sessions/${id}/query`, QUESTION);
      expectStatus(res, 200);
      assert.equal(res.body.answer, answers[id], id);
    }
    const metrics = (await get(server, '/metrics')).text;
    assert.match(metrics, /aoi_sessions_by_residency\{residency="on_disk"\} 2/);
    // Deleting one on disk removes it and its files.
    const onDisk = (await get(server, '/v1/sessions')).body.sessions.find((s) => s.residency === 'on_disk').id;
    expectStatus(await del(server, `/v1/sessions/${onDisk}`), 200);
    expectError(await get(server, `/v1/sessions/${onDisk}`), 404, 'not_found');
    assert.ok(!existsSync(path.join(dataDir, 'sessions', onDisk)));
  } finally {
    await server.stop();
  }
});

test('a session moves between servers as a snapshot file', async () => {
  const a = await startServer({ ctxSize: 4 * 4096, maxSessions: 2 });
  const b = await startServer({ ctxSize: 6 * 4096, maxSessions: 4, memoryOnly: true });
  try {
    expectStatus(await post(a, '/v1/sessions', { id: 'mover', ...SESSION }), 201);
    const pushed = await post(a, '/v1/sessions/mover/data', { records: bars(0, 20) });
    await waitIngested(a, 'mover', pushed.body.last_seq);
    const before = (await post(a, '/v1/sessions/mover/query', QUESTION)).body;
    const res = await fetch(`${a.url}/v1/sessions/mover/snapshot`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/octet-stream');
    assert.equal(res.headers.get('x-aoi-last-seq'), '20');
    const file = Buffer.from(await res.arrayBuffer());
    // A damaged file is refused, naming the body.
    const bad = Buffer.from(file);
    bad[Math.floor(bad.length / 2)] ^= 0xff;
    expectError(await http(b, 'POST', '/v1/sessions?id=moved',
      { body: bad, headers: { 'content-type': 'application/octet-stream' } }), 422, 'invalid_value', 'body');
    const imported = await http(b, 'POST', '/v1/sessions?id=moved',
      { body: file, headers: { 'content-type': 'application/octet-stream' } });
    expectStatus(imported, 201);
    assert.equal(imported.body.id, 'moved');
    assert.equal(imported.body.data_version, before.data_version);
    const after = (await post(b, '/v1/sessions/moved/query', QUESTION)).body;
    assert.equal(after.answer, before.answer);
    // It goes on from where it was.
    const more = await post(b, '/v1/sessions/moved/data', { records: bars(20, 3) });
    expectStatus(more, 202);
    assert.equal(more.body.first_seq, 21);
  } finally {
    await a.stop();
    await b.stop();
  }
});
