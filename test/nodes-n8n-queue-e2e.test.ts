// n8n queue mode end to end (issue 16's scale-out at small scale): Redis, an n8n main taking webhook calls, two
// `n8n worker` processes running the executions, and one `rwkv-flow serve` (the packed package's command, on
// the tiny golden model) that both workers' RWKV Generate nodes reach through a credential in "server at URL"
// mode. Concurrent webhook calls are answered with generated text, both workers run some of them, and the
// server's /metrics counts every one; a webhook that responds by streaming streams through the main; and an
// execution that a worker gives up (its timeout) cancels the generation on the server and frees the slot.
//
// Runs where the other n8n e2e tests run (N8N_E2E_BIN, N8N_E2E_NODE: scripts/ci-hosts.sh) and a redis-server
// is on PATH (ci-hosts.sh installs it on Linux with apt); on CI a missing redis-server fails.

import * as assert from 'assert';
import * as path from 'path';
import { N8nQueueCluster, onPath, type GenerateWebhook } from '../bench/n8n-queue-cluster';
import { GOLDEN } from './paths';
import { metricsOf } from './serve-fixtures';

const N8N_BIN = process.env.N8N_E2E_BIN;
const NODE_BIN = process.env.N8N_E2E_NODE ?? process.execPath;
const REDIS_BIN = onPath('redis-server');
const TINY = path.join(GOLDEN, 'v7-tiny.st');
const API_KEY = 'queue-e2e-key';

const skipReason = !N8N_BIN
  ? 'N8N_E2E_BIN is not set (scripts/ci-hosts.sh sets it)'
  : !REDIS_BIN
    ? 'no redis-server on PATH (scripts/ci-hosts.sh installs it with apt)'
    : undefined;

if (N8N_BIN && !REDIS_BIN && process.env.CI === 'true') {
  describe('n8n queue mode end to end', () => {
    it('has a redis-server to run (scripts/ci-hosts.sh installs it)', () => {
      assert.fail('redis-server is not on PATH on CI, where scripts/ci-hosts.sh should have installed it');
    });
  });
}

// The tiny model's vocabulary is 512 tokens: prompts stay within digits and symbols.
const COMPLETE: GenerateWebhook = { id: 'rwkvQueueComplete', path: 'rwkv-complete', responseMode: 'lastNode' };
const STREAM: GenerateWebhook = { id: 'rwkvQueueStream', path: 'rwkv-stream', responseMode: 'streaming' };
/** Far more tokens than fit in its 2 s execution timeout; token 0 (end of text) banned so it cannot end early. */
const TIMEOUT: GenerateWebhook = {
  id: 'rwkvQueueTimeout',
  path: 'rwkv-timeout',
  responseMode: 'lastNode',
  settings: { executionTimeout: 2 },
  options: { logitBias: { entry: [{ kind: 'id', token: '0', bias: -100 }] } },
};
const LONG_GENERATION = 1_000_000;

