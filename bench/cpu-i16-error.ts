// The error of the CPU backend's i16 storage of f16 matrices (RWKV_CPU_F16_AS=i16, engine/cpu/i16-quant.ts)
// against the exact f16 products (RWKV_CPU_F16_AS=f16), measured:
//  - worst per-row relative L2 of every golden model's logits against the reference (../shared/golden), both
//    storages, whole sequence at once (the golden tests' bound for f16 weights is 5e-3);
//  - relative L2 of the logits i16 vs f16 on the bundled model and on a random model of the 0.1B shape;
//  - the bundled model's perplexity (mean NLL of every next token, 512-token windows from the zero state) on
//    text it was not trained on: this machine's /usr/share/doc/*/copyright files (the held-out split of the
//    training corpus needs a network to rebuild, bench/precision.ts).
//   node dist/bench/cpu-i16-error.js [--windows 8]

import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { packageRoot } from '../engine/package-root';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { readSafetensors } from '../engine/loader/safetensors';
import { toF32, toI32 } from '../engine/loader/dtype';
import { copyrightText, windowNll } from './offline-perplexity';
import type { Checkpoint } from '../engine/types';

const GOLDEN = path.resolve(packageRoot(), '..', 'shared', 'golden');
const GOLDEN_MODELS: [string, string][] = [
  ['v7-tiny.pth', 'v7-tiny'], ['v7-vocab.pth', 'v7-vocab'], ['v7a-tiny.pth', 'v7a-tiny'],
  ['v6-tiny.pth', 'v6-tiny'], ['v5-tiny.pth', 'v5-tiny'], ['v4-tiny.pth', 'v4-tiny'],
];
type Storage = 'f16' | 'i16';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

async function withBackend<T>(as: Storage, model: string | Checkpoint, fn: (be: Backend) => Promise<T>): Promise<T> {
  process.env.RWKV_CPU_F16_AS = as;
  const be = await createBackend({ model, slots: 4, device: 'cpu', precision: 'f16', maxTokens: 512, maxRows: 512 });
  try {
    return await fn(be);
  } finally {
    be.dispose();
  }
}

function relL2(got: Float32Array, want: Float32Array, width: number): { worst: number; all: number } {
  let worst = 0;
  let num = 0;
  let den = 0;
  for (let r = 0; r < want.length / width; r++) {
    let n = 0;
    let d = 0;
    for (let i = r * width; i < (r + 1) * width; i++) {
      n += (got[i] - want[i]) ** 2;
      d += want[i] ** 2;
    }
    worst = Math.max(worst, Math.sqrt(n / Math.max(d, 1e-30)));
    num += n;
    den += d;
  }
  return { worst, all: Math.sqrt(num / den) };
}

const fmt = (x: number) => +x.toExponential(2);

async function logitsOf(as: Storage, model: string | Checkpoint, tokens: number[]): Promise<Float32Array> {
  return withBackend(as, model, async (be) => (await be.run([{ slot: 0, tokens, output: 'all' }]))[0]!);
}

async function main() {
  const out: Record<string, unknown> = {};
  for (const [model, golden] of GOLDEN_MODELS) {
    const g = readSafetensors(path.join(GOLDEN, `${golden}.golden.st`));
    const tokens = Array.from(toI32(g.tensors.get('tokens')!));
    const want = Float32Array.from(toF32(g.tensors.get('logits')!));
    const vocab = want.length / tokens.length;
    const row: Record<string, number> = {};
    for (const as of ['f16', 'i16'] as const) row[as] = fmt(relL2(await logitsOf(as, path.join(GOLDEN, model), tokens), want, vocab).worst);
    out[`golden ${model}: worst rel L2 vs reference`] = row;
    console.log(model, JSON.stringify(row));
  }
  const bundled = path.join(packageRoot(), 'models', 'default.st');
  const models: [string, string | Checkpoint][] = [
    ['bundled', bundled],
    ['0.1B random', randomRwkv7Checkpoint({ nLayer: 12, nEmbd: 768, vocabSize: 65536, seed: 7 })],
  ];
  for (const [name, model] of models) {
    const V = name === 'bundled' ? 10240 : 65536;
    const tokens = Array.from({ length: 128 }, (_, i) => 1 + ((i * 7919 + 3 * 104729) % (V - 1)));
    const a = await logitsOf('f16', model, tokens);
    const b = await logitsOf('i16', model, tokens);
    const e = relL2(b, a, V);
    out[`${name}: i16 vs f16 logits, 128 tokens`] = { worstRow: fmt(e.worst), all: fmt(e.all) };
    console.log(name, JSON.stringify(out[`${name}: i16 vs f16 logits, 128 tokens`]));
  }
  // Perplexity on text outside the training split.
  const { rows, files } = copyrightText(bundled);
  const windows = Number(arg('windows', '8'));
  const ppl: Record<string, number> = {};
  for (const as of ['f16', 'i16'] as const) ppl[as] = +Math.exp(await withBackend(as, bundled, (be) => windowNll(be, rows, windows))).toFixed(4);
  out[`bundled perplexity, ${windows} x 512 tokens of ${files} copyright files (${rows.length} tokens)`] = ppl;
  console.log(JSON.stringify(out, null, 1));
}

void main().then(() => process.exit(0), (e) => {
  console.error(e);
  process.exit(1);
});
