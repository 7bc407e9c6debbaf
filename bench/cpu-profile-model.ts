// The RWKV-7 pass of the CPU backend laid out in this thread, for the profile benches (cpu-prefill-profile.ts,
// cpu-decode-profile.ts): the model they name, planned for one slot of `T` tokens, written into a kernel memory with
// scratch for `threads` threads. The benches wrap the pool and kernels of their own in timers around it.

import * as path from 'path';
import { Arena } from '../engine/cpu/arena';
import type { CpuPrecision } from '../engine/cpu/cpu-weight-writer';
import { i16ScratchBytes } from '../engine/cpu/i16-quant';
import { int8ScratchBytes } from '../engine/cpu/int8-quant';
import { kernelModule } from '../engine/cpu/wasm-kernels';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { describeModel } from '../engine/model-spec';
import { packageRoot } from '../engine/package-root';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { planRwkv7CpuModel } from '../engine/rwkv7/cpu-forward';
import { worldVocabCheckpoint } from './cpu-baseline';

/** model: 'default' the bundled model, 'default-world' it with the World vocabulary's head, '0.1b' a random 0.1B shape. */
export async function planProfileModel(model: string, precision: CpuPrecision, T: number, threads: number) {
  const bundled = () => loadCheckpoint(path.join(packageRoot(), 'models', 'default.st'));
  const ck = model === '0.1b'
    ? randomRwkv7Checkpoint({ nLayer: 12, nEmbd: 768, vocabSize: 65536, seed: 7 })
    : model === 'default-world' ? worldVocabCheckpoint(bundled()) : bundled();
  const info = describeModel(ck);
  const arena = new Arena();
  const plan = await planRwkv7CpuModel(arena, ck, info, { precision, quantLayers: 0, slots: 1, TMAX: T, RMAX: 1 });
  const L = plan.layout;
  const need = Math.max(plan.widestInput * 32, plan.weights.hasInt8 ? int8ScratchBytes(T, plan.widestInput) : 0, plan.weights.hasI16 ? i16ScratchBytes(T, plan.widestInput) : 0);
  L.scratchBytes = Math.ceil(need / 64) * 64;
  L.scratch = arena.alloc(threads * L.scratchBytes);
  const { module } = kernelModule();
  const memory = arena.createMemory();
  plan.write(memory);
  return { ck, info, plan, L, module, memory };
}
