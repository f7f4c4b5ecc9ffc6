// GET /ready beside GET /health: after a restart, ready only once the sessions of the data directory are back,
// and public like /health (probes carry no key). The 503 while the model loads is in
// tests/unit/server/loading_test.cpp (a server whose service is never set), as the window is too short to
// catch here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import {
  startServer, tempDataDir, get, post, expectStatus, uniqueId, SMALL_SESSION, pushRecords, waitIngested,
} from './harness.js';

test('/ready says the model and the sessions recovered from the data directory, without a key', async (t) => {
  const dir = tempDataDir();
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const ids = [uniqueId('ready'), uniqueId('ready')];

  const first = await startServer({ dataDir: dir });
  try {
    const empty = await get(first, '/ready');
    expectStatus(empty, 200);
    assert.deepEqual(empty.body, {
      status: 'ready', model: 'test-micro',
      sessions: { total: 0, resident: 0, restoring: 0, on_disk: 0, damaged: 0 },
    });
    for (const id of ids) {
      expectStatus(await post(first, '/v1/sessions', { id, ...SMALL_SESSION }), 201);
      const pushed = await pushRecords(first, id, ['1 2 3', '4 5 6']);
      await waitIngested(first, id, pushed.last_seq);
    }
    const two = await get(first, '/ready');
    expectStatus(two, 200);
    assert.equal(two.body.sessions.total, 2);
    assert.equal(two.body.sessions.resident, 2);
  } finally {
    const stopped = await first.stop();
    assert.equal(stopped.code, 0, first.logs().slice(-2000));
  }

  // A restart with keys: /ready and /health answer without one; both sessions are known, each resident or on
  // its way back (or on disk), none damaged.
  const second = await startServer({ dataDir: dir, apiKey: 'ready-key' });
  try {
    const ready = await get(second, '/ready', { key: false });
    expectStatus(ready, 200);
    assert.equal(ready.body.status, 'ready');
    assert.equal(ready.body.model, 'test-micro');
    const s = ready.body.sessions;
    assert.equal(s.total, 2, ready.text);
    assert.equal(s.damaged, 0, ready.text);
    assert.equal(s.resident + s.restoring + s.on_disk, 2, ready.text);
    expectStatus(await get(second, '/health', { key: false }), 200);
    // The sessions it counts are the ones the API lists.
    const list = await get(second, '/v1/sessions');
    expectStatus(list, 200);
    assert.deepEqual(list.body.sessions.map((x) => x.id).sort(), [...ids].sort());
    // Other routes still need the key.
    expectStatus(await get(second, '/v1/sessions', { key: false }), 401);
  } finally {
    const stopped = await second.stop();
    assert.equal(stopped.code, 0, second.logs().slice(-2000));
  }
});
