// `npm run bench`: every benchmark section in one run, so the ratios it prints compare numbers measured
// together. Usage: node dist/bench/run.js [--sections engine,tokenizer,...] [--shapes official|smoke]
// [--seconds S] [--crossover] [--out results.json]

import * as fs from 'fs';
import { acquireGpu } from '../engine/gpu/device';
import { benchEngine, OFFICIAL_SHAPES, SMOKE_SHAPES } from './engine';
import { benchMatmul, checkMatmulRows, MATMUL_CASES, SMOKE_MATMUL_CASES, summarizeMatmul } from './matmul';
import { benchSamplers } from './samplers';
import { benchTokenizer } from './tokenizer';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

type Section = (ctx: { gpu: Awaited<ReturnType<typeof acquireGpu>>; onGpu: boolean; seconds: number }) => Promise<Record<string, unknown>>;

const SECTIONS: Record<string, Section> = {
  engine: ({ gpu, onGpu, seconds }) => {
    const which = arg('shapes') ?? (onGpu ? 'official' : 'smoke');
    // --shapes official | smoke | a comma list of official shape names (e.g. 0.1B,1.5B).
    const shapes = which === 'official' ? OFFICIAL_SHAPES : which === 'smoke' ? SMOKE_SHAPES : OFFICIAL_SHAPES.filter((s) => which.split(',').includes(s.name));
    if (shapes.length === 0) throw new Error(`--shapes ${which}: none of ${OFFICIAL_SHAPES.map((s) => s.name).join(', ')}`);
    return benchEngine(gpu, shapes, { seconds, vocab: onGpu ? 65536 : 4096, crossover: process.argv.includes('--crossover') });
  },
  matmul: async ({ gpu, onGpu }) => {
    const rows = await benchMatmul(gpu, { cases: onGpu ? MATMUL_CASES : SMOKE_MATMUL_CASES });
    console.log(summarizeMatmul(rows));
    const out = arg('out');
    if (out) fs.writeFileSync(out, JSON.stringify({ matmul: { kernelPath: gpu.kernelPath, rows } }, null, 1)); // kept if the check below fails
    checkMatmulRows(rows);
    return { kernelPath: gpu.kernelPath, rows };
  },
  tokenizer: () => benchTokenizer(),
  samplers: () => benchSamplers(),
};

/** Sections added by other parts of the engine register here (see registerBenchSection). */
export function registerBenchSection(name: string, section: Section) {
  SECTIONS[name] = section;
}

async function main() {
  for (const mod of ['./grammar', './scheduler', './constrained', './loader', './top-logits', './safety', './schema-coverage', './cpu', './serve', './batch-flow', './flow-cost-model', './kernel-profile', './n8n-queue', './wkv', './precision', './quantise', './host-cost']) {
    try {
      // Optional sections: present once their part of the engine exists.
      const m = require(mod);
      if (typeof m.registerSection === 'function') m.registerSection(registerBenchSection);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw e;
    }
  }
  const gpu = await acquireGpu({ exactTimestamps: true });
  const onGpu = !/llvmpipe|lavapipe|swiftshader/i.test(gpu.adapterName);
  const seconds = Number(arg('seconds') ?? (onGpu ? 2 : 1));
  const names = (arg('sections') ?? Object.keys(SECTIONS).join(',')).split(',');
  if (!(seconds >= 0)) throw new Error(`--seconds ${arg('seconds')}: give the seconds each timed case runs (0: only its minimum steps)`);
  // The window each case is timed over, in the log: a window of 0 (minimum steps only) once went unnoticed.
  console.log(`adapter: ${gpu.adapterName}${onGpu ? '' : ' (CPU driver: small shapes)'}; kernel path ${gpu.kernelPath}; cases timed over ${seconds} s`);
  const all: Record<string, unknown> = { date: new Date().toISOString(), adapter: gpu.adapterName, kernelPath: gpu.kernelPath };
  for (const name of names) {
    const section = SECTIONS[name];
    if (!section) throw new Error(`unknown bench section '${name}'; known: ${Object.keys(SECTIONS).join(', ')}`);
    console.log(`\n== ${name}`);
    const r = await section({ gpu, onGpu, seconds });
    all[name] = r;
    console.log(JSON.stringify(r, null, 1));
  }
  const out = arg('out');
  if (out) fs.writeFileSync(out, JSON.stringify(all, null, 1));
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
