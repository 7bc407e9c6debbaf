// `npm run bench -- --sections cpu`: the CPU backend (WebAssembly SIMD, engine/rwkv7/cpu-runtime.ts) on the
// bundled model and a random model of the official 0.1B shape, with 1 thread and with every core: decode
// tok/s of 1 and 8 sequences (output 'top', as the engine decodes) and prefill tok/s of a 512-token prompt.
// Each figure is the median of --cpu-reps runs (default 3); --cpu-models default,0.1b, --cpu-threads 1,2,4 and
// --cpu-precisions f16,int8 (default both) choose.
//
// node-llama-cpp on the same weights (../shared/cpu-baseline/, README there) runs in the same bench when
// NLC_DIR (its install folder) and NLC_GGUF_DEFAULT / NLC_GGUF_01B (the models as GGUF, made with
// rwkv7_to_gguf.py) are set; the ratios are then printed beside the figures. int8 rows compare with q8_0 GGUFs
// (NLC_GGUF_DEFAULT_Q8 / NLC_GGUF_01B_Q8).

import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { packageRoot } from '../engine/package-root';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { defaultCpuThreads } from '../engine/rwkv7/cpu-runtime';
import type { Checkpoint } from '../engine/types';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Deterministic token ids below the vocabulary. */
const tokens = (n: number, vocab: number, seed: number) => Array.from({ length: n }, (_, i) => 1 + ((i * 7919 + seed * 104729) % (vocab - 1)));

/** Tokens per second of wall time and per second of CPU time (all threads of the process, spinning included). */
interface Rate {
  wall: number;
  cpu: number;
}

async function timed(tokens: number, fn: () => Promise<void>): Promise<Rate> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await fn();
  const wall = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  return { wall: tokens / wall, cpu: tokens / ((c.user + c.system) / 1e6) };
}

async function decodeTokS(be: Backend, batch: number, steps: number): Promise<Rate> {
  const V = be.info.vocabSize;
  for (let s = 0; s < batch; s++) be.resetState(s);
  // A short prompt first, as a request would have.
  await be.run(Array.from({ length: batch }, (_, s) => ({ slot: s, tokens: tokens(16, V, s), output: 'none' as const })));
  let next = Array.from({ length: batch }, (_, s) => s + 1);
  return timed(batch * steps, async () => {
    for (let i = 0; i < steps; i++) {
      const out = await be.run(next.map((t, s) => ({ slot: s, tokens: [t], output: 'top' as const })));
      next = out.map((o) => (o && 'kind' in o && o.rows.length ? o.rows[0] : 1));
    }
  });
}

async function prefillTokS(be: Backend, n: number): Promise<Rate> {
  be.resetState(0);
  const prompt = tokens(n, be.info.vocabSize, 3);
  return timed(n, async () => {
    await be.run([{ slot: 0, tokens: prompt, output: 'last' }]);
  });
}

interface ModelCase {
  name: string;
  model: string | Checkpoint;
  steps: number;
  gguf?: string;
  /** The same model as q8_0, for the int8 rows. */
  ggufQ8?: string;
}

/** node-llama-cpp on the same weights, when installed and the GGUF given (see the header). */
function nodeLlamaCpp(gguf: string | undefined, model: string | Checkpoint, threads: number): Record<string, number> | null {
  const nlc = process.env.NLC_DIR;
  if (!nlc || !gguf || typeof model !== 'string') return null;
  const shared = process.env.RWKV_SHARED ?? path.resolve(__dirname, '../../../shared');
  const tools = path.join(shared, 'cpu-baseline');
  const prompts = path.join(fs.mkdtempSync('/tmp/rwkv-cpu-bench-'), 'prompts.json');
  const src = path.resolve(__dirname, '../../README.md');
  const p = spawnSync(process.execPath, [path.join(tools, 'make-prompts.js'), path.resolve(__dirname, '../..'), model, src], { encoding: 'utf8' });
  if (p.status !== 0) throw new Error(`make-prompts failed: ${p.stderr}`);
  fs.writeFileSync(prompts, p.stdout);
  const r = spawnSync(process.execPath, [path.join(tools, 'nlc-bench.mjs'), gguf, prompts, '3', String(threads)], { encoding: 'utf8', env: process.env });
  if (r.status !== 0) throw new Error(`nlc-bench failed: ${r.stderr}`);
  const j = JSON.parse(r.stdout.trim().split('\n').pop()!);
  return {
    decode_b1: median(j.gen.slice(1).map((g: { decode_tok_s: number }) => g.decode_tok_s)),
    prefill_512: median(j.prefill.map((g: { tok_s: number }) => g.tok_s)),
  };
}

