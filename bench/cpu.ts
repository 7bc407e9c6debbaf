// `npm run bench -- --sections cpu`: the CPU backend (WebAssembly SIMD, engine/cpu/cpu-runtime.ts) on the
// bundled model and a random model of the official 0.1B shape, with 1 thread and with every core: decode
// tok/s of 1 and 8 sequences (output 'top', as the engine decodes) and prefill tok/s of a 512-token prompt.
// Each figure is the median of --cpu-reps runs (default 3) in each of --cpu-rounds rounds (default 1);
// --cpu-models default,default-world,0.1b, --cpu-threads 1,2,4 and --cpu-precisions f16,int8 (default both) choose;
// --cpu-decode-only measures decode of 1 sequence alone (ours and theirs), for decode work on a shared machine.
// 'default-world' is the bundled model with its embedding and head scattered to the 65,536-row World
// vocabulary, as its GGUF conversion has them: the like-for-like decode comparison with llama.cpp.
//
// node-llama-cpp on the same weights (bench/cpu-baseline.ts, ../shared/cpu-baseline/) runs in the same bench,
// alternating with ours round by round, when NLC_DIR (its install folder) is set: the GGUF files are made
// with Python's `gguf` and cached (NLC_GGUF_DIR), or given as NLC_GGUF_DEFAULT / NLC_GGUF_01B (f16) and
// NLC_GGUF_DEFAULT_Q8 / NLC_GGUF_01B_Q8 (q8_0, compared with our int8). Ratios are printed beside the figures.

import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { packageRoot } from '../engine/package-root';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { checkpointFile, ggufFor, type NlcResult, type NlcSetup, nlcSetup, runNlc, worldVocabCheckpoint } from './cpu-baseline';
import { defaultCpuThreads } from '../engine/cpu/cpu-runtime';
import type { Checkpoint } from '../engine/types';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** Deterministic token ids below the vocabulary. */
export const tokens = (n: number, vocab: number, seed: number) => Array.from({ length: n }, (_, i) => 1 + ((i * 7919 + seed * 104729) % (vocab - 1)));

/** Tokens per second of wall time and per second of CPU time (all threads of the process, spinning included). */
export interface Rate {
  wall: number;
  cpu: number;
}

export async function timed(tokens: number, fn: () => Promise<void>): Promise<Rate> {
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
  /** The checkpoint file the GGUF is made from (and the prompts' tokenizer read from); null: none for this case. */
  file: () => string | null;
  /** GGUFs given in the environment (f16, q8_0). */
  given: [string | undefined, string | undefined];
}

export async function benchCpu(): Promise<Record<string, unknown>> {
  const reps = Number(arg('cpu-reps') ?? 3);
  const rounds = Number(arg('cpu-rounds') ?? 1);
  const all = defaultCpuThreads();
  const threadCounts = arg('cpu-threads')?.split(',').map(Number) ?? [...new Set([1, all])];
  const which = (arg('cpu-models') ?? 'default,0.1b').split(',');
  const setup = nlcSetup();
  const nlc: NlcSetup | null = typeof setup === 'string' ? null : setup;
  if (typeof setup === 'string') console.log(`cpu: node-llama-cpp comparison off: ${setup}`);
  else if (!setup.canConvert) console.log('cpu: python3 with gguf and numpy not found: only GGUFs given as NLC_GGUF_* are compared');
  const bundled = path.join(packageRoot(), 'models', 'default.st');
  const cases: ModelCase[] = [];
  const given = (v: string): [string | undefined, string | undefined] => [process.env[`NLC_GGUF_${v}`], process.env[`NLC_GGUF_${v}_Q8`]];
  if (which.includes('default')) cases.push({ name: 'default (17M)', model: bundled, steps: 64, file: () => bundled, given: given('DEFAULT') });
  if (which.includes('default-world'))
    cases.push({ name: 'default (17M), World head', model: worldVocabCheckpoint(loadCheckpoint(bundled)), steps: 64, file: () => bundled, given: given('DEFAULT') });
  if (which.includes('0.1b')) {
    const ck = randomRwkv7Checkpoint({ nLayer: 12, nEmbd: 768, vocabSize: 65536, seed: 7 });
    cases.push({ name: '0.1B shape, random', model: ck, steps: 16, file: () => (nlc ? checkpointFile(nlc, ck, 'rwkv7-0.1b-random-seed7') : null), given: given('01B') });
  }
  const precisions = (arg('cpu-precisions') ?? 'f16,int8').split(',') as ('f16' | 'int8')[];
  const decodeOnly = process.argv.includes('--cpu-decode-only');
  const results: Record<string, unknown> = { machine: `${all} cores available to the process; other processes may share them`, reps, rounds };
  for (const c of cases) {
    let file: string | null | undefined;
    for (const threads of threadCounts) for (const precision of precisions) {
      let gguf: string | null = null;
      if (nlc) {
        file ??= c.file();
        const type = precision === 'int8' ? 'q8_0' : 'f16';
        gguf = file ? ggufFor(nlc, file, type, c.given[type === 'f16' ? 0 : 1]) : null;
      }
      const be = await createBackend({ model: c.model, slots: 8, device: 'cpu', threads, precision, maxTokens: 512, maxRows: 64 });
      try {
        await decodeTokS(be, 1, 4); // warm-up: worker threads started, code compiled
        const d1: Rate[] = [];
        const d8: Rate[] = [];
        const pf: Rate[] = [];
        const theirs: NlcResult[] = [];
        for (let round = 0; round < rounds; round++) {
          for (let r = 0; r < reps; r++) {
            d1.push(await decodeTokS(be, 1, c.steps));
            if (decodeOnly) continue;
            d8.push(await decodeTokS(be, 8, Math.max(4, c.steps / 4)));
            pf.push(await prefillTokS(be, 512));
          }
          if (nlc && gguf && file) theirs.push(runNlc(nlc, gguf, file, threads, reps, decodeOnly));
        }
        const wall = (rs: Rate[]) => (rs.length ? +median(rs.map((r) => r.wall)).toFixed(1) : null);
        const cpu = (rs: Rate[]) => (rs.length ? +median(rs.map((r) => r.cpu)).toFixed(1) : null);
        const row: Record<string, unknown> = {
          backend: be.adapterName,
          decode_b1_tok_s: wall(d1),
          decode_b8_tok_s: wall(d8),
          prefill_512_tok_s: wall(pf),
          // On a machine shared with other work, wall time counts theirs too; CPU time counts ours only.
          per_cpu_second: { decode_b1: cpu(d1), decode_b8: cpu(d8), prefill_512: cpu(pf) },
          runs: { decode_b1: d1.map((x) => +x.wall.toFixed(1)), decode_b8: d8.map((x) => +x.wall.toFixed(1)), prefill_512: pf.map((x) => +x.wall.toFixed(1)) },
        };
        if (theirs.length) {
          const d = theirs.flatMap((t) => t.runs.decode_b1);
          const p = theirs.flatMap((t) => t.runs.prefill_512);
          const them = { gguf: path.basename(gguf!), decode_b1: median(d), prefill_512: median(p), runs: { decode_b1: d, prefill_512: p } };
          row.node_llama_cpp = them;
          row.ratio_decode_b1 = +(wall(d1)! / them.decode_b1).toFixed(2);
          if (!decodeOnly) row.ratio_prefill = +(wall(pf)! / them.prefill_512).toFixed(2);
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
