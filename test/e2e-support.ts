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
export type N8nRunData = Record<string, { data?: Record<string, { json: any }[][]>; inputOverride?: Record<string, { json: any }[][]> }[]>;

/**
 * The run JSON in what `n8n execute --rawOutput` printed. n8n writes log lines to the same stdout before and
 * after it (CI once saw one after it), so the JSON is cut out by its balanced braces, not by where the text ends.
 */
export function rawOutputJson(out: string): unknown {
  const start = out.indexOf('{');
  if (start < 0) throw new Error(`no JSON in n8n's output:\n${out.slice(-3000)}`);
  let depth = 0;
  let inString = false;
  for (let i = start; i < out.length; i++) {
    const c = out[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') depth++;
    else if (c === '}' || c === ']') {
      if (--depth === 0) {
        const trailing = out.slice(i + 1).trim();
        if (trailing) process.stderr.write(`n8n printed after the run JSON: ${trailing.slice(0, 2000)}\n`);
        return JSON.parse(out.slice(start, i + 1));
      }
    }
  }
  throw new Error(`unterminated JSON in n8n's output:\n${out.slice(-3000)}`);
}

export function n8nCli(nodeBin: string, n8nBin: string, env: () => NodeJS.ProcessEnv) {
  const n8n = (...args: string[]): string => {
    try {
      return execFileSync(nodeBin, [n8nBin, ...args], { env: env(), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string };
      throw new Error(`n8n ${args.join(' ')} failed:\n${(e.stdout ?? '').slice(-3000)}\n${(e.stderr ?? '').slice(-3000)}`);
    }
  };
  /** `n8n execute --id` of a workflow: the whole run, after checking it had no error. */
  const executeRun = (id: string) => {
    const run = rawOutputJson(n8n('execute', `--id=${id}`, '--rawOutput')) as { data: { resultData: { error?: unknown; runData: N8nRunData } } };
    assert.strictEqual(run.data.resultData.error, undefined, JSON.stringify(run.data.resultData.error));
    return run.data.resultData.runData;
  };
  /** `n8n execute --id` of a workflow: the output items of a node by name, after checking the run had no error. */
  const execute = (id: string) => {
    const runData = executeRun(id);
    return (name: string) => runData[name][0].data!.main[0].map((i) => i.json);
  };
  return { n8n, execute, executeRun };
}
