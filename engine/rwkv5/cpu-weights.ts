// Lays out an RWKV-5.2 ("Eagle") checkpoint for RWKV-6's CPU pass (engine/rwkv6/cpu-forward.ts), as weights.ts
// does for the GPU: RWKV-6's layer without the data-dependent parts, a static token shift (xx*mix + prev*(1 - mix))
// and a static per-channel decay w = exp(-exp(time_decay)), taken here once in double precision.

import { oneMinus } from '../static-shift-mix';
import type { ModelInfo } from '../types';
import type { CpuWeightWriter } from '../cpu/cpu-weight-writer';
import { finchCpuLayerCommon, type FinchCpuLayer, type FinchCpuWeights } from '../rwkv6/cpu-weights';

export async function planRwkv5Cpu(w: CpuWeightWriter, info: ModelInfo): Promise<FinchCpuWeights> {
  const common = await w.common();
  const layers: FinchCpuLayer[] = [];
  for (let l = 0; l < info.nLayer; l++) {
    const p = `blocks.${l}.`;
    const a = `${p}att.`;
    layers.push({
      ...(await finchCpuLayerCommon(w, l)),
      attShift: w.stack(['r', 'k', 'v', 'g'].map((m) => oneMinus(w.vals(`${a}time_mix_${m}`)))),
      wkv: w.stack([Float32Array.from(w.vals(`${a}time_decay`), (d) => Math.exp(-Math.exp(d))), w.vals(`${a}time_faaaa`)]),
      ffnShift: w.stack([oneMinus(w.vals(`${p}ffn.time_mix_k`)), oneMinus(w.vals(`${p}ffn.time_mix_r`))]),
    });
  }
  return { ...common, version: 'v5', layers, mixWidth: 0, decayWidth: 0, bytes: w.bytes, hasInt8: w.hasInt8, hasI16: w.hasI16 };
}
