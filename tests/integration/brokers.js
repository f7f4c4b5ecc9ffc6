// Debian's brokers, started by a test on a loopback port with their data in a folder of the test's, and stopped
// after it: what the source tests and the dashboard's source view run against.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { sleep } from './harness.js';

export const MOSQUITTO = process.env.AOI_MOSQUITTO || '/usr/sbin/mosquitto';
export const MOSQUITTO_PUB = process.env.AOI_MOSQUITTO_PUB || '/usr/bin/mosquitto_pub';

// mosquitto on `port`, with persistence in `dir` (a broker that keeps its clients' sessions across a restart);
// resolves once it takes a publish.
export async function startMosquitto(port, dir) {
  for (const [bin, arg] of [[MOSQUITTO, '-h'], [MOSQUITTO_PUB, '--help']]) {
    assert.ok(spawnSync(bin, [arg]).error === undefined,
      `${bin} is missing: Debian's mosquitto and mosquitto-clients are needed (scripts/setup.sh --tests)`);
  }
  const conf = path.join(dir, 'mosquitto.conf');
  writeFileSync(conf, [`listener ${port} 127.0.0.1`, 'allow_anonymous true', 'persistence true',
    `persistence_location ${dir}/`, 'log_dest none', ''].join('\n'));
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
