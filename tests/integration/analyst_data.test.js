// The analyst model's training data is what a session decodes: scripts/train_analyst.py trains on windows from
// aoi-analyst-data tokenized by aoi-analyst-tokens, and a session holding the same system text and records, asked
// the same questions, must decode as many tokens in each region (Region 0, the records, the scaffold, each
// question) on the committed model. A model trained on another layout would answer at inference what it never
// saw.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import {
  useServer, createSession, pushRecords, waitIngested, query, AOI_BIN, AOI_ANALYST_MODEL,
} from './harness.js';

const tools = path.dirname(AOI_BIN);
const windowLines = execFileSync(path.join(tools, 'aoi-analyst-data'),
  ['--seed', '4321', '--streams', '3', '--min-bars', '8', '--max-bars', '14', '--first-after', '3', '--every', '5'],
  { encoding: 'utf8' });
const windows = execFileSync(path.join(tools, 'aoi-analyst-tokens'), [AOI_ANALYST_MODEL],
  { input: windowLines, encoding: 'utf8' }).trim().split('\n').map((line) => JSON.parse(line));

const holder = useServer({ model: AOI_ANALYST_MODEL });

const sum = (lists) => lists.reduce((n, l) => n + l.length, 0);

test('the tokens tool writes every window of the data tool with its tokens', () => {
  assert.equal(windows.length, 3);
  for (const w of windows) {
    assert.equal(w.tokens.records.length, w.records.length);
    assert.equal(w.tokens.prompts.length, w.questions.length);
    assert.equal(w.tokens.answers.length, w.questions.length);
    for (const ids of [w.tokens.region0, ...w.tokens.records, ...w.tokens.prompts, ...w.tokens.answers]) {
      assert.ok(ids.length > 0 && ids.every(Number.isInteger), JSON.stringify(ids));
    }
  }
});

test('a session decodes the training windows region by region as the tokens tool wrote them', async () => {
  const server = holder.server;
  for (const w of windows) {
    const s = await createSession(server, {
      system: w.system, retention: { max_tokens: 2000 }, query_budget: 128,
    });
    const pushed = await pushRecords(server, s.id, w.records);
    const held = await waitIngested(server, s.id, pushed.last_seq);
    assert.equal(held.regions.records, w.records.length);
    assert.equal(held.regions.system_tokens, w.tokens.region0.length, 'Region 0');
    assert.equal(held.regions.data_tokens, sum(w.tokens.records), 'the records');
    // Asked after the last record, as the held-out evaluation asks: the question region is the scaffold and the
    // question with its close.
    const last = w.questions.map((q, j) => [q, j]).filter(([q]) => q.after === w.records.length - 1);
    assert.ok(last.length > 0);
    for (const [q, j] of last) {
      const a = await query(server, s.id, { question: q.question, max_tokens: 1 });
      assert.equal(held.regions.scaffold_tokens + a.tokens.question, w.tokens.prompts[j].length, q.question);
    }
  }
});
