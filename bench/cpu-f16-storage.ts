// Same-process A/B of the CPU backend's two storages of f16 matrices (RWKV_CPU_F16_AS, cpu-weight-writer.ts):
// 'f16' (halves widened in the products) against 'i16' (16-bit codes, integer dot products). On a machine shared
// with other work only a comparison inside one process means anything: the variants alternate round by round
// (order flipped every round), each loaded fresh, and the figures are medians with the ratio i16 / f16.
//   node dist/bench/cpu-f16-storage.js [--models default,default-world,0.1b] [--threads 1,2] [--rounds 3]
// Prints decode tok/s (1 sequence, output 'top') and prefill tok/s (512 tokens, output 'last').

import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { packageRoot } from '../engine/package-root';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { worldVocabCheckpoint } from './cpu-baseline';
import { median, type Rate, timed, tokens } from './cpu';
import type { Checkpoint } from '../engine/types';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}


async function decode(be: Backend, steps: number): Promise<Rate> {
  be.resetState(0);
  await be.run([{ slot: 0, tokens: tokens(16, be.info.vocabSize, 1), output: 'none' }]);
  let next = 1;
  return timed(steps, async () => {
    for (let i = 0; i < steps; i++) {
      const [out] = await be.run([{ slot: 0, tokens: [next], output: 'top' }]);
      next = out && 'kind' in out && out.rows.length ? out.rows[0] : 1;
    }
  });
}

async function prefill(be: Backend, n: number): Promise<Rate> {
  be.resetState(0);
  const prompt = tokens(n, be.info.vocabSize, 3);
  return timed(n, async () => {
    await be.run([{ slot: 0, tokens: prompt, output: 'last' }]);
  });
}

async function main() {
  const models = arg('models', 'default,default-world,0.1b').split(',');
  const threadCounts = arg('threads', '1,2').split(',').map(Number);
  const rounds = Number(arg('rounds', '3'));
  const bundled = path.join(packageRoot(), 'models', 'default.st');
  const cases: { name: string; model: () => Checkpoint | string; steps: number }[] = [];
  if (models.includes('default')) cases.push({ name: 'default', model: () => bundled, steps: 128 });
  if (models.includes('default-world')) cases.push({ name: 'default-world', model: () => worldVocabCheckpoint(loadCheckpoint(bundled)), steps: 128 });
  if (models.includes('0.1b')) cases.push({ name: '0.1b', model: () => randomRwkv7Checkpoint({ nLayer: 12, nEmbd: 768, vocabSize: 65536, seed: 7 }), steps: 24 });
  for (const c of cases) {
    const model = c.model();
    for (const threads of threadCounts) {
      const got: Record<string, { d: Rate[]; p: Rate[] }> = { f16: { d: [], p: [] }, i16: { d: [], p: [] } };
      for (let r = 0; r < rounds; r++) {
        for (const as of r % 2 ? ['i16', 'f16'] : ['f16', 'i16']) {
          process.env.RWKV_CPU_F16_AS = as;
          const be = await createBackend({ model, slots: 1, device: 'cpu', threads, precision: 'f16', maxTokens: 512, maxRows: 64 });
          try {
            await decode(be, 4); // warm-up
            got[as].d.push(await decode(be, c.steps));
            got[as].p.push(await prefill(be, 512));
          } finally {
            be.dispose();
          }
        }
      }
      // Medians of wall and CPU-second rates, and i16 / f16 for each.
      const sum = (which: 'd' | 'p') => {
        const m = (as: string, k: keyof Rate) => median(got[as][which].map((r) => r[k]));
        return {
          f16: `${m('f16', 'wall').toFixed(1)} / ${m('f16', 'cpu').toFixed(1)}`,
          i16: `${m('i16', 'wall').toFixed(1)} / ${m('i16', 'cpu').toFixed(1)}`,
          ratio: `${(m('i16', 'wall') / m('f16', 'wall')).toFixed(2)} / ${(m('i16', 'cpu') / m('f16', 'cpu')).toFixed(2)}`,
        };
      };
      const runs = (as: string, which: 'd' | 'p') => got[as][which].map((r) => Math.round(r.wall));
      console.log(JSON.stringify({
        model: c.name, threads, 'tok/s': 'wall / per CPU second',
        decode_b1: sum('d'), prefill_512: sum('p'),
        runs: { f16: { d: runs('f16', 'd'), p: runs('f16', 'p') }, i16: { d: runs('i16', 'd'), p: runs('i16', 'p') } },
      }));
    }
  }
}

void main().then(() => process.exit(0), (e) => {
  console.error(e);
  process.exit(1);
});
