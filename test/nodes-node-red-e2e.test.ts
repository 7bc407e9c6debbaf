// End to end in a real Node-RED process: the packed package installed in a user directory the way
// `npm install` in ~/.node-red does it, found by Node-RED's own module scan (package.json
// "node-red" section, editor HTML, icons), the webhook example flow deployed and answering HTTP
// requests with the bundled default model on the real engine.

import * as assert from 'assert';
import { execFileSync, spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { freePort } from './e2e-support';
import { GOLDEN, REPO_ROOT } from './paths';

const TINY = path.join(GOLDEN, 'v7-tiny.st');
const BUNDLED_MODEL = path.join(REPO_ROOT, 'models', 'default.st');

/** userDir/node_modules/n8n-nodes-rwkv-flow from `npm pack`; its dependencies one folder up, outside Node-RED's scan. */
function installInto(root: string): string {
  const userDir = path.join(root, 'userDir');
  const pkgDir = path.join(userDir, 'node_modules', 'n8n-nodes-rwkv-flow');
  fs.mkdirSync(pkgDir, { recursive: true });
  const tarball = execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', root], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  })
    .trim()
    .split('\n')
    .pop()!;
  execFileSync('tar', ['-xzf', path.join(root, tarball), '-C', pkgDir, '--strip-components=1']);
  const deps = path.join(root, 'node_modules');
  fs.mkdirSync(deps);
  for (const entry of fs.readdirSync(path.join(REPO_ROOT, 'node_modules'))) {
    if (!entry.startsWith('.')) fs.symlinkSync(path.join(REPO_ROOT, 'node_modules', entry), path.join(deps, entry));
  }
  return userDir;
}

/** The example flow as the editor deploys it (on a tab), unchanged: it runs on the bundled default model. */
function webhookFlow(): object[] {
  const nodes = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'examples', 'webhook-completion.json'), 'utf8')) as Record<string, unknown>[];
  return [{ id: 'tab1', type: 'tab', label: 'example' }, ...nodes.map((n) => (n.type === 'rwkv-model' ? n : { ...n, z: 'tab1' }))];
}

/**
 * The Node-RED runtimes to test: the devDependency (Node-RED 4, runs on Node 20), and Node-RED 5 (needs Node
 * >= 22.9) from NODE_RED_5_HOME, a folder whose node_modules holds node-red@5 (.ci/run installs it). On CI a
 * Node that can run Node-RED 5 without NODE_RED_5_HOME is a failure, unless RWKV_SKIP_NODE_RED_5=1 says so.
 */
function nodeRedRuntimes(): { label: string; redJs: string | null; why?: string }[] {
  const devVersion = (require('node-red/package.json') as { version: string }).version;
  const runtimes: { label: string; redJs: string | null; why?: string }[] = [
    { label: `Node-RED ${devVersion} (devDependency)`, redJs: require.resolve('node-red/red.js') },
  ];
  const [major, minor] = process.versions.node.split('.').map(Number);
  const canRun5 = major > 22 || (major === 22 && minor >= 9);
  const home = process.env.NODE_RED_5_HOME;
  if (home) {
    const pkg = path.join(home, 'node_modules', 'node-red', 'package.json');
    const version = (JSON.parse(fs.readFileSync(pkg, 'utf8')) as { version: string }).version;
    runtimes.push({ label: `Node-RED ${version} (NODE_RED_5_HOME)`, redJs: canRun5 ? path.join(path.dirname(pkg), 'red.js') : null, why: `needs Node >= 22.9, this is ${process.versions.node}` });
  } else if (canRun5 && process.env.CI === 'true' && process.env.RWKV_SKIP_NODE_RED_5 !== '1') {
    runtimes.push({ label: 'Node-RED 5', redJs: null, why: 'NODE_RED_5_HOME is not set on CI (set RWKV_SKIP_NODE_RED_5=1 to skip on purpose)' });
  }
  return runtimes;
}

