// `rwkv-flow serve` as a user starts it: the bundled model on the real GPU engine (lavapipe here), a free
// loopback port, an API key from the environment; it answers, then stops cleanly on SIGTERM.

import * as assert from 'assert';
import { spawn } from 'child_process';
import * as path from 'path';
import { serveEngineConfig } from '../bin/serve';
import { REPO_ROOT } from './paths';
import { jsonHeaders, rawRequest } from './serve-fixtures';

const CLI = path.join(REPO_ROOT, 'bin', 'rwkv-flow');

describe('rwkv-flow serve (command line)', function () {
  this.timeout(180000);

  it('engine settings: --config JSON, flags over it, checked before the model loads', () => {
    assert.deepStrictEqual(serveEngineConfig({ 'max-batch': '16', 'state-dir': '/srv/states', 'cache-mib': '1' }), {
      maxBatch: 16,
      stateDir: '/srv/states',
      cacheBytes: 1048576,
    });
    assert.throws(() => serveEngineConfig({ 'max-batch': '0' }), /--max-batch must be an integer ≥ 1/);
    assert.throws(() => serveEngineConfig({ config: '/nonexistent/engine.json' }), /--config \/nonexistent\/engine.json/);
  });

  it('serves the bundled model on a loopback port and stops on SIGTERM', async () => {
    const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--max-batch', '2'], {
      env: { ...process.env, RWKV_FLOW_API_KEY: 'cli-key' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        child.stderr.on('data', () => {
          const m = /at (http:\/\/127\.0\.0\.1:\d+), API key required/.exec(stderr);
          if (m) resolve(m[1]);
        });
        exited.then(() => reject(new Error(`serve exited: ${stderr}`)));
      });
      assert.strictEqual((await rawRequest(url, { method: 'GET', path: '/health' })).status, 200);
      assert.strictEqual((await rawRequest(url, { method: 'GET', path: '/v1/models' })).status, 401);
      const r = await rawRequest(url, { path: '/v1/completions', headers: jsonHeaders('cli-key'), body: JSON.stringify({ prompt: 'The Linux kernel is', max_tokens: 3 }) });
      assert.strictEqual(r.status, 200, r.body);
      assert.strictEqual(JSON.parse(r.body).usage.completion_tokens, 3);
    } finally {
      child.kill('SIGTERM');
    }
    assert.strictEqual(await exited, 0, stderr);
    assert.match(stderr, /stopping/);
  });
});
