// A llama-server user's command line, pasted: its flags read with their meaning or accepted with a warning,
// -hf refused, LLAMA_ARG_ variables read, and the startup line saying what each sequence gets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import {
  AOI_BIN, AOI_MODEL, STARTUP_TIMEOUT_MS, Server, get, post, expectStatus, withTimeout, freePort,
} from './harness.js';

// Heads of 64 values: a q8_0 KV cache needs a multiple of 32 (test-micro's are 16).
const MODEL = path.join(path.dirname(AOI_MODEL), 'copy-micro.gguf');

// The environment without aoi's and llama-server's variables (CTest sets AOI_MODEL, for one), plus `extra`.
function cleanEnv(extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith('AOI_') && !k.startsWith('LLAMA_')) env[k] = v;
  }
  return { ...env, ...extra };
}

// `aoi serve ARGS` with `env`, until its ready line; a Server the caller stops.
async function serve(args, env) {
  const child = spawn(AOI_BIN, ['serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  const output = { text: '' };
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  try {
    const url = await withTimeout(new Promise((resolve, reject) => {
      child.stdout.on('data', (chunk) => {
        output.text += chunk.toString('utf8');
        const m = /aoi: listening on (http:\/\/\S+)/.exec(output.text);
        if (m) resolve(m[1]);
      });
      child.stderr.on('data', (chunk) => { output.text += chunk.toString('utf8'); });
      exited.then((e) => reject(new Error(`exited before it was ready: ${JSON.stringify(e)}\n${output.text}`)));
    }), STARTUP_TIMEOUT_MS, 'the ready line');
    return new Server(child, url, output);
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
}

async function stopped(server) {
  const res = await server.stop();
  assert.equal(res.code, 0, `exit status ${res.code} (signal ${res.signal})\n${server.logs().slice(-4000)}`);
}

test('a pasted llama-server command line serves, with both keys, and says what each sequence gets', async () => {
  assert.ok(existsSync(MODEL), `no ${MODEL} (the models fixture makes it)`);
  const port = await freePort();
  const server = await serve(['-m', MODEL, '--host', 'localhost', '--port', String(port), '-c', '4096', '-ngl', '99',
    '-fa', 'on', '-np', '2', '-ctk', 'q8_0', '-ctv', 'q8_0', '-tb', '2', '--jinja', '--metrics', '--api-key', 'a,b',
    '-v', '--memory-only'], cleanEnv());
  try {
    const logs = server.logs();
    // localhost resolved, on the port given.
    assert.equal(server.url, `http://127.0.0.1:${port}`);
    // -c is the total: 12 sequences of 512 cells (4096 / 12, rounded up to 256 by llama.cpp), said and warned.
    assert.match(logs, /aoi: context: each of 8 sessions gets 512 cells \(system text, data window and questions\), each of 2 completion slots 512, each of 2 spares 512 .*: 12 sequences, 6144 cells/);
    assert.match(logs, /-c 4096 is the KV cache in all, split between 12 sequences \(8 sessions, 2 completion slots, 2 spares\): each gets 512 cells, not 4096\. For 4096 per session: --ctx-per-session 4096/);
    assert.match(logs, /2 threads \(2 for batches\), flash attention on, (every layer and the KV cache on the CPU|every layer on \S+ \()/);
    assert.doesNotMatch(logs, /--jinja/); // aoi's own flag now
    assert.doesNotMatch(logs, /--metrics/);
    assert.match(logs, /\[debug\]/, '-v after serve: debug lines');
    if (/every layer and the KV cache on the CPU/.test(logs)) {
      assert.match(logs, /-ngl 99 does nothing here: no device to take layers/);
    }

    // Both keys of --api-key a,b are admin keys; "a,b" itself and no key are not.
    for (const key of ['a', 'b']) {
      expectStatus(await get(server, '/v1/sessions', { key }), 200);
      const res = await post(server, '/v1/chat/completions',
        { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2, temperature: 0 }, { key });
      expectStatus(res, 200);
      assert.equal(res.body.object, 'chat.completion');
    }
    expectStatus(await get(server, '/v1/sessions', { key: 'a,b' }), 401);
    expectStatus(await get(server, '/v1/sessions', { key: null }), 401);
    const metrics = await get(server, '/metrics', { key: 'b' });
    expectStatus(metrics, 200);
    assert.match(logs, /KV cache k=q8_0 \(asked for\) v=q8_0 \(asked for\)/);
    assert.match(metrics.text, /^aoi_kv_cache_bytes_per_token\{type_k="q8_0",type_v="q8_0"\} \d+/m);
    expectStatus(await get(server, '/', { key: null }), 200);  // the dashboard, without --no-webui
  } finally {
    await stopped(server);
  }
});

test('-hf and --hf-repo are refused with the reason, without printing the help', () => {
  for (const args of [['-hf', 'org/model'], ['--hf-repo', 'org/model', '-m', MODEL]]) {
    const r = spawnSync(AOI_BIN, ['serve', ...args], { encoding: 'utf8', timeout: 60_000, env: cleanEnv() });
    assert.notEqual(r.status, 0, `${args.join(' ')} exited 0\n${r.stdout}${r.stderr}`);
    assert.match(r.stderr, /aoi serve: (-hf|--hf-repo): aoi reaches no model hub .*pass it with -m FILE/);
    assert.doesNotMatch(r.stdout, /Usage|Options:/);
  }
});

test('multi-letter short flags aoi does not know are refused, not split', () => {
  const r = spawnSync(AOI_BIN, ['serve', '-m', MODEL, '-ctx', '4096'],
    { encoding: 'utf8', timeout: 60_000, env: cleanEnv() });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /unknown option -ctx/);
});

test('-c leaving a session too few cells is refused before the model loads', () => {
  const r = spawnSync(AOI_BIN, ['serve', '-m', MODEL, '--memory-only', '--port', '0', '-c', '2048'],
    { encoding: 'utf8', timeout: 60_000, env: cleanEnv() });
  const out = r.stdout + r.stderr;  // the log's error line
  assert.notEqual(r.status, 0);
  assert.match(out, /-c 2048 is the KV cache in all, split between 12 sequences .*each gets 256 cells, under the 512 a session needs/);
  assert.match(out, /--ctx-per-session 2048 \(24576 cells in all\)/);
  assert.doesNotMatch(out, /loading/);
});

test('llama-server\'s LLAMA_ARG_ variables take effect; --ctx-per-session sizes every sequence', async () => {
  const port = await freePort();
  const server = await serve(['--memory-only', '--ctx-per-session', '1024'], cleanEnv({
    LLAMA_ARG_MODEL: MODEL,
    LLAMA_ARG_HOST: '127.0.0.1',
    LLAMA_ARG_PORT: String(port),
    LLAMA_ARG_N_PARALLEL: '3',
    LLAMA_ARG_THREADS: '1',
    LLAMA_API_KEY: 'k1,k2',
    LLAMA_ARG_NO_UI: '1',
    AOI_MAX_SESSIONS: '2',
  }));
  try {
    assert.equal(server.url, `http://127.0.0.1:${port}`);
    // 2 sessions, 3 completion slots, 1 spare (2 / 4, at least 1), 1024 cells each.
    assert.match(server.logs(), /each of 2 sessions gets 1024 cells .*each of 3 completion slots 1024, each of 1 spares 1024 .*: 6 sequences, 6144 cells/);
    assert.match(server.logs(), /, 1 threads \(1 for batches\)/);
    assert.doesNotMatch(server.logs(), /KV cache in all, split/);
    // No -ctk/-ctv: keys in Q8_0 where the model's heads allow it (copy-micro's do).
    assert.match(server.logs(), /KV cache k=q8_0 \(the default\) v=f16 \(the default\)/);
    expectStatus(await get(server, '/v1/sessions', { key: 'k2' }), 200);
    expectStatus(await get(server, '/v1/sessions', { key: 'k3' }), 401);
    expectStatus(await get(server, '/', { key: 'k1' }), 404);  // LLAMA_ARG_NO_UI: no dashboard
    expectStatus(await get(server, '/health', { key: null }), 200);
  } finally {
    await stopped(server);
  }
});
