// aoi serve --rpc: every layer and the KV cache in an rpc-server (llama.cpp's RPC backend) on loopback, with
// greedy rows chosen there. The startup lines and /metrics say where the model runs, a session answers as the
// same session on the CPU does, and an address where no rpc-server listens is refused at startup by name.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import {
  AOI_BIN, AOI_MODEL, startServer, get, createSession, pushRecords, waitIngested, query, textRecords, freePort,
  sleep,
} from './harness.js';

const RPC_SERVER = process.env.AOI_RPC_SERVER;
const children = [];
after(() => { for (const c of children) c.kill('SIGKILL'); });

async function startRpcServer() {
  assert.ok(RPC_SERVER && existsSync(RPC_SERVER), `rpc-server not found: ${RPC_SERVER} (set AOI_RPC_SERVER)`);
  const port = await freePort();
  const child = spawn(RPC_SERVER, ['-H', '127.0.0.1', '-p', String(port), '-t', '1'], { stdio: 'ignore' });
  children.push(child);
  // Ready when it accepts a connection (aoi itself tries the address before llama.cpp's client does).
  for (let i = 0; i < 100; i++) {
    const probe = spawnSync('bash', ['-c', `exec 3<>/dev/tcp/127.0.0.1/${port}`]);
    if (probe.status === 0) return `127.0.0.1:${port}`;
    await sleep(100);
  }
  throw new Error(`rpc-server did not listen on ${port}`);
}

async function answers(server) {
  const s = await createSession(server, { system: 'You are a market analyst.' });
  const r = await pushRecords(server, s.id, textRecords(12));
  await waitIngested(server, s.id, r.last_seq);
  const out = [];
  for (const question of ['Is the trend UP or DOWN?', 'What was the last close?']) {
    out.push((await query(server, s.id, { question, max_tokens: 12 })).answer);
  }
  return out;
}

test('a session on an rpc-server device answers as on the CPU, and the server says where it runs', async () => {
  const endpoint = await startRpcServer();
  const remote = await startServer({ memoryOnly: true, args: ['--rpc', endpoint] });
  const local = await startServer({ memoryOnly: true, args: ['--device', 'none'] });
  try {
    assert.match(remote.output.text, new RegExp(`aoi: devices: .*RPC0 \\(${endpoint}`));
    assert.match(remote.output.text, new RegExp(`every layer on RPC0 \\(${endpoint}.*each layer's KV cache with it; ` +
      'greedy rows chosen on the device'));
    assert.match(local.output.text, /every layer and the KV cache on the CPU/);
    const metrics = await get(remote, '/metrics');
    assert.match(metrics.text, /^aoi_build_info\{.*devices="RPC0"\} 1$/m);
    // The rpc-server computes with the same CPU kernels: the same tokens, exactly.
    assert.deepEqual(await answers(remote), await answers(local));
  } finally {
    await remote.stop();
    await local.stop();
  }
});

test('an address where no rpc-server listens is refused at startup, naming it', async () => {
  const port = await freePort();
  const r = spawnSync(AOI_BIN, ['serve', '-m', AOI_MODEL, '--memory-only', '--port', '0', '--rpc', `127.0.0.1:${port}`],
    { encoding: 'utf8', timeout: 60_000 });
  assert.equal(r.status, 1, r.stdout + r.stderr);
  assert.match(r.stdout + r.stderr, new RegExp(`--rpc: nothing accepts connections at 127\\.0\\.0\\.1:${port}`));
});