for (const runtime of nodeRedRuntimes()) {
  describe(`${runtime.label} end to end (packed package, real runtime, bundled model)`, function () {
    this.timeout(180000);
    let root: string;
    let red: ChildProcess;
    let base: string;
    let log = '';

    before(async function () {
      if (!runtime.redJs) {
        if (process.env.CI === 'true' && !process.env.NODE_RED_5_HOME) throw new Error(runtime.why);
        this.skip();
      }
      assert.ok(fs.existsSync(BUNDLED_MODEL), `the bundled model ${BUNDLED_MODEL} is missing`);
      root = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-nr-e2e-'));
      const userDir = installInto(root);
      const port = await freePort();
      base = `http://127.0.0.1:${port}`;
      fs.writeFileSync(path.join(userDir, 'flows.json'), JSON.stringify(webhookFlow()));
      fs.writeFileSync(
        path.join(userDir, 'settings.js'),
        `module.exports = { uiHost: '127.0.0.1', uiPort: ${port}, flowFile: 'flows.json', credentialSecret: false, logging: { console: { level: 'info' } } };`,
      );
      red = spawn(process.execPath, [runtime.redJs!, '--userDir', userDir, '--settings', path.join(userDir, 'settings.js')], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      red.stdout!.on('data', (d) => (log += d));
      red.stderr!.on('data', (d) => (log += d));
      const end = Date.now() + 60000;
      // Ready = flows started and the HTTP server listening. Node-RED logs "Started flows" from its runtime and
      // "Server now running" from the listen callback, in either order: waiting for the first alone once let a
      // request reach the port before it was listening (ECONNREFUSED on a loaded CI machine).
      while (!log.includes('Started flows') || !log.includes('Server now running at')) {
        if (Date.now() > end || red.exitCode !== null) throw new Error(`Node-RED did not start:\n${log}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    });

    after(async () => {
      if (red && red.exitCode === null) {
        const exited = new Promise((r) => red.once('exit', r));
        red.kill('SIGINT'); // Node-RED stops its flows (close handlers) on SIGINT
        await exited;
      }
      if (root) fs.rmSync(root, { recursive: true, force: true });
    });

    it('finds the five node types through its own module scan, without errors', async () => {
      const res = await fetch(`${base}/nodes`, { headers: { Accept: 'application/json' } });
      const sets = (await res.json()) as { module: string; types: string[]; enabled: boolean; err?: string }[];
      const ours = sets.filter((s) => s.module === 'n8n-nodes-rwkv-flow');
      assert.deepStrictEqual(ours.flatMap((s) => s.types).sort(), ['rwkv-choose', 'rwkv-embed', 'rwkv-generate', 'rwkv-load-state', 'rwkv-model']);
      for (const s of ours) {
        assert.strictEqual(s.err, undefined, `${s.types}: ${s.err}`);
        assert.ok(s.enabled);
      }
    });

    it('serves the editor HTML and the icons', async () => {
      const html = await (await fetch(`${base}/nodes`, { headers: { Accept: 'text/html' } })).text();
      for (const type of ['rwkv-model', 'rwkv-generate', 'rwkv-choose', 'rwkv-embed', 'rwkv-load-state']) {
        assert.ok(html.includes(`data-template-name="${type}"`), `no edit dialog for ${type}`);
      }
      const icons = (await (await fetch(`${base}/icons`, { headers: { Accept: 'application/json' } })).json()) as Record<string, string[]>;
      assert.deepStrictEqual(icons['n8n-nodes-rwkv-flow'].sort(), ['rwkv-choose.svg', 'rwkv-embed.svg', 'rwkv-generate.svg', 'rwkv-state.svg']);
      const svg = await fetch(`${base}/icons/n8n-nodes-rwkv-flow/rwkv-generate.svg`);
      assert.strictEqual(svg.status, 200);
      assert.match(svg.headers.get('content-type') ?? '', /svg/);
    });

    it('the deployed webhook example answers with a completion, and a bad request with 400', async () => {
      const ok = await fetch(`${base}/rwkv/complete`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: 'The Linux kernel is', maxTokens: 4 }),
      });
      assert.strictEqual(ok.status, 200, log);
      assert.ok((await ok.text()).length > 0);

      const bad = await fetch(`${base}/rwkv/complete`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: '1+1=', maxTokens: -1 }),
      });
      assert.strictEqual(bad.status, 400);
      assert.match(((await bad.json()) as { error: string }).error, /maxTokens: must be an integer ≥ 1/);
    });

    it('stops cleanly: close handlers release the model within the stop timeout', async () => {
      const exited = new Promise<number | null>((r) => red.once('exit', (code) => r(code)));
      red.kill('SIGINT');
      assert.strictEqual(await exited, 0, log);
      assert.ok(!/Error stopping node|close timed out|Unhandled/i.test(log), log);
    });
  });
}