/** Polls `cond` every 200 ms (each poll is an HTTP call to the server, which shares the machine's two cores). */
async function until(cond: () => Promise<boolean>, what: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

(skipReason ? describe.skip : describe)(
  `n8n queue mode end to end (Redis, n8n main, two workers, one rwkv-flow serve)${skipReason ? ` — skipped: ${skipReason}` : ''}`,
  function () {
    this.timeout(600000);
    let cluster: N8nQueueCluster;
    const metrics = () => metricsOf(cluster.serverUrl!, API_KEY);
    const GENERATE_OK = 'rwkv_http_requests_total{route="/v1/engine/generate",status="200"}';

    before(async () => {
      cluster = await N8nQueueCluster.start({
        n8nBin: N8N_BIN!,
        nodeBin: NODE_BIN,
        redisBin: REDIS_BIN!,
        engine: 'server',
        model: TINY,
        workers: 2,
        // Two at a time each: eight calls at once cannot all land on one worker.
        concurrency: 2,
        maxBatch: 4,
        apiKey: API_KEY,
        serverConfig: { maxTokensLimit: LONG_GENERATION },
        webhooks: [COMPLETE, STREAM, TIMEOUT],
      });
    });

    after(async () => {
      await cluster?.stop();
    });

    it('answers concurrent webhook calls with generated text; both workers run some; the server counts every one', async () => {
      const before = await metrics();
      const startedBefore = cluster.started.map((ids) => ids.length);
      const prompts = Array.from({ length: 8 }, (_, i) => `${i}+${i}=`);
      const answers = await Promise.all(prompts.map((p) => cluster.call(COMPLETE.path, p, 6)));
      let tokens = 0;
      for (const a of answers) {
        assert.strictEqual(a.status, 200, `${a.body}\n${cluster.logs()}`);
        const reply = JSON.parse(a.body) as { text: unknown; finishReason: string; usage: { completionTokens: number } };
        assert.strictEqual(typeof reply.text, 'string', a.body);
        assert.ok(reply.usage.completionTokens >= 1 && reply.usage.completionTokens <= 6, a.body);
        tokens += reply.usage.completionTokens;
      }
      const ran = cluster.started.map((ids, w) => ids.length - startedBefore[w]);
      assert.strictEqual(ran[0] + ran[1], prompts.length, `executions started per worker: ${ran}\n${cluster.logs()}`);
      assert.ok(ran[0] > 0 && ran[1] > 0, `one worker ran every execution: ${ran}\n${cluster.logs()}`);
      const after = await metrics();
      assert.strictEqual((after[GENERATE_OK] ?? 0) - (before[GENERATE_OK] ?? 0), prompts.length);
      assert.strictEqual(after.rwkv_completion_tokens_total - before.rwkv_completion_tokens_total, tokens);
    });

    it('streams the generated text through the main when the webhook responds by streaming', async () => {
      const answer = await cluster.call(STREAM.path, '2+2=', 8);
      assert.strictEqual(answer.status, 200, `${answer.body}\n${cluster.logs()}`);
      const events = answer.body
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { type: string; content?: string; metadata?: { nodeName?: string } });
      assert.strictEqual(events[0].type, 'begin', answer.body);
      assert.strictEqual(events[events.length - 1].type, 'end', answer.body);
      const items = events.filter((e) => e.type === 'item');
      assert.ok(items.length >= 1, answer.body);
      for (const e of items) assert.strictEqual(e.metadata?.nodeName, 'Generate');
      assert.ok(items.map((e) => e.content).join('').length > 0, answer.body);
    });

    it("an execution the worker gives up (its timeout) cancels the generation on the server and frees the slot", async () => {
      const before = await metrics();
      // n8n 2.40.7 leaves a lastNode webhook unanswered when a queued execution times out (any node, a Wait
      // node too), so the call is not awaited; it is aborted once the server is seen idle again.
      const call = new AbortController();
      const pending = fetch(`${cluster.baseUrl}/webhook/${TIMEOUT.path}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: '3+3=', maxTokens: LONG_GENERATION }),
        signal: call.signal,
      }).catch(() => undefined);
      try {
        await until(async () => (await metrics()).rwkv_slots_busy === 1, 'the generation to start on the server', 60000);
        await until(async () => (await metrics()).rwkv_slots_busy === 0, 'the server to free the slot after the 2 s timeout', 60000);
      } finally {
        call.abort();
        await pending;
      }
      const stopped = await metrics();
      const decoded = stopped.rwkv_decode_tokens_total - before.rwkv_decode_tokens_total;
      assert.ok(decoded > 0 && decoded < LONG_GENERATION, `decoded ${decoded}`);
      // Nothing decodes on after the slot is free.
      await new Promise((r) => setTimeout(r, 1500));
      assert.strictEqual((await metrics()).rwkv_decode_tokens_total, stopped.rwkv_decode_tokens_total);
      assert.match(cluster.logs(), /The execution was cancelled because it timed out/);
    });
  },
);
