// `aoi push` that does not give up: a pipe's records reach the session exactly once (no duplicate, no gap,
// compared by their text) across server restarts (kill -9 and SIGTERM) and the 503s of a server that is
// starting; a tenant's 429s are waited out as Retry-After says; the retry time is bounded, and what was not
// sent is said; a 4xx other than 429 is never retried.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import nodeHttp from 'node:http';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import {
  AOI_BIN, startServer, tempDataDir, createSession, getSession, http, expectStatus, waitIngested, sleep, freePort,
} from './harness.js';

const dirs = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

// `aoi push` with its stdin a pipe the test writes to. Resolves { code, stderr } when it exits.
function startPush(url, id, args = [], env = {}) {
  const child = spawn(AOI_BIN, ['push', id, '--server', url, ...args],
    { stdio: ['pipe', 'ignore', 'pipe'], env: { ...process.env, ...env } });
  let stderr = '';
  child.stderr.on('data', (c) => { stderr += c.toString('utf8'); });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, stderr })));
  return { child, exited, stderr: () => stderr };
}

async function writeLines(child, lines, gapMs) {
  for (const line of lines) {
    child.stdin.write(`${line}\n`);
    if (gapMs) await sleep(gapMs);
  }
}

async function retainedTexts(server, id, lastSeq) {
  await waitIngested(server, id, lastSeq, { timeout: 120_000 });
  const res = await http(server, 'GET', `/v1/sessions/${id}/records?last=200`);
  expectStatus(res, 200);
  return res.body.records.map((r) => r.text);
}

const lines = (from, to) => Array.from({ length: to - from }, (_, i) => `reading ${String(from + i).padStart(4, '0')} ok`);

test('a pipe survives kill -9 and a SIGTERM restart of the server: every line ingested exactly once', async () => {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const port = await freePort();
  let server = await startServer({ dataDir, port });
  const s = await createSession(server, { system: 'You read a sensor.', retention: { max_tokens: 2000 } });
  const push = startPush(server.url, s.id, ['--batch', '4', '--flush-ms', '20', '--retry-for', '120']);
  const all = lines(0, 150);

  await writeLines(push.child, all.slice(0, 50), 15);
  server.child.kill('SIGKILL');  // mid-stream, with batches in flight
  await server.exited;
  await writeLines(push.child, all.slice(50, 80), 10);  // buffered in the pipe while the server is away
  server = await startServer({ dataDir, port });
  await writeLines(push.child, all.slice(80, 110), 15);
  const stopped = server.stop();  // SIGTERM while pushes come in
  await writeLines(push.child, all.slice(110, 130), 10);
  await stopped;
  server = await startServer({ dataDir, port });
  await writeLines(push.child, all.slice(130), 10);
  push.child.stdin.end();

  const { code, stderr } = await push.exited;
  try {
    assert.equal(code, 0, stderr);
    assert.match(stderr, /retrying/, 'the restarts made it retry');
    assert.match(stderr, /150 records in \d+ batches acknowledged/, stderr);
    const after2 = await getSession(server, s.id);
    assert.equal(after2.last_seq_pushed, 150, 'no batch was pushed twice');
    assert.deepEqual(await retainedTexts(server, s.id, 150), all,
      `the retained records are the piped lines: ${JSON.stringify(await getSession(server, s.id))}`);
  } finally {
    await server.stop();
  }
});

// A proxy in front of the real server that loses the connection of chosen pushes: `afterForward` pushes reach
// the server and their answers are lost; `beforeForward` pushes are read and never reach it.
function lossyProxy(upstream, { afterForward = [], beforeForward = [] }) {
  const target = new URL(upstream);
  let pushes = 0;
  const proxy = nodeHttp.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const isPush = req.method === 'POST' && req.url.endsWith('/data');
      const n = isPush ? ++pushes : 0;
      if (beforeForward.includes(n)) {
        req.socket.destroy();
        return;
      }
      const up = nodeHttp.request({
        host: target.hostname, port: target.port, path: req.url, method: req.method,
        headers: { ...req.headers, host: target.host, connection: 'close' },
      }, (upRes) => {
        const got = [];
        upRes.on('data', (c) => got.push(c));
        upRes.on('end', () => {
          if (afterForward.includes(n)) {
            req.socket.destroy();
            return;
          }
          res.writeHead(upRes.statusCode, upRes.headers);
          res.end(Buffer.concat(got));
        });
      });
      up.on('error', () => req.socket.destroy());
      up.end(body);
    });
  });
  return new Promise((resolve) => proxy.listen(0, '127.0.0.1', () => {
    resolve({ url: `http://127.0.0.1:${proxy.address().port}`, close: () => proxy.close(), pushes: () => pushes });
  }));
}

