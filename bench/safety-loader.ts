// Loader safety: how fast, and at what memory cost, each crafted hostile model file (bench/crafted-models.ts)
// is refused. Each refusal runs in a child process — the path the engine takes, loadCheckpoint then
// describeModel — so its peak RSS is its own and a loader that hangs or balloons can be killed without
// taking the bench (or a test) with it. The parent watches the child's RSS and kills it past a ceiling.
//
// Child mode: `node dist/bench/safety-loader.js --refuse FILE` prints one JSON line (RefusalReport).

import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { CRAFTED_MODELS } from './crafted-models';

export interface Refusal {
  /** Milliseconds from the call to the refusal (in the child; excludes Node's start-up). */
  ms: number;
  /** Peak RSS of the child (MiB), and its RSS high-water mark before the call. */
  peakRssMiB: number;
  baselineRssMiB: number;
  /** The refusal's message; null when the file was accepted. */
  error: string | null;
  /** Set when the child did not finish on its own. */
  killed?: 'timeout' | 'memory';
}

export interface RefuseOptions {
  /** Kill the child after this long (default 60 s). */
  timeoutMs?: number;
  /** Kill the child once its RSS passes this (default 1024 MiB). */
  rssLimitMiB?: number;
}

const MiB = 1024 * 1024;

/** RSS of a live process in MiB (Linux), or NaN when it cannot be read. */
function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** Run the engine's load path on `file` in a child process and report how it ended. */
export function refuseInChild(file: string, opts: RefuseOptions = {}): Promise<Refusal> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const rssLimitMiB = opts.rssLimitMiB ?? 1024;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [__filename, '--refuse', file], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let peakSeen = 0;
    let killed: Refusal['killed'];
    const started = Date.now();
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += String(d).slice(0, 4096)));
    // Polled, not event-driven: a loader stuck in a synchronous loop cannot report anything itself.
    const watch = setInterval(() => {
      const rss = rssMiB(child.pid!);
      if (rss > peakSeen) peakSeen = rss;
      if (rss > rssLimitMiB) killed = 'memory';
      else if (Date.now() - started > timeoutMs) killed = 'timeout';
      if (killed) child.kill('SIGKILL');
    }, 10);
    child.on('error', (e) => {
      clearInterval(watch);
      reject(e);
    });
    child.on('close', () => {
      clearInterval(watch);
      if (killed) {
        resolve({ ms: Date.now() - started, peakRssMiB: Math.round(peakSeen), baselineRssMiB: NaN, error: null, killed });
        return;
      }
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()!) as Refusal);
      } catch {
        reject(new Error(`loader child printed no report (stderr: ${err.trim()})`));
      }
    });
  });
}

/**
 * This process's RSS high-water mark in MiB. /proc's VmHWM, not resourceUsage().maxRSS: a spawned child's
 * maxRSS keeps the parent's peak from before exec, VmHWM starts afresh with the new address space.
 */
function ownPeakRssMiB(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) / 1024 : process.resourceUsage().maxRSS / 1024;
}

/** Child side: load and describe `file` the way the engine does, and report. */
function refuseHere(file: string): Refusal {
  // Required here, not at the top: the parent side never needs the loader.
  const { loadCheckpoint } = require('../engine/loader/checkpoint') as typeof import('../engine/loader/checkpoint');
  const { describeModel } = require('../engine/model-spec') as typeof import('../engine/model-spec');
  const baselineRssMiB = ownPeakRssMiB();
  const t0 = process.hrtime.bigint();
  let error: string | null = null;
  try {
    describeModel(loadCheckpoint(file));
  } catch (e) {
    error = (e as Error).message ?? String(e);
  }
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const peakRssMiB = ownPeakRssMiB();
  return { ms: +ms.toFixed(1), peakRssMiB: Math.round(peakRssMiB), baselineRssMiB: Math.round(baselineRssMiB), error };
}

/** Every crafted class, written to a temporary folder and refused in a child: {ms, peakRssMiB, error} each. */
export async function measureLoaderSafety(): Promise<Record<string, unknown>> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-crafted-'));
  const results: Record<string, unknown> = {};
  try {
    for (const crafted of CRAFTED_MODELS) {
      const file = crafted.write(dir);
      const bytes = fs.statSync(file).size;
      const r = await refuseInChild(file);
      fs.rmSync(file, { force: true });
      results[crafted.name] = {
        fileMiB: +(bytes / MiB).toFixed(2),
        ms: r.ms,
        peakRssMiB: r.peakRssMiB,
        rssAboveBaselineMiB: Number.isFinite(r.baselineRssMiB) ? r.peakRssMiB - r.baselineRssMiB : null,
        error: r.error === null ? null : r.error.length > 300 ? `${r.error.slice(0, 300)}… (${r.error.length} chars)` : r.error,
        ...(r.killed ? { killed: r.killed } : {}),
        clear: r.error !== null && crafted.expect.test(r.error),
      };
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return results;
}

if (require.main === module) {
  const i = process.argv.indexOf('--refuse');
  if (i >= 0) {
    process.stdout.write(`${JSON.stringify(refuseHere(process.argv[i + 1]))}\n`);
  } else {
    measureLoaderSafety().then((r) => console.log(JSON.stringify(r, null, 1)));
  }
}
