// Uploads an RWKV-6 (x060, "Finch") checkpoint for engine/rwkv6/runtime.ts. RWKV-5.2 ("Eagle") has the same
// layer minus the data-dependent parts and is uploaded into the same structure by engine/rwkv5/weights.ts.
//
// Per layer, the time mix of v6 (as the reference rwkv package computes it, xx = ln1(x), sx = prev - xx):
//   xxx = xx + sx*maa_x; m_{w,k,v,r,g} = tanh(xxx @ maa_w1)[5 blocks] @ maa_w2[i];  i_x = xx + sx*(maa_i + m_i)
//   r, k, v, g = R r_x, K k_x, V v_x, G g_x;  w = exp(-exp(time_decay + tanh(w_x @ decay_w1) @ decay_w2))
//   per head: y = r·(u ⊙ k vᵀ + S), S = diag(w) S + k vᵀ; out = O (group_norm(y) ⊙ silu(g))
// and the channel mix: r = sigmoid(R r_x), out = r ⊙ (V relu(K k_x)²).

import type { Checkpoint, ModelInfo } from '../types';
import type { MatrixGroup } from '../rwkv7/weights';
import type { WeightStorage } from '../precision';
import type { CommonWeights } from '../gpu/slot-runtime';
import { pad32, WeightUploader } from '../gpu/weight-upload';

/** The data-dependent token shift and decay of RWKV-6 (absent for RWKV-5). */
export interface DataDependentMix {
  /** time_maa_w, _k, _v, _r, _g: [5, C]. */
  maa: GPUBuffer;
  /** maa_w1 as 5 matrices [D, C], grouped 4 + 1 (a matrix group holds at most 4), tanh applied. */
  mixLora1: [MatrixGroup, MatrixGroup];
  /** maa_w2 as 5 matrices [C, D], grouped 4 + 1. */
  mixLora2: [MatrixGroup, MatrixGroup];
  decayLora1: MatrixGroup;
  decayLora2: MatrixGroup;
}

export interface FinchLayer {
  /** [weight; bias] of ln1 and ln2, [2, C] each. */
  ln1: GPUBuffer;
  ln2: GPUBuffer;
  /**
   * Token-shift weights of the time mix, applied as xx + (prev - xx) * m: v6 [time_maa_x, 1] (the second copy
   * is prev itself, for the data-dependent mix), v5 [1 - time_mix_r, _k, _v, _g] (the final inputs).
   */
  attShift: GPUBuffer;
  ddlerp?: DataDependentMix;
  /** receptance, key, value, gate. */
  rkvg: MatrixGroup;
  /** [time_decay (w = exp(-exp(time_decay + lora))), time_faaaa (u)] flattened to C each. */
  wkv: GPUBuffer;
  /** [ln_x.weight; ln_x.bias]. */
  lnx: GPUBuffer;
  o: MatrixGroup;
  /** Channel-mix token shift, as attShift: [k, r]. */
  ffnShift: GPUBuffer;
  /** key (F rows), receptance (C rows). */
  ffnKR: MatrixGroup;
  ffnV: MatrixGroup;
}

export interface FinchWeights {
  version: 'v5' | 'v6';
  common: CommonWeights;
  layers: FinchLayer[];
  /** Widest padded LoRA hidden layer (0 for v5), for sizing the LoRA scratch buffer. */
  loraWidth: number;
  bytes: number;
}

