// Lays out an RWKV-4 checkpoint for its CPU pass (engine/rwkv4/cpu-forward.ts) through the CPU weight writer;
// weights.ts has the math.

import { oneMinus } from '../static-shift-mix';
import type { ModelInfo } from '../types';
import type { CpuChannelMix } from '../cpu/cpu-forward-base';
import type { CpuCommonWeights, CpuMatrix, CpuWeightWriter } from '../cpu/cpu-weight-writer';

export interface Rwkv4CpuLayer extends CpuChannelMix {
  /** [weight; bias] of ln1. */
  ln1: number;
  /** Time-mix token shift in lnShift's form xn + (prev - xn) * m: [1 - time_mix_k, _v, _r]. */
  attShift: number;
  k: CpuMatrix;
  v: CpuMatrix;
  /** Receptance (sigmoid applied). */
  r: CpuMatrix;
  /** kernels.ts `rwkv4Wkv`'s decay: [w = -exp(time_decay), u = time_first], C each. */
  decay: number;
  o: CpuMatrix;
}

export interface Rwkv4CpuWeights extends CpuCommonWeights {
  layers: Rwkv4CpuLayer[];
}

export async function planRwkv4Cpu(w: CpuWeightWriter, info: ModelInfo): Promise<Rwkv4CpuWeights> {
  const common = await w.common();
  const linear = (name: string) => w.matrix(w.linear(name));
  const layers: Rwkv4CpuLayer[] = [];
  for (let l = 0; l < info.nLayer; l++) {
    const p = `blocks.${l}.`;
    const a = `${p}att.`;
    layers.push({
      ln1: w.stack([w.vals(`${p}ln1.weight`), w.vals(`${p}ln1.bias`)]),
      ln2: w.stack([w.vals(`${p}ln2.weight`), w.vals(`${p}ln2.bias`)]),
      attShift: w.stack(['k', 'v', 'r'].map((m) => oneMinus(w.vals(`${a}time_mix_${m}`)))),
      k: await linear(`${a}key.weight`),
      v: await linear(`${a}value.weight`),
      r: await linear(`${a}receptance.weight`),
      // The reference takes -exp(time_decay) in f32 at load, as the GPU path does.
      decay: w.stack([Float32Array.from(w.vals(`${a}time_decay`), (d) => -Math.exp(d)), w.vals(`${a}time_first`)]),
      o: await linear(`${a}output.weight`),
      ffnShift: w.stack([oneMinus(w.vals(`${p}ffn.time_mix_k`)), oneMinus(w.vals(`${p}ffn.time_mix_r`))]),
      ffnK: await linear(`${p}ffn.key.weight`),
      ffnR: await linear(`${p}ffn.receptance.weight`),
      ffnV: await linear(`${p}ffn.value.weight`),
    });
  }
  return { ...common, layers, bytes: w.bytes, hasInt8: w.hasInt8, hasI16: w.hasI16 };
}
