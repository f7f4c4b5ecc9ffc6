// Debian's brokers, started by a test on a loopback port with their data in a folder of the test's, and stopped
// after it: what the source tests and the dashboard's source view run against.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import readline from 'node:readline';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sleep } from './harness.js';

export const REDIS_SERVER = process.env.AOI_REDIS_SERVER || '/usr/bin/redis-server';
export const REDIS_CLI = process.env.AOI_REDIS_CLI || '/usr/bin/redis-cli';
export const KAFKA_MOCK = process.env.AOI_KAFKA_MOCK;
export const KCAT = process.env.AOI_KCAT || '/usr/bin/kcat';
export const MOSQUITTO = process.env.AOI_MOSQUITTO || '/usr/sbin/mosquitto';
export const MOSQUITTO_PUB = process.env.AOI_MOSQUITTO_PUB || '/usr/bin/mosquitto_pub';
export const NATS_SERVER = process.env.AOI_NATS_SERVER || '/usr/sbin/nats-server';

// mosquitto on `port`, with persistence in `dir` (a broker that keeps its clients' sessions across a restart);
// resolves once it takes a publish.
export async function startMosquitto(port, dir) {
  for (const [bin, arg] of [[MOSQUITTO, '-h'], [MOSQUITTO_PUB, '--help']]) {
    assert.ok(spawnSync(bin, [arg]).error === undefined,
      `${bin} is missing: Debian's mosquitto and mosquitto-clients are needed (scripts/setup.sh --tests)`);
  }
  // Started as root, mosquitto switches to the user named by `user` (by default `mosquitto`, who cannot write
  // the test's folder: its data would silently not be saved at the restart, and a session's subscription be
  // lost with it); as anyone else it ignores the option.
  const conf = path.join(dir, 'mosquitto.conf');
  writeFileSync(conf, [`listener ${port} 127.0.0.1`, 'allow_anonymous true', 'persistence true',
    `persistence_location ${dir}/`, `user ${os.userInfo().username}`, 'log_dest none', ''].join('\n'));
  const child = spawn(MOSQUITTO, ['-c', conf], { stdio: 'ignore' });
  const deadline = Date.now() + 20_000;
  for (;;) {
    const r = spawnSync(MOSQUITTO_PUB, ['-h', '127.0.0.1', '-p', String(port), '-t', 'aoi/ping', '-m', 'ping']);
    if (r.status === 0) break;
    assert.ok(Date.now() < deadline, 'mosquitto did not take a publish within 20 s');
    await sleep(50);
  }
  return child;
}

// Stops a broker started here (SIGTERM: it writes its data on the way out) and waits until it has exited.
export async function stopBroker(child) {
  child.kill('SIGTERM');
  await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
}

// redis-server on `port` with its data in `dir` (appendonly: a broker that keeps its streams across a restart);
// resolves once it answers PING.
export async function startRedis(port, dir) {
  for (const bin of [REDIS_SERVER, REDIS_CLI]) {
    assert.ok(spawnSync(bin, ['--version']).status === 0,
      `${bin} is missing: Debian's redis-server and redis-tools are needed (scripts/setup.sh --tests)`);
  }
  const child = spawn(REDIS_SERVER, ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
    '--appendonly', 'yes', '--daemonize', 'no'], { stdio: 'ignore' });
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (spawnSync(REDIS_CLI, ['-p', String(port), 'PING'], { encoding: 'utf8' }).stdout?.trim() === 'PONG') break;
    assert.ok(Date.now() < deadline, 'redis-server did not answer PING within 20 s');
    await sleep(50);
  }
  return child;
}

// The aoi-kafka-mock helper (librdkafka's mock cluster: Debian 12 packages no Kafka broker): resolves with
// { child, bootstrap, ask(line) -> its one-line answer, stop() }.
export async function startKafkaMock() {
  assert.ok(KAFKA_MOCK, 'AOI_KAFKA_MOCK names the aoi-kafka-mock helper (ctest sets it)');
  assert.ok(spawnSync(KCAT, ['-V']).status === 0,
    `${KCAT} is missing: Debian's kcat is needed (scripts/setup.sh --tests)`);
  const child = spawn(KAFKA_MOCK, [], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = readline.createInterface({ input: child.stdout });
  const waiting = [];
  const pending = [];
  lines.on('line', (line) => (waiting.length ? waiting.shift()(line) : pending.push(line)));
  const next = () => new Promise((resolve) => (pending.length ? resolve(pending.shift()) : waiting.push(resolve)));
  const first = await next();
  assert.match(first, /^bootstrap \S+$/);
  let queue = Promise.resolve();
  const ask = async (line) => {
    const answer = queue.then(() => {
      child.stdin.write(`${line}\n`);
      return next();
    });
    queue = answer.catch(() => {});
    const out = await answer;
    assert.ok(!out.startsWith('error'), `aoi-kafka-mock ${line}: ${out}`);
    return out;
  };
  const stop = async () => {
    child.stdin.end();
    await new Promise((resolve) => (child.exitCode !== null ? resolve() : child.once('exit', resolve)));
  };
  return { child, bootstrap: first.split(' ')[1], ask, stop };
}

// nats-server on `port` with JetStream, its streams stored in `dir` (kept across a restart); with `monitorPort`
// its monitoring endpoint too (/connz lists the connections by name), with `token` only clients that present
// it. Resolves once JetStream answers a client (the npm package `nats`).
export async function startNats(port, dir, { monitorPort, token } = {}) {
  assert.ok(spawnSync(NATS_SERVER, ['--version']).status === 0,
    `${NATS_SERVER} is missing: Debian's nats-server is needed (scripts/setup.sh --tests)`);
  const { connect } = await import('nats');
  const args = ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir];
  if (monitorPort) args.push('-m', String(monitorPort));
  if (token) args.push('--auth', token);
  const child = spawn(NATS_SERVER, args, { stdio: 'ignore' });
  const deadline = Date.now() + 20_000;
  for (;;) {
    assert.equal(child.exitCode, null, `nats-server ${args.join(' ')} exited with status ${child.exitCode}`);
    try {
      const nc = await connect({ servers: `127.0.0.1:${port}`, token, reconnect: false, timeout: 1000 });
      try {
        await nc.jetstreamManager();  // asks JetStream for the account's information
      } finally {
        await nc.close();
      }
      break;
    } catch (e) {
      assert.ok(Date.now() < deadline, `nats-server did not answer with JetStream within 20 s: ${e.message}`);
      await sleep(50);
    }
  }
  return child;
}
