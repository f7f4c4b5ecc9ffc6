// What a llama-server user reaches for on day one: aoi --version, -ub/--ubatch-size, --chat-template NAME|FILE
// (and the ChatML fallback for a model without a template), --log-format json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  AOI_BIN, AOI_MODEL, AOI_MODEL_NO_CHAT_TEMPLATE, STARTUP_TIMEOUT_MS, startServer, get, post, del, expectStatus,
  withTimeout,
} from './harness.js';


// A Llama 3 template's text, as a GGUF file or a user's file holds it; llama.cpp knows it by its markers.
const LLAMA3_TEMPLATE = "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + " +
  "'<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Say something about the weather.' },
];

// `aoi ARGS...` to its end (for commands that exit by themselves: --version, refused options).
function aoi(args) {
  return spawnSync(AOI_BIN, args, { encoding: 'utf8', timeout: 60_000 });
}

// Starts a server, runs fn(server), stops it; the server must have stayed up and exit 0 on SIGTERM.
async function withServer(opts, fn) {
  const server = await startServer({ memoryOnly: true, ...opts });
  try {
    await fn(server);
    assert.ok(server.alive, `the server died\n${server.logs().slice(-4000)}`);
  } finally {
    const res = await server.stop();
    assert.equal(res.code, 0, `exit status ${res.code} (signal ${res.signal})\n${server.logs().slice(-4000)}`);
  }
}

async function chatTemplateOf(server) {
  const res = await get(server, '/v1/models');
  expectStatus(res, 200);
  return res.body.data[0].meta.chat_template;
}

// prompt_tokens of a chat completion: what the chat template rendered, tokenized.
async function chatPromptTokens(server) {
  const res = await post(server, '/v1/chat/completions', { messages, max_tokens: 2, temperature: 0 });
  expectStatus(res, 200);
  assert.equal(res.body.object, 'chat.completion');
  assert.equal(typeof res.body.choices[0].message.content, 'string');
  return res.body.usage.prompt_tokens;
}

async function anthropicInputTokens(server) {
  const res = await post(server, '/v1/messages', {
    model: 'm', system: messages[0].content, messages: [messages[1]], max_tokens: 2, temperature: 0,
  });
  expectStatus(res, 200);
  assert.equal(res.body.type, 'message');
  assert.equal(res.body.content[0].type, 'text');
  return res.body.usage.input_tokens;
}

// The tokens a session's prompt takes around the data: the system turn (BOS, opener, text) and the scaffold.
async function sessionRegions(server) {
  const res = await post(server, '/v1/sessions', { id: 'layout', system: 'You read bars.' });
  expectStatus(res, 201);
  await del(server, '/v1/sessions/layout');
  const { system_tokens: system, scaffold_tokens: scaffold } = res.body.regions;
  return { system, scaffold };
}

test('aoi --version prints aoi, llama.cpp and the compiler, and exits 0', () => {
  const r = aoi(['--version']);
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^aoi \d+\.\d+\.\d+$/m, r.stdout);
  assert.match(r.stdout, /^llama\.cpp \S+, build \d+, commit [0-9a-f]{7,}/m, r.stdout);
  assert.match(r.stdout, /^compiler \S+ \d+/m, r.stdout);
});

test('-ub out of range, not a number or above the batch size is refused with a message', async (t) => {
  const cases = [
    [['-ub', '0'], /--ubatch-size/],
    [['-ub', 'many'], /--ubatch-size/],
    [['-ub', '1024'], /--ubatch-size: 1024 is larger than --batch-size 512/],
    [['-b', '128', '--ubatch-size', '256'], /--ubatch-size: 256 is larger than --batch-size 128/],
  ];
  for (const [args, pattern] of cases) {
    await t.test(args.join(' '), () => {
      const r = aoi(['serve', '-m', AOI_MODEL, '--memory-only', '--port', '0', ...args]);
      assert.notEqual(r.status, 0, `accepted ${args.join(' ')}\n${r.stdout}${r.stderr}`);
      assert.match(r.stderr, pattern);
      assert.doesNotMatch(r.stdout, /listening on/);
    });
  }
});

