// What the end-to-end tests in real hosts share: a free loopback port, the packed package installed as n8n
// loads a custom extension, and the n8n command line with its output kept for the failure message.

import * as assert from 'assert';
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as path from 'path';
import { REPO_ROOT } from './paths';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

/** The package as npm would unpack it, with its runtime dependencies beside it (not n8n-workflow: n8n provides that). */
export function installN8nExtension(root: string): string {
  const tarball = execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', root], { cwd: REPO_ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    .trim()
    .split('\n')
    .pop()!;
  const pkgDir = path.join(root, 'ext', 'n8n-nodes-rwkv-flow');
  fs.mkdirSync(pkgDir, { recursive: true });
  execFileSync('tar', ['-xzf', path.join(root, tarball), '-C', pkgDir, '--strip-components=1']);
  // Outside the extension folder so n8n's **/*.node.js scan does not walk it.
  const modules = path.join(root, 'ext', 'node_modules');
  fs.mkdirSync(modules);
  for (const entry of fs.readdirSync(path.join(REPO_ROOT, 'node_modules'))) {
    if (entry === 'n8n-workflow' || entry.startsWith('.')) continue;
    fs.symlinkSync(path.join(REPO_ROOT, 'node_modules', entry), path.join(modules, entry));
  }
  return pkgDir;
}

/** `n8n <args>` with this environment; a failure carries the end of n8n's output. */
export function n8nCli(nodeBin: string, n8nBin: string, env: () => NodeJS.ProcessEnv) {
  const n8n = (...args: string[]): string => {
    try {
      return execFileSync(nodeBin, [n8nBin, ...args], { env: env(), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string };
      throw new Error(`n8n ${args.join(' ')} failed:\n${(e.stdout ?? '').slice(-3000)}\n${(e.stderr ?? '').slice(-3000)}`);
    }
  };
  /** `n8n execute --id` of a workflow: the output items of a node by name, after checking the run had no error. */
  const execute = (id: string) => {
    const out = n8n('execute', `--id=${id}`, '--rawOutput');
    const run = JSON.parse(out.slice(out.indexOf('{'))) as { data: { resultData: { error?: unknown; runData: Record<string, { data: { main: { json: any }[][] } }[]> } } };
    assert.strictEqual(run.data.resultData.error, undefined, JSON.stringify(run.data.resultData.error));
    return (name: string) => run.data.resultData.runData[name][0].data.main[0].map((i) => i.json);
  };
  return { n8n, execute };
}