/** Weights shared by the v5 and v6 layer: norms, the four time-mix matrices, output, group norm, channel mix. */
export async function finchLayerCommon(up: WeightUploader, l: number): Promise<Omit<FinchLayer, 'attShift' | 'ddlerp' | 'wkv' | 'ffnShift'>> {
  const p = `blocks.${l}.`;
  const a = `${p}att.`;
  return {
    ln1: up.stack(`${p}ln1`, [up.vals(`${p}ln1.weight`), up.vals(`${p}ln1.bias`)]),
    ln2: up.stack(`${p}ln2`, [up.vals(`${p}ln2.weight`), up.vals(`${p}ln2.bias`)]),
    rkvg: await up.group(`${a}rkvg`, ['receptance', 'key', 'value', 'gate'].map((m) => up.linear(`${a}${m}.weight`))),
    lnx: up.stack(`${a}ln_x`, [up.vals(`${a}ln_x.weight`), up.vals(`${a}ln_x.bias`)]),
    o: await up.group(`${a}output.weight`, [up.linear(`${a}output.weight`)]),
    ffnKR: await up.group(`${p}ffn.kr`, [up.linear(`${p}ffn.key.weight`), up.linear(`${p}ffn.receptance.weight`)]),
    ffnV: await up.group(`${p}ffn.value.weight`, [up.linear(`${p}ffn.value.weight`)]),
  };
}

export async function uploadRwkv6(device: GPUDevice, ck: Checkpoint, info: ModelInfo, storage: WeightStorage): Promise<FinchWeights> {
  const C = info.nEmbd;
  const up = new WeightUploader(device, ck, storage, C);
  const common = await up.common();
  let loraWidth = 0;
  const layers: FinchLayer[] = [];
  for (let l = 0; l < info.nLayer; l++) {
    const p = `blocks.${l}.`;
    const a = `${p}att.`;
    // maa_w1 [C, 5D] (x @ W), maa_w2 [5, D, C]; decay_w1 [C, Dw], decay_w2 [Dw, C].
    const w1 = up.tensor(`${a}time_maa_w1`);
    const D = w1.shape[1] / 5;
    const w1v = up.vals(`${a}time_maa_w1`);
    const w2v = up.vals(`${a}time_maa_w2`);
    const lora1 = [0, 1, 2, 3, 4].map((m) => up.transposed(`${a}time_maa_w1[${m}]`, w1v, C, 5 * D, m * D, D, pad32(D)));
    const lora2 = [0, 1, 2, 3, 4].map((m) => up.transposed(`${a}time_maa_w2[${m}]`, w2v.subarray(m * D * C, (m + 1) * D * C), D, C));
    const Dw = up.tensor(`${a}time_decay_w1`).shape[1];
    loraWidth = Math.max(loraWidth, pad32(D), pad32(Dw));
    const ones = new Float32Array(C).fill(1);
    layers.push({
      ...(await finchLayerCommon(up, l)),
      attShift: up.stack(`${a}shift`, [up.vals(`${a}time_maa_x`), ones]),
      ddlerp: {
        maa: up.stack(`${a}maa`, ['w', 'k', 'v', 'r', 'g'].map((m) => up.vals(`${a}time_maa_${m}`))),
        mixLora1: [await up.group(`${a}mixLora1a`, lora1.slice(0, 4)), await up.group(`${a}mixLora1b`, lora1.slice(4))],
        mixLora2: [await up.group(`${a}mixLora2a`, lora2.slice(0, 4)), await up.group(`${a}mixLora2b`, lora2.slice(4))],
        decayLora1: await up.group(`${a}decayLora1`, [up.transposed(`${a}time_decay_w1`, up.vals(`${a}time_decay_w1`), C, Dw, 0, Dw, pad32(Dw))]),
        decayLora2: await up.group(`${a}decayLora2`, [up.transposed(`${a}time_decay_w2`, up.vals(`${a}time_decay_w2`), Dw, C)]),
      },
      wkv: up.stack(`${a}wkv`, [up.vals(`${a}time_decay`), up.vals(`${a}time_faaaa`)]),
      ffnShift: up.stack(`${p}ffn.shift`, [up.vals(`${p}ffn.time_maa_k`), up.vals(`${p}ffn.time_maa_r`)]),
    });
  }
  return { version: 'v6', common, layers, loraWidth, bytes: up.bytes };
}
