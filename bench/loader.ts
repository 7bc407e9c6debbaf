// Model loading throughput: random RWKV-7 generation, safetensors write and read, and the dtype
// conversions every load runs (bf16/f16 → f32, f32/bf16 → f16), at a real model shape.
// Run alone with `node dist/bench/loader.js [--shape 0.1b|0.4b|1.5b]`, or as the bench runner's
// "loader" section (registerSection).

import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { bf16ToF32, f16ToF32, f32ToF16 } from '../engine/loader/dtype';
import { describeModel } from '../engine/model-spec';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { writeSafetensors } from '../engine/loader/safetensors';

const SHAPES: Record<string, { nLayer: number; nEmbd: number }> = {
  '0.1b': { nLayer: 12, nEmbd: 768 },
  '0.4b': { nLayer: 24, nEmbd: 1024 },
  '1.5b': { nLayer: 24, nEmbd: 2048 },
};

function seconds<T>(fn: () => T): [T, number] {
  const t0 = process.hrtime.bigint();
  const r = fn();
  return [r, Number(process.hrtime.bigint() - t0) / 1e9];
}

export async function benchLoader(shape = '0.4b'): Promise<Record<string, number | string>> {
  const dims = SHAPES[shape];
  if (!dims) throw new Error(`unknown shape ${shape}; known: ${Object.keys(SHAPES).join(', ')}`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-bench-loader-'));
  const file = path.join(dir, 'model.st');
  try {
    const [ck, genS] = seconds(() => randomRwkv7Checkpoint({ ...dims, vocabSize: 65536, dtype: 'f16' }));
    let bytes = 0;
    for (const t of ck.tensors.values()) bytes += t.bytes.byteLength;
    const gb = bytes / 1e9;
    const [, writeS] = seconds(() => writeSafetensors(file, ck.tensors, ck.metadata));
    const [loaded, loadS] = seconds(() => loadCheckpoint(file));
    const [, describeS] = seconds(() => describeModel(loaded));

    // Conversions over 64M elements (128 MB of 16-bit input).
    const n = 64 << 20;
    const u16 = new Uint16Array(n);
    for (let i = 0; i < n; i++) u16[i] = (i * 2654435761) >>> 16;
    const f32 = new Float32Array(n).fill(1); // touched up front: page faults are not conversion time
    const best = (fn: () => void) => Math.min(seconds(fn)[1], seconds(fn)[1]);
    const f16ToF32S = best(() => f16ToF32(u16, f32));
    const bf16ToF32S = best(() => bf16ToF32(u16, f32));
    const f32ToF16S = best(() => f32ToF16(f32, u16));
    const gelem = n / 1e9;
    return {
      shape,
      modelGB: +gb.toFixed(3),
      randomModelSeconds: +genS.toFixed(2),
      writeGBps: +(gb / writeS).toFixed(2),
      loadGBps: +(gb / loadS).toFixed(2),
      describeMs: +(describeS * 1e3).toFixed(1),
      f16ToF32Gelemps: +(gelem / f16ToF32S).toFixed(2),
      bf16ToF32Gelemps: +(gelem / bf16ToF32S).toFixed(2),
      f32ToF16Gelemps: +(gelem / f32ToF16S).toFixed(2),
    };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Hook for bench/run.ts's optional sections. */
export function registerSection(
  register: (name: string, section: (ctx: { onGpu: boolean }) => Promise<Record<string, unknown>>) => void,
): void {
  // GPU hosts have the memory and disk for a real 1.5B-sized file; CI keeps to the small shape.
  register('loader', ({ onGpu }) => benchLoader(onGpu ? '1.5b' : '0.1b'));
}

if (require.main === module) {
  const i = process.argv.indexOf('--shape');
  benchLoader(i >= 0 ? process.argv[i + 1] : undefined)
    .then((r) => console.log(JSON.stringify(r, null, 1)))
    .catch((e) => {
      console.error(e);
      process.exit(1);
    });
}
