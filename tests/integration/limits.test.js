// Session limits. In memory only, --max-sessions bounds the sessions: no free session slot is a 429
// overloaded, and deleting a session frees its slot. With a data directory --max-sessions bounds those in the
// KV cache (the others wait on disk: durability.test.js) and --max-stored-sessions all of them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  useServer, startServer, post, del, get, expectStatus, expectError, expectAlive, uniqueId, SMALL_SESSION,
} from './harness.js';

const ctx = useServer({ maxSessions: 2, memoryOnly: true });

test('in memory only, the session after --max-sessions is refused with 429 overloaded; delete frees the slot',
  async () => {
    const a = uniqueId();
    const b = uniqueId();
    expectStatus(await post(ctx.server, '/v1/sessions', { id: a, ...SMALL_SESSION }), 201);
    expectStatus(await post(ctx.server, '/v1/sessions', { id: b, ...SMALL_SESSION }), 201);
    const c = uniqueId();
    expectError(await post(ctx.server, '/v1/sessions', { id: c, ...SMALL_SESSION }), 429, 'overloaded');
    expectError(await get(ctx.server, `/v1/sessions/${c}`), 404, 'not_found');
    const list = await get(ctx.server, '/v1/sessions');
    assert.equal(list.body.sessions.length, 2);

    // Stateless traffic still works when the session slots are full.
    expectStatus(await post(ctx.server, '/v1/completions', { model: 'm', prompt: 'hi', max_tokens: 2 }), 200);

    expectStatus(await del(ctx.server, `/v1/sessions/${a}`), 200);
    expectStatus(await post(ctx.server, '/v1/sessions', { id: c, ...SMALL_SESSION }), 201);
    expectError(await post(ctx.server, '/v1/sessions', { id: uniqueId(), ...SMALL_SESSION }), 429, 'overloaded');
    await expectAlive(ctx.server);
  });

test('with a data directory, --max-stored-sessions bounds every session, on disk or not', async () => {
  const server = await startServer({ maxSessions: 1, args: ['--max-stored-sessions', '3'] });
  try {
    for (let i = 0; i < 3; i++) {
      expectStatus(await post(server, '/v1/sessions', { id: `kept${i}`, ...SMALL_SESSION }), 201);
    }
    const refused = await post(server, '/v1/sessions', { id: 'kept3', ...SMALL_SESSION });
    expectError(refused, 429, 'overloaded');
    assert.match(refused.body.error.message, /--max-stored-sessions/);
    const list = (await get(server, '/v1/sessions')).body.sessions;
    assert.equal(list.length, 3);
    assert.equal(list.filter((s) => s.residency === 'resident').length, 1);
    expectStatus(await del(server, '/v1/sessions/kept0'), 200);
    expectStatus(await post(server, '/v1/sessions', { id: 'kept3', ...SMALL_SESSION }), 201);
  } finally {
    await server.stop();
  }
});
