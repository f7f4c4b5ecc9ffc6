// --max-sessions: no free session slot is a 429 overloaded; deleting a session frees its slot.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  useServer, post, del, get, expectStatus, expectError, expectAlive, uniqueId, SMALL_SESSION,
} from './harness.js';

const ctx = useServer({ maxSessions: 2 });

test('the session after --max-sessions is refused with 429 overloaded; delete frees the slot', async () => {
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