test('-ub below the batch size is accepted and a prompt longer than it is answered', async () => {
  await withServer({ args: ['-b', '128', '-ub', '16'] }, async (server) => {
    const long = [{ role: 'user', content: 'Count the words in this sentence, which is longer than sixteen tokens for sure.' }];
    const res = await post(server, '/v1/chat/completions', { messages: long, max_tokens: 4, temperature: 0 });
    expectStatus(res, 200);
    assert.ok(res.body.usage.prompt_tokens > 16, JSON.stringify(res.body.usage));
  });
});

test('--chat-template with an unknown name or an unusable file refuses to start, listing the built-in names', () => {
  const unknown = aoi(['serve', '-m', AOI_MODEL, '--memory-only', '--port', '0', '--chat-template', 'no-such-template']);
  assert.notEqual(unknown.status, 0);
  assert.match(unknown.stderr, /no-such-template/);
  assert.match(unknown.stderr, /neither a built-in chat template nor a file/);
  assert.match(unknown.stderr, /chatml/);
  assert.match(unknown.stderr, /llama3/);

  const dir = mkdtempSync(path.join(os.tmpdir(), 'aoi-template-'));
  try {
    const file = path.join(dir, 'plain.txt');
    writeFileSync(file, 'Hello {{ name }}: nothing llama.cpp recognises');
    // Refused when the model loads (whether it is usable depends on --jinja), in the log.
    const unusable = aoi(['serve', '-m', AOI_MODEL, '--memory-only', '--port', '0', '--chat-template', file]);
    assert.notEqual(unusable.status, 0);
    assert.match(unusable.stdout, /cannot apply the chat template/);
    assert.match(unusable.stdout, /chatml/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the chat template is used everywhere: fallback, built-in name and file', async () => {
  // The models fixture makes it (scripts/make-test-models.sh): missing, the test fails.
  assert.ok(existsSync(AOI_MODEL_NO_CHAT_TEMPLATE), `no ${AOI_MODEL_NO_CHAT_TEMPLATE}`);
  // The model's own (Llama 3's headers).
  let own;
  await withServer({}, async (server) => {
    assert.deepEqual(await chatTemplateOf(server), { source: 'model' });
    own = { chat: await chatPromptTokens(server), anthropic: await anthropicInputTokens(server),
      session: await sessionRegions(server) };
  });

  // The same weights and vocabulary without a template: ChatML, said once at startup and in /v1/models; the
  // OpenAI and Anthropic endpoints answer instead of 422.
  let fallback;
  await withServer({ model: AOI_MODEL_NO_CHAT_TEMPLATE }, async (server) => {
    assert.deepEqual(await chatTemplateOf(server), { source: 'fallback', name: 'chatml' });
    fallback = { chat: await chatPromptTokens(server), anthropic: await anthropicInputTokens(server),
      session: await sessionRegions(server) };
    const said = server.logs().match(/the model has no chat template/g) ?? [];
    assert.equal(said.length, 1, server.logs());
  });
  assert.notEqual(fallback.chat, own.chat, 'ChatML and Llama 3 render the same conversation differently');
  assert.notEqual(fallback.session.system, own.session.system);

  // --chat-template chatml on the model with a template: ChatML instead of its own, as the fallback renders.
  await withServer({ args: ['--chat-template', 'chatml'] }, async (server) => {
    assert.deepEqual(await chatTemplateOf(server), { source: 'builtin', name: 'chatml' });
    assert.equal(await chatPromptTokens(server), fallback.chat);
    assert.equal(await anthropicInputTokens(server), fallback.anthropic);
    assert.deepEqual(await sessionRegions(server), fallback.session);
  });

  // --chat-template FILE on the model without one: the file's Llama 3 template, as the model with it renders.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'aoi-template-'));
  try {
    const file = path.join(dir, 'llama3.jinja');
    writeFileSync(file, LLAMA3_TEMPLATE);
    await withServer({ model: AOI_MODEL_NO_CHAT_TEMPLATE, args: ['--chat-template', file] }, async (server) => {
      assert.deepEqual(await chatTemplateOf(server), { source: 'file', path: file });
      assert.equal(await chatPromptTokens(server), own.chat);
      assert.equal(await anthropicInputTokens(server), own.anthropic);
      assert.deepEqual(await sessionRegions(server), own.session);
      assert.doesNotMatch(server.logs(), /no chat template/);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--jinja runs a template llama.cpp does not recognise as Jinja, sessions included; without it, refused', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'aoi-template-'));
  try {
    const file = path.join(dir, 'own-markers.jinja');
    writeFileSync(file, '{% for m in messages %}<<{{ m.role }}>>{{ m.content }}<</{{ m.role }}>>\n{% endfor %}' +
      '{% if add_generation_prompt %}<<assistant>>{% endif %}');
    const refused = aoi(['serve', '-m', AOI_MODEL, '--memory-only', '--port', '0', '--chat-template', file]);
    assert.notEqual(refused.status, 0);
    assert.match(refused.stdout, /cannot apply the chat template/);
    assert.match(refused.stdout, /--jinja/);
    await withServer({ args: ['--jinja', '--chat-template', file] }, async (server) => {
      assert.deepEqual(await chatTemplateOf(server), { source: 'file', path: file });
      const created = await post(server, '/v1/sessions', { id: 'own', system: 'You read bars.' });
      expectStatus(created, 201);
      const context = await get(server, '/v1/sessions/own/context?question=Up%3F');
      expectStatus(context, 200);
      assert.match(context.body.text, /<<system>>You read bars\.\s*<<\/system>>\n<<user>>Up\?<<\/user>>\n<<assistant>>$/,
        context.text);
      const chat = await post(server, '/v1/chat/completions', { messages, max_tokens: 2, temperature: 0 });
      expectStatus(chat, 200);
      const asked = await post(server, '/v1/sessions/own/query', { question: 'Up?', max_tokens: 2 });
      expectStatus(asked, 200);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('--log-format json: every line of the server and of llama.cpp is a JSON object', async () => {
  // A data directory whose name has a quote and a newline: the server logs it at startup.
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'aoi-log "json"\nline-'));
  // -v: llama.cpp's debug lines too.
  const child = spawn(AOI_BIN, ['-v', 'serve', '--model', AOI_MODEL, '--host', '127.0.0.1', '--port', '0',
    '--threads', '2', '--data-dir', dataDir, '--log-format', 'json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  try {
    const url = await withTimeout(new Promise((resolve, reject) => {
      child.stdout.on('data', (chunk) => {
        stdout += chunk.toString('utf8');
        const m = /"message":"listening on (http:\/\/[^"]+)"/.exec(stdout);
        if (m) resolve(m[1]);
      });
      child.stderr.on('data', (chunk) => { stderr += chunk.toString('utf8'); });
      exited.then((e) => reject(new Error(`exited before it was ready: ${JSON.stringify(e)}\n${stdout}${stderr}`)));
    }), STARTUP_TIMEOUT_MS, 'the json ready line');
    const server = { url, apiKey: null };
    expectStatus(await post(server, '/v1/chat/completions', { messages, max_tokens: 2 }), 200);
    child.kill('SIGTERM');
    const e = await withTimeout(exited, 20_000, 'exit after SIGTERM');
    assert.equal(e.code, 0, `${JSON.stringify(e)}\n${stderr.slice(-2000)}`);
  } finally {
    child.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }

  const lines = [];
  for (const [stream, text] of [['stdout', stdout], ['stderr', stderr]]) {
    for (const line of text.split('\n')) {
      if (line === '') continue;
      let j;
      assert.doesNotThrow(() => { j = JSON.parse(line); }, `${stream}: not JSON: ${line}`);
      assert.equal(typeof j, 'object', line);
      assert.match(j.time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, line);
      assert.ok(['trace', 'debug', 'info', 'warning', 'error', 'critical'].includes(j.level), line);
      assert.equal(typeof j.message, 'string', line);
      lines.push(j);
    }
  }
  assert.ok(lines.some((j) => j.logger === 'llama'), 'llama.cpp lines under logger "llama"');
  assert.ok(lines.some((j) => j.logger === 'aoi' && j.message.startsWith('listening on ')), 'the ready line');
  assert.ok(lines.some((j) => j.logger === 'aoi' && j.message.endsWith(', stopping')), 'the stop line');
  const withDir = lines.filter((j) => j.message.includes(dataDir));
  assert.ok(withDir.length > 0, `a line with the data directory ${JSON.stringify(dataDir)}`);
});