test('a lost answer is settled from last_seq_pushed: a batch taken is not sent again, one not taken is', async () => {
  const server = await startServer();
  const proxy = await lossyProxy(server.url, { afterForward: [2, 5], beforeForward: [3] });
  try {
    const s = await createSession(server);
    const push = startPush(proxy.url, s.id, ['--batch', '5', '--retry-for', '60']);
    const all = lines(0, 40);
    await writeLines(push.child, all, 0);
    push.child.stdin.end();
    const { code, stderr } = await push.exited;
    assert.equal(code, 0, stderr);
    const recovered = stderr.match(/its answer was lost; the session's last_seq_pushed shows it taken/g) ?? [];
    assert.equal(recovered.length, 2, stderr);
    assert.match(stderr, /40 records in 8 batches acknowledged \(last seq 40\)/, stderr);
    // 8 batches, the third sent twice (its first try never reached the server).
    assert.equal(proxy.pushes(), 9, stderr);
    assert.equal((await getSession(server, s.id)).last_seq_pushed, 40);
    assert.deepEqual(await retainedTexts(server, s.id, 40), all);
  } finally {
    proxy.close();
    await server.stop();
  }
});

test('a push started before the server is up waits for it (connection refused, and 503 while it loads)', async () => {
  const dataDir = tempDataDir();
  dirs.push(dataDir);
  const port = await freePort();
  let server = await startServer({ dataDir, port });
  const s = await createSession(server);
  await server.stop();

  const push = startPush(`http://127.0.0.1:${port}`, s.id, ['--batch', '10', '--retry-for', '120']);
  const all = lines(0, 30);
  await writeLines(push.child, all, 0);
  push.child.stdin.end();
  await sleep(1500);
  server = await startServer({ dataDir, port });
  const { code, stderr } = await push.exited;
  try {
    assert.equal(code, 0, stderr);
    assert.match(stderr, /cannot connect|not_ready/, stderr);
    assert.deepEqual(await retainedTexts(server, s.id, 30), all);
  } finally {
    await server.stop();
  }
});

test('a tenant over its records_per_s quota: the 429s are waited out as Retry-After says, nothing lost', async () => {
  const keysFile = path.join(tempDataDir(), 'keys.txt');
  dirs.push(path.dirname(keysFile));
  writeFileSync(keysFile, 'team-key team records_per_s=20\n');
  const server = await startServer({ args: ['--api-keys', keysFile] });
  server.apiKey = 'team-key';
  try {
    const s = await createSession(server);
    const push = startPush(server.url, s.id, ['--batch', '10', '--flush-ms', '0', '--api-key', 'team-key']);
    const all = lines(0, 80);
    await writeLines(push.child, all, 0);
    push.child.stdin.end();
    const started = Date.now();
    const { code, stderr } = await push.exited;
    assert.equal(code, 0, stderr);
    const waits = [...stderr.matchAll(/HTTP 429 quota_exceeded[^\n]*retrying in ([\d.]+) ms/g)].map((m) => Number(m[1]));
    assert.ok(waits.length > 0, stderr);
    for (const w of waits) assert.ok(w >= 1000, `Retry-After (whole seconds, at least 1) is waited out: ${stderr}`);
    assert.ok(Date.now() - started >= 2000, 'at 20 records/s, 80 records take seconds');
    assert.deepEqual(await retainedTexts(server, s.id, 80), all);
  } finally {
    await server.stop();
  }
});

test('--retry-for bounds the time: no server, exit 1 saying what was not sent', async () => {
  const port = await freePort();
  const push = startPush(`http://127.0.0.1:${port}`, 'nobody', ['--batch', '2', '--retry-for', '2']);
  await writeLines(push.child, lines(0, 5), 0);
  push.child.stdin.end();
  const started = Date.now();
  const { code, stderr } = await push.exited;
  const took = Date.now() - started;
  assert.equal(code, 1, stderr);
  assert.ok(took >= 1500 && took < 20_000, `gave up after ${took} ms`);
  assert.match(stderr, /0 records in 0 batches acknowledged \(last seq -\)/, stderr);
  assert.match(stderr, /not sent: the batch of 2 records from input lines 1-2 and every line after it/, stderr);
});

test('a 4xx other than 429 is not retried: the error and its field are printed, exit 1', async () => {
  const server = await startServer();
  try {
    const missing = startPush(server.url, 'no-such-session', ['--retry-for', '60']);
    missing.child.stdin.end('a line\n');
    const gone = await missing.exited;
    assert.equal(gone.code, 1, gone.stderr);
    assert.match(gone.stderr, /HTTP 404 not_found/, gone.stderr);
    assert.doesNotMatch(gone.stderr, /retrying/, gone.stderr);

    const s = await createSession(server, { template: '{t} C={c}' });
    const bad = startPush(server.url, s.id, ['--ndjson', '--retry-for', '60']);
    bad.child.stdin.end('{"t": "10:00", "c": 1}\n{"t": "10:01"}\n');
    const refused = await bad.exited;
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, /HTTP 422 invalid_value \(records\[1\]\.c\)/, refused.stderr);
    assert.doesNotMatch(refused.stderr, /retrying/, refused.stderr);
    assert.match(refused.stderr, /0 records in 0 batches acknowledged.*not sent: the batch of 2 records/s, refused.stderr);
    assert.equal((await getSession(server, s.id)).records.pushed, 0);
  } finally {
    await server.stop();
  }
});

test('--csv: quoted commas and quotes reach the session as one field each', async () => {
  const server = await startServer();
  try {
    const s = await createSession(server, { template: '{t}|{note}|{c}' });
    const push = startPush(server.url, s.id, ['--csv']);
    push.child.stdin.end('t,note,c\n10:00,"buy, then ""hold""",101.50\n10:01,short,1\nbroken,row\n');
    const { code, stderr } = await push.exited;
    assert.equal(code, 0, stderr);
    assert.match(stderr, /line 4: 2 fields where the header has 3; skipped/, stderr);
    assert.deepEqual(await retainedTexts(server, s.id, 2), ['10:00|buy, then "hold"|101.50', '10:01|short|1']);
  } finally {
    await server.stop();
  }
});
