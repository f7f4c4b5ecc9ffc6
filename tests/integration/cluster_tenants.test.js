// Tenants in cluster mode: two replicas (aoi serve --cluster) with the same --api-keys file on one nats-server
// (Debian's, started here on loopback). A tenant's sessions quota counts its sessions on every replica, whichever
// replica creates them; a deleted one frees its place.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { del, expectError, expectStatus, freePort, post, startServer, uniqueId } from './harness.js';
import { startNats, stopBroker } from './brokers.js';

const ADMIN = 'cluster-admin-key-0123456789';
const ACME = 'cluster-acme-key-0123456789';

let dir = null;
let nats = null;
const replicas = [];

before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'aoi-cluster-tenants-'));
  const keys = path.join(dir, 'keys.txt');
  writeFileSync(keys, `${ACME} acme sessions=2\n`);
  const port = await freePort();
  nats = await startNats(port, path.join(dir, 'nats'));
  for (const id of ['t1', 't2']) {
    replicas.push(await startServer({ memoryOnly: true, apiKey: ADMIN, args: ['--api-keys', keys,
      '--cluster', `nats://127.0.0.1:${port}`, '--replica-id', id, '--lease-ttl-ms', '1500'] }));
  }
});

after(async () => {
  for (const r of replicas) await r.stop();
  if (nats) await stopBroker(nats);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('a tenant\'s sessions quota counts its sessions on every replica', async () => {
  const [a, b] = replicas;
  const ids = [];
  // Through both replicas (each creation made by the replica hashing gives it to): two fit the quota.
  for (const server of [a, b]) {
    const id = uniqueId('acme');
    expectStatus(await post(server, '/v1/sessions', { id }, { key: ACME }), 201);
    ids.push(id);
  }
  // A third is refused through either replica, naming the quota.
  for (const server of [a, b]) {
    const refused = await post(server, '/v1/sessions', { id: uniqueId('acme') }, { key: ACME });
    expectError(refused, 429, 'quota_exceeded', 'sessions');
    assert.ok(refused.headers.get('retry-after'), 'Retry-After');
  }
  // The admin is not bound by it; a deleted session frees a place.
  expectStatus(await post(a, '/v1/sessions', { id: uniqueId('admin') }), 201);
  expectStatus(await del(b, `/v1/sessions/${ids[0]}`, { key: ACME }), 200);
  expectStatus(await post(b, '/v1/sessions', { id: uniqueId('acme') }, { key: ACME }), 201);
});
