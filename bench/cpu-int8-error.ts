// The CPU backend's int8 error against f16, measured with whatever kernel build sits in this dist/ (so a build
// with another quantisation of the inputs, e.g. 7-bit blocks for relaxed SIMD's i8 dot product, is judged by
// running this from a copy of dist/ holding that build):
//  - worst per-row relative L2 of every golden model's logits against the reference (../shared/golden);
//  - the bundled model's perplexity (mean NLL of every next token, 512-token windows from the zero state) on text
//    it was not trained on: this machine's /usr/share/doc/*/copyright files (bench/cpu-i16-error.ts does the
//    same for the i16 storage; the held-out split needs a network, bench/precision.ts).
//   node dist/bench/cpu-int8-error.js [--windows 8] [--precisions f16,int8]

import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { packageRoot } from '../engine/package-root';
import { readSafetensors } from '../engine/loader/safetensors';
import { toF32, toI32 } from '../engine/loader/dtype';
import { worstRelL2 } from '../test/metrics';
import { copyrightText, windowNll } from './offline-perplexity';
import type { CpuPrecision } from '../engine/cpu/cpu-weight-writer';

const GOLDEN = path.resolve(packageRoot(), '..', 'shared', 'golden');
const GOLDEN_MODELS = ['v7-tiny', 'v7-vocab', 'v7a-tiny', 'v6-tiny', 'v5-tiny', 'v4-tiny'];

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}

async function withBackend<T>(precision: CpuPrecision, model: string, fn: (be: Backend) => Promise<T>): Promise<T> {
  const be = await createBackend({ model, slots: 1, device: 'cpu', threads: 1, precision, maxTokens: 512, maxRows: 512 });
  try {
    return await fn(be);
  } finally {
    be.dispose();
  }
}

async function main() {
  const precisions = arg('precisions', 'f16,int8').split(',') as CpuPrecision[];
  const windows = Number(arg('windows', '8'));
  const out: Record<string, Record<string, number>> = {};
  for (const model of GOLDEN_MODELS) {
    const g = readSafetensors(path.join(GOLDEN, `${model}.golden.st`));
    const tokens = Array.from(toI32(g.tensors.get('tokens')!));
    const want = Float32Array.from(toF32(g.tensors.get('logits')!));
    const row: Record<string, number> = {};
    for (const p of precisions) {
      const got = await withBackend(p, path.join(GOLDEN, `${model}.pth`), async (be) => (await be.run([{ slot: 0, tokens, output: 'all' }]))[0]!);
      row[p] = +worstRelL2(got, want, want.length / tokens.length).toExponential(3);
    }
    out[`golden ${model}: worst rel L2 vs reference`] = row;
  }
  const bundled = path.join(packageRoot(), 'models', 'default.st');
  const { rows, files } = copyrightText(bundled);
  const ppl: Record<string, number> = {};
  for (const p of precisions) ppl[p] = +Math.exp(await withBackend(p, bundled, (be) => windowNll(be, rows, windows))).toFixed(4);
  if (ppl.f16 && ppl.int8) ppl['int8 / f16'] = +(ppl.int8 / ppl.f16).toFixed(5);
  out[`bundled perplexity, ${windows} x 512 tokens of ${files} copyright files (${rows.length} tokens)`] = ppl;
  console.log(JSON.stringify(out, null, 1));
}

void main().then(() => process.exit(0), (e) => {
  console.error(e);
  process.exit(1);
});
