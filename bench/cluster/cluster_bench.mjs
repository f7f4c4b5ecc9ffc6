// The cluster benchmark's client (bench/cluster/run.sh starts it): it starts every server itself, on loopback,
// and times one system at a time. Prints a table and writes results.json to --out; asserts nothing.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const AOI = arg('aoi');
const MODEL = arg('model');
const THREADS = arg('threads', '1');
// aoi serve's default for the benchmark's model, named so that every system and every run says which.
const KV_K = arg('cache-type-k', 'q8_0');
const KV_V = arg('cache-type-v', 'f16');
const TTL = Number(arg('lease-ttl-ms', '2000'));
const SIZES = arg('sizes', '1024,4096,8192').split(',').map(Number);
const OUT = arg('out');
const NATS = process.env.AOI_NATS_SERVER || '/usr/sbin/nats-server';
const HAPROXY = process.env.AOI_HAPROXY || '/usr/sbin/haproxy';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => Number(process.hrtime.bigint()) / 1e6;
const children = [];
process.on('exit', () => { for (const c of children) if (c.exitCode === null) c.kill('SIGKILL'); });

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}
async function waitHttp(url) {
  for (let i = 0; i < 2400; i++) {
    try { if ((await fetch(`${url}/health`)).status === 200) return; } catch { /* not yet */ }
    await sleep(50);
  }
  throw new Error(`${url} never answered`);
}
function start(bin, args, env) {
  const child = spawn(bin, args, { stdio: 'ignore', env: { ...process.env, ...env } });
  children.push(child);
  return child;
}
async function call(url, method, p, body, headers = {}) {
  const res = await fetch(url + p, { method, headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
const stats = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { p50: s[Math.floor(s.length * 0.5)], p99: s[Math.min(s.length - 1, Math.floor(s.length * 0.99))], n: s.length };
};
// Replicas: 4 sessions of 10240 cells (the 8K-token failover session fits); the single servers only push.
const engine = ['--model', MODEL, '--threads', THREADS, '--cache-type-k', KV_K, '--cache-type-v', KV_V];
const replicaContext = ['--ctx-size', String(10240 * 7), '--max-sessions', '4'];
const singleContext = ['--ctx-size', String(4096 * 5), '--max-sessions', '2'];

const dir = path.join(OUT, `run-${process.pid}`);  // servers' data of this run only
rmSync(dir, { recursive: true, force: true });
mkdirSync(path.join(dir, 'shared'), { recursive: true });
const natsPort = await freePort();
start(NATS, ['-js', '-sd', path.join(dir, 'nats'), '-a', '127.0.0.1', '-p', String(natsPort)]);
await sleep(500);
const replicas = [];
async function startReplica(r) {
  r.child = start(AOI, ['serve', ...engine, ...replicaContext, '--host', '127.0.0.1', '--port', String(r.port), '--cluster',
    `nats://127.0.0.1:${natsPort}`, '--replica-id', r.id, '--lease-ttl-ms', String(TTL), '--shared-dir',
    path.join(dir, 'shared'), '--cluster-snapshot-interval', '2']);
  await waitHttp(r.url);
}
for (const id of ['r1', 'r2', 'r3']) {
  const port = await freePort();
  const r = { id, port, url: `http://127.0.0.1:${port}` };
  replicas.push(r);
  await startReplica(r);
}
const proxyPort = await freePort();
const env = { AOI_FRONTEND: `127.0.0.1:${proxyPort}`, AOI_ROUTE_LUA: path.join(root, 'deploy/haproxy/aoi-route.lua') };
replicas.forEach((r, i) => { env[`AOI_REPLICA_${i + 1}`] = `127.0.0.1:${r.port}`; });
start(HAPROXY, ['-db', '-f', path.join(root, 'deploy/haproxy/haproxy.cfg')], env);
const proxy = `http://127.0.0.1:${proxyPort}`;
await waitHttp(proxy);
const singles = {};
for (const fsync of ['always', 'everysec']) {
  const port = await freePort();
  start(AOI, ['serve', ...engine, ...singleContext, '--host', '127.0.0.1', '--port', String(port), '--data-dir',
    path.join(dir, `single-${fsync}`), '--fsync', fsync]);
  singles[fsync] = `http://127.0.0.1:${port}`;
  await waitHttp(singles[fsync]);
}

const SESSION = { system: 'Market data follows. Answer in one word.', query_budget: 64, retention: { max_tokens: 9600 } };
const bar = (i) => `2026-11-26T${String(Math.floor(i / 60) % 24).padStart(2, '0')}:${String(i % 60).padStart(2, '0')} ` +
  `O=${(100 + (i % 37) * 0.25).toFixed(2)} H=${(101 + (i % 41) * 0.25).toFixed(2)} L=${(99 + (i % 29) * 0.25).toFixed(2)} ` +
  `C=${(100 + (i % 31) * 0.25).toFixed(2)} V=${1000 + (i * 37) % 5000}`;

async function created(url, body) {
  const res = await call(url, 'POST', '/v1/sessions', body);
  if (res.status !== 201) throw new Error(`creating ${body.id}: ${res.status} ${JSON.stringify(res.body)}`);
}

async function holderOf(id) {
  for (;;) {
    try {
      const res = await call(proxy, 'GET', `/v1/sessions/${id}`);
      if (res.status === 200) return replicas.find((r) => r.id === res.body.replica);
    } catch { /* moving */ }
    await sleep(50);
  }
}
async function answersAgain(url, id, minSeq) {
  for (;;) {
    try {
      const res = await call(url, 'POST', `/v1/sessions/${id}/query`, { question: 'Trend?', max_tokens: 1, min_seq: minSeq });
      if (res.status === 200) return;
    } catch { /* refused */ }
    await sleep(20);
  }
}

async function ingested(url, id) {
  for (;;) {
    const s = await call(url, 'GET', `/v1/sessions/${id}`);
    if (s.status === 200 && s.body.pending === 0 && s.body.last_seq_ingested >= s.body.last_seq_pushed) return s.body;
    await sleep(200);
  }
}

// ---- push latency ----
const push = {};
for (const [name, url] of [['cluster via HAProxy', proxy], ['single --fsync always', singles.always],
  ['single --fsync everysec', singles.everysec]]) {
  const id = `push-${name.replace(/\W+/g, '-')}`;
  await created(url, { id, ...SESSION, retention: { max_tokens: 2000 } });
  const xs = [];
  for (let i = 0; i < 550; i++) {
    const t0 = now();
    const res = await call(url, 'POST', `/v1/sessions/${id}/data`, { records: [`tick ${i}`] });
    if (res.status !== 202) throw new Error(`push ${name}: ${res.status}`);
    if (i >= 50) xs.push(now() - t0);
  }
  push[name] = stats(xs);
  // The next system is timed on an idle machine: this one ingests what it took first.
  await ingested(url, id);
}

// ---- forwarded against direct ----
const fid = 'forwarding';
await created(proxy, { id: fid, ...SESSION });
const holding = await holderOf(fid);
const other = replicas.find((r) => r !== holding);
const forward = {};
for (const [name, url] of [['to the holder', holding.url], ['forwarded by another replica', other.url]]) {
  const xs = [];
  for (let i = 0; i < 330; i++) {
    const t0 = now();
    const res = await call(url, 'GET', `/v1/sessions/${fid}`);
    if (res.status !== 200) throw new Error(`get ${name}: ${res.status}`);
    if (i >= 30) xs.push(now() - t0);
  }
  forward[name] = stats(xs);
}

// ---- failover ----
const failover = [];
for (const size of SIZES) {
  const id = `failover-${size}`;
  await created(proxy, { id, ...SESSION });
  let last = 0;
  let tokens = 0;
  for (let i = 0; tokens < size; i += 20) {
    const records = Array.from({ length: 20 }, (_, j) => bar(i + j));
    last = (await call(proxy, 'POST', `/v1/sessions/${id}/data`, { records })).body.last_seq;
    for (;;) {
      const s = await call(proxy, 'GET', `/v1/sessions/${id}`);
      if (s.status === 200 && s.body.last_seq_ingested >= last && s.body.pending === 0) {
        tokens = s.body.regions.data_tokens;
        break;
      }
      await sleep(100);
    }
  }
  const row = { tokens, records: last };
  for (const from of ['snapshot', 'stream']) {
    const snaps = path.join(dir, 'shared', 'sessions', id);
    const covering = (n) => n.endsWith(`-${String(last).padStart(20, '0')}.aoisnap`);
    while (!(existsSync(snaps) && readdirSync(snaps).some(covering))) await sleep(100);
    if (from === 'stream') rmSync(snaps, { recursive: true, force: true });
    const victim = await holderOf(id);
    const survivor = replicas.find((r) => r !== victim);
    const t0 = now();
    victim.child.kill('SIGKILL');
    await answersAgain(survivor.url, id, last);
    row[from] = now() - t0;
    await startReplica(victim);
  }
  failover.push(row);
}

const settings = {
  model: MODEL, threads: THREADS, cache_type_k: KV_K, cache_type_v: KV_V, lease_ttl_ms: TTL, nats_copies: 1,
  snapshot_interval_s: 2,
};
const results = { commit: arg('commit'), command: arg('command'), settings, push, forward, failover };
writeFileSync(path.join(OUT, 'results.json'), JSON.stringify(results, null, 2));
const ms = (x) => x.toFixed(1);
const md = [];
md.push(`Measured at commit \`${results.commit}\`: \`${results.command}\``, '');
md.push(`Settings: ${THREADS} thread(s) per server, model \`${path.basename(MODEL)}\`, KV cache K ${KV_K} V ${KV_V}, ` +
  `lease TTL ${TTL} ms, ` +
  'one NATS server (one copy of each stream and bucket), snapshots every 2 s to a folder on the same disk; ' +
  'each system timed alone, the first 50 pushes and 30 requests of each series not counted.', '');
md.push('| failover: kill -9 of the holder → the session answers again | tokens | records | from its snapshot | from its stream alone |');
md.push('| --- | ---: | ---: | ---: | ---: |');
for (const r of failover) md.push(`| session of ${r.tokens} tokens | ${r.tokens} | ${r.records} | ${(r.snapshot / 1000).toFixed(2)} s | ${(r.stream / 1000).toFixed(2)} s |`);
md.push('', '| push of one record (500 pushes, one at a time) | p50 | p99 |', '| --- | ---: | ---: |');
for (const [k, v] of Object.entries(push)) md.push(`| ${k} | ${ms(v.p50)} ms | ${ms(v.p99)} ms |`);
md.push('', '| `GET /v1/sessions/{id}` (300 requests, one at a time) | p50 | p99 |', '| --- | ---: | ---: |');
for (const [k, v] of Object.entries(forward)) md.push(`| ${k} | ${ms(v.p50)} ms | ${ms(v.p99)} ms |`);
writeFileSync(path.join(OUT, 'report.md'), md.join('\n') + '\n');
console.log(`cluster benchmark at ${results.commit}: ${results.command}`);
console.log(`settings: ${JSON.stringify(settings)}`);
console.log('\npush of one record (ms)              p50     p99');
for (const [k, v] of Object.entries(push)) console.log(`  ${k.padEnd(32)} ${ms(v.p50).padStart(6)}  ${ms(v.p99).padStart(6)}`);
console.log('\nGET /v1/sessions/{id} (ms)           p50     p99');
for (const [k, v] of Object.entries(forward)) console.log(`  ${k.padEnd(32)} ${ms(v.p50).padStart(6)}  ${ms(v.p99).padStart(6)}`);
console.log('\nfailover: kill -9 -> answers again (ms)');
console.log('  tokens  records  from snapshot  from stream');
for (const r of failover) console.log(`  ${String(r.tokens).padStart(6)}  ${String(r.records).padStart(7)}  ${ms(r.snapshot).padStart(13)}  ${ms(r.stream).padStart(11)}`);
process.exit(0);
