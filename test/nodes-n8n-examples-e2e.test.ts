// The shipped n8n examples as a user runs them, in a real n8n with the packed package as a custom extension:
// the shipped credential (examples/n8n/credentials/) and the three workflows imported with `n8n import:*`; the
// manual-trigger ones run with `n8n execute`, the webhook one published and answering HTTP under `n8n start`.
// All on the bundled default model. Runs where nodes-n8n-e2e.test.ts runs (N8N_E2E_BIN, N8N_E2E_NODE).

import * as assert from 'assert';
import { execFileSync, spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { freePort, installN8nExtension, n8nCli } from './e2e-support';
import { REPO_ROOT } from './paths';

const N8N_BIN = process.env.N8N_E2E_BIN;
const NODE_BIN = process.env.N8N_E2E_NODE ?? process.execPath;
const EXAMPLES = path.join(REPO_ROOT, 'examples', 'n8n');

(N8N_BIN ? describe : describe.skip)('n8n examples end to end (shipped credential and workflows, bundled model)', function () {
  this.timeout(600000);
  let root: string;
  let env: NodeJS.ProcessEnv;
  const { n8n, execute } = n8nCli(NODE_BIN, N8N_BIN!, () => env);

  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-n8n-examples-'));
    env = {
      ...process.env,
      N8N_USER_FOLDER: path.join(root, 'home'),
      N8N_CUSTOM_EXTENSIONS: installN8nExtension(root),
      N8N_DIAGNOSTICS_ENABLED: 'false',
      N8N_RUNNERS_ENABLED: 'false',
      RWKV_FLOW_IDLE_SECONDS: '0',
    };
    n8n('import:credentials', `--input=${path.join(EXAMPLES, 'credentials', 'rwkv-model.json')}`);
    for (const file of ['json-extraction.json', 'scheduled-batch.json', 'webhook-completion.json']) {
      n8n('import:workflow', `--input=${path.join(EXAMPLES, file)}`);
    }
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  it('json-extraction runs with n8n execute and outputs an object that matches its schema', () => {
    const [order] = execute('rwkvJsonExtraction')('Extract Order');
    assert.strictEqual(typeof order.json, 'object', JSON.stringify(order));
    assert.ok(order.json !== null && !Array.isArray(order.json));
  });

  it('scheduled-batch runs with n8n execute (its Run Now trigger): one description per product', () => {
    const described = execute('rwkvScheduledBatch')('Describe (one GPU batch)');
    assert.strictEqual(described.length, 3);
    for (const d of described) assert.strictEqual(typeof d.text, 'string');
  });

  describe('webhook-completion, published, under n8n start', () => {
    let n8nServer: ChildProcess;
    let base: string;
    let log = '';

    before(async () => {
      n8n('publish:workflow', '--id=rwkvWebhookCompletion');
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      n8nServer = spawn(NODE_BIN, [N8N_BIN!, 'start'], {
        env: { ...env, N8N_PORT: String(port), N8N_LISTEN_ADDRESS: '127.0.0.1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      n8nServer.stdout!.on('data', (d) => (log += d));
      n8nServer.stderr!.on('data', (d) => (log += d));
      const end = Date.now() + 180000;
      for (;;) {
        if (n8nServer.exitCode !== null || Date.now() > end) throw new Error(`n8n did not start:\n${log.slice(-3000)}`);
        // Ready = the HTTP server up and the published workflow's webhook registered: readiness turns true before
        // n8n has activated the workflows (a loaded CI run once posted in between: 404 "not registered"). A GET to
        // the POST-only webhook says "Did you mean to make a POST request?" only once it is registered.
        const ok = await fetch(`${base}/healthz/readiness`).then((r) => r.ok, () => false);
        const registered = ok && (await fetch(`${base}/webhook/rwkv-complete`).then((r) => r.text(), () => '')).includes('POST request');
        if (registered) break;
        await new Promise((r) => setTimeout(r, 500));
      }
    });

    after(async () => {
      if (n8nServer && n8nServer.exitCode === null) {
        const exited = new Promise((r) => n8nServer.once('exit', r));
        n8nServer.kill('SIGTERM');
        await exited;
      }
    });

    it('answers a POST with the completion', async () => {
      const res = await fetch(`${base}/webhook/rwkv-complete`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: 'The Linux kernel is', maxTokens: 8 }),
      });
      const body = await res.text();
      assert.strictEqual(res.status, 200, `${body}\n${log.slice(-3000)}`);
      const reply = JSON.parse(body) as { text: string; usage: { completionTokens: number } };
      assert.strictEqual(typeof reply.text, 'string');
      assert.ok(reply.usage.completionTokens >= 1 && reply.usage.completionTokens <= 8);
    });
  });
});
