// Lays out an RWKV-6 (x060, "Finch") checkpoint for its CPU pass (engine/rwkv6/cpu-forward.ts) through the CPU
// weight writer; weights.ts has the math. RWKV-5.2 has the same layer minus the data-dependent parts and is laid
// out into the same structure by engine/rwkv5/cpu-weights.ts.

import type { ModelInfo } from '../types';
import type { CpuChannelMix } from '../cpu/cpu-forward-base';
import type { CpuCommonWeights, CpuMatrix, CpuWeightWriter } from '../cpu/cpu-weight-writer';

/** RWKV-6's data-dependent token shift and decay (absent for RWKV-5). */
export interface FinchCpuMix {
  /** time_maa_w, _k, _v, _r, _g: [5, C]. */
  maa: number;
  /** time_maa_w1 [C, 5D] as one matrix of 5D rows (tanh applied): the five D-wide hidden layers side by side. */
  mix1: CpuMatrix;
  /** time_maa_w2 [5, D, C]: five matrices of C rows, each reading its D-wide block of mix1's output. */
  mix2: CpuMatrix[];
  /** time_decay_w1 [C, Dw] (tanh applied) and time_decay_w2 [Dw, C]. */
  decay1: CpuMatrix;
  decay2: CpuMatrix;
}

export interface FinchCpuLayer extends CpuChannelMix {
  /** [weight; bias] of ln1. */
  ln1: number;
  /**
   * Token-shift weights of the time mix in lnShift's form xn + (prev - xn) * m: RWKV-6 [time_maa_x, 1] (the
   * second copy is prev itself, for the data-dependent mix), RWKV-5 [1 - time_mix_r, _k, _v, _g] (the inputs).
   */
  attShift: number;
  ddlerp?: FinchCpuMix;
  r: CpuMatrix;
  k: CpuMatrix;
  v: CpuMatrix;
  g: CpuMatrix;
  o: CpuMatrix;
  /** kernels.ts `finchWkv`'s p: [decay, u = time_faaaa], C each; the decay is time_decay (RWKV-6) or w (RWKV-5). */
  wkv: number;
  /** [ln_x.weight; ln_x.bias]. */
  lnx: number;
}

export interface FinchCpuWeights extends CpuCommonWeights {
  version: 'v5' | 'v6';
  layers: FinchCpuLayer[];
  /** Widest hidden layer of the token-shift and decay LoRAs (output rows padded to whole panels; 0 for RWKV-5). */
  mixWidth: number;
  decayWidth: number;
}

/** A layer's weights that RWKV-5 and 6 share: norms, the time mix's matrices, group norm, the channel mix's matrices. */
export async function finchCpuLayerCommon(w: CpuWeightWriter, l: number): Promise<Omit<FinchCpuLayer, 'attShift' | 'ddlerp' | 'wkv' | 'ffnShift'>> {
  const p = `blocks.${l}.`;
  const a = `${p}att.`;
  const linear = (name: string) => w.matrix(w.linear(name));
  return {
    ln1: w.stack([w.vals(`${p}ln1.weight`), w.vals(`${p}ln1.bias`)]),
    ln2: w.stack([w.vals(`${p}ln2.weight`), w.vals(`${p}ln2.bias`)]),
    r: await linear(`${a}receptance.weight`),
    k: await linear(`${a}key.weight`),
    v: await linear(`${a}value.weight`),
    g: await linear(`${a}gate.weight`),
    o: await linear(`${a}output.weight`),
    lnx: w.stack([w.vals(`${a}ln_x.weight`), w.vals(`${a}ln_x.bias`)]),
    ffnK: await linear(`${p}ffn.key.weight`),
    ffnR: await linear(`${p}ffn.receptance.weight`),
    ffnV: await linear(`${p}ffn.value.weight`),
  };
}

export async function planRwkv6Cpu(w: CpuWeightWriter, info: ModelInfo): Promise<FinchCpuWeights> {
  const C = info.nEmbd;
  const common = await w.common();
  let mixWidth = 0;
  let decayWidth = 0;
  const layers: FinchCpuLayer[] = [];
  for (let l = 0; l < info.nLayer; l++) {
    const p = `blocks.${l}.`;
    const a = `${p}att.`;
    const D = w.tensor(`${a}time_maa_w1`).shape[1] / 5;
    const w2 = w.storage(`${a}time_maa_w2`);
    const maa = w.stack(['w', 'k', 'v', 'r', 'g'].map((m) => w.vals(`${a}time_maa_${m}`)));
    const mix1 = await w.matrix(w.lora(`${a}time_maa_w1`));
    const mix2: CpuMatrix[] = [];
    for (let m = 0; m < 5; m++) mix2.push(await w.matrix(w.columns(`${a}time_maa_w2[${m}]`, w2, D, C, m * D * C)));
    const ddlerp: FinchCpuMix = {
      maa,
      mix1,
      mix2,
      decay1: await w.matrix(w.lora(`${a}time_decay_w1`)),
      decay2: await w.matrix(w.lora(`${a}time_decay_w2`)),
    };
    mixWidth = Math.max(mixWidth, ddlerp.mix1.panels * 8);
    decayWidth = Math.max(decayWidth, ddlerp.decay1.panels * 8);
    layers.push({
      ...(await finchCpuLayerCommon(w, l)),
      attShift: w.stack([w.vals(`${a}time_maa_x`), new Float32Array(C).fill(1)]),
      ddlerp,
      wkv: w.stack([w.vals(`${a}time_decay`), w.vals(`${a}time_faaaa`)]),
      ffnShift: w.stack([w.vals(`${p}ffn.time_maa_k`), w.vals(`${p}ffn.time_maa_r`)]),
    });
  }
  return { ...common, version: 'v6', layers, mixWidth, decayWidth, bytes: w.bytes, hasInt8: w.hasInt8, hasI16: w.hasI16 };
}