export async function benchCpu(): Promise<Record<string, unknown>> {
  const reps = Number(arg('cpu-reps') ?? 3);
  const all = defaultCpuThreads();
  const threadCounts = arg('cpu-threads')?.split(',').map(Number) ?? [...new Set([1, all])];
  const which = (arg('cpu-models') ?? 'default,0.1b').split(',');
  const cases: ModelCase[] = [];
  if (which.includes('default')) cases.push({ name: 'default (17M)', model: path.join(packageRoot(), 'models', 'default.st'), steps: 64, gguf: process.env.NLC_GGUF_DEFAULT, ggufQ8: process.env.NLC_GGUF_DEFAULT_Q8 });
  if (which.includes('0.1b'))
    cases.push({ name: '0.1B shape, random', model: randomRwkv7Checkpoint({ nLayer: 12, nEmbd: 768, vocabSize: 65536, seed: 7 }), steps: 16, gguf: process.env.NLC_GGUF_01B, ggufQ8: process.env.NLC_GGUF_01B_Q8 });
  const precisions = (arg('cpu-precisions') ?? 'f16,int8').split(',') as ('f16' | 'int8')[];
  const results: Record<string, unknown> = { machine: `${all} cores available to the process; other processes may share them`, reps };
  for (const c of cases) {
    for (const threads of threadCounts) for (const precision of precisions) {
      const be = await createBackend({ model: c.model, slots: 8, device: 'cpu', threads, precision, maxTokens: 512, maxRows: 64 });
      try {
        await decodeTokS(be, 1, 4); // warm-up: worker threads started, code compiled
        const d1: Rate[] = [];
        const d8: Rate[] = [];
        const pf: Rate[] = [];
        for (let r = 0; r < reps; r++) {
          d1.push(await decodeTokS(be, 1, c.steps));
          d8.push(await decodeTokS(be, 8, Math.max(4, c.steps / 4)));
          pf.push(await prefillTokS(be, 512));
        }
        const wall = (rs: Rate[]) => +median(rs.map((r) => r.wall)).toFixed(1);
        const cpu = (rs: Rate[]) => +median(rs.map((r) => r.cpu)).toFixed(1);
        const row: Record<string, unknown> = {
          backend: be.adapterName,
          decode_b1_tok_s: wall(d1),
          decode_b8_tok_s: wall(d8),
          prefill_512_tok_s: wall(pf),
          // On a machine shared with other work, wall time counts theirs too; CPU time counts ours only.
          per_cpu_second: { decode_b1: cpu(d1), decode_b8: cpu(d8), prefill_512: cpu(pf) },
          runs: { decode_b1: d1.map((x) => +x.wall.toFixed(1)), decode_b8: d8.map((x) => +x.wall.toFixed(1)), prefill_512: pf.map((x) => +x.wall.toFixed(1)) },
        };
        const nlc = nodeLlamaCpp(precision === 'int8' ? c.ggufQ8 : c.gguf, c.model, threads);
        if (nlc) {
          row.node_llama_cpp = nlc;
          row.ratio_decode_b1 = +(wall(d1) / nlc.decode_b1).toFixed(2);
          row.ratio_prefill = +(wall(pf) / nlc.prefill_512).toFixed(2);
        }
        results[`${c.name}, ${precision}, ${threads} thread${threads > 1 ? 's' : ''}`] = row;
        console.log(`${c.name}, ${precision}, threads ${threads}: ${JSON.stringify(row)}`);
      } finally {
        be.dispose();
      }
    }
  }
  return results;
}

export function registerSection(register: (name: string, section: () => Promise<Record<string, unknown>>) => void) {
  register('cpu', () => benchCpu());
}
