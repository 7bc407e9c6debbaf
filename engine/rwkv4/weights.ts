// Uploads an RWKV-4 checkpoint for engine/rwkv4/runtime.ts. Per layer, as the reference rwkv package computes it
// (xx = ln1(x), sx = the previous token's xx, mixes as xx*mix + sx*(1 - mix)):
//   r = sigmoid(R r_x), k = K k_x, v = V v_x;  with w = -exp(time_decay), u = time_first and the state (a, b, p)
//   holding sum_i e^{k_i + (t-1-i) w} (v_i, 1) as (a, b) · e^{p}:
//   wkv = (e^{p-q} a + e^{u+k-q} v) / (e^{p-q} b + e^{u+k-q}), q = max(p, u + k);  out = O (r ⊙ wkv)
//   then p' = max(p + w, k), a' = e^{p+w-p'} a + e^{k-p'} v, b' = e^{p+w-p'} b + e^{k-p'}
// and the channel mix of RWKV-5/6: r = sigmoid(R r_x), out = r ⊙ (V relu(K k_x)²).

import { oneMinus } from '../static-shift-mix';
import type { Checkpoint, ModelInfo } from '../types';
import type { MatrixGroup } from '../rwkv7/weights';
import type { WeightStorage } from '../precision';
import type { CommonWeights } from '../gpu/slot-runtime';
import { WeightUploader } from '../gpu/weight-upload';

export interface Rwkv4Layer {
  /** [weight; bias] of ln1 and ln2, [2, C] each. */
  ln1: GPUBuffer;
  ln2: GPUBuffer;
  /** Time-mix token shift in the shift kernel's form xx + (sx - xx)*m: [1 - time_mix_k, _v, _r]. */
  attShift: GPUBuffer;
  /** key, value, receptance (in the order of attShift's copies). */
  kvr: MatrixGroup;
  /** [w = -exp(time_decay), u = time_first], C each. */
  decay: GPUBuffer;
  o: MatrixGroup;
  /** Channel-mix token shift, as attShift: [1 - time_mix_k, 1 - time_mix_r]. */
  ffnShift: GPUBuffer;
  /** key (F rows), receptance (C rows). */
  ffnKR: MatrixGroup;
  ffnV: MatrixGroup;
}

export interface Rwkv4Weights {
  common: CommonWeights;
  layers: Rwkv4Layer[];
  bytes: number;
}

export async function uploadRwkv4(device: GPUDevice, ck: Checkpoint, info: ModelInfo, storage: WeightStorage): Promise<Rwkv4Weights> {
  const up = new WeightUploader(device, ck, storage, info.nEmbd);
  const common = await up.common();
  const layers: Rwkv4Layer[] = [];
  for (let l = 0; l < info.nLayer; l++) {
    const p = `blocks.${l}.`;
    const a = `${p}att.`;
    layers.push({
      ln1: up.stack(`${p}ln1`, [up.vals(`${p}ln1.weight`), up.vals(`${p}ln1.bias`)]),
      ln2: up.stack(`${p}ln2`, [up.vals(`${p}ln2.weight`), up.vals(`${p}ln2.bias`)]),
      attShift: up.stack(`${a}shift`, ['k', 'v', 'r'].map((m) => oneMinus(up.vals(`${a}time_mix_${m}`)))),
      kvr: await up.group(`${a}kvr`, ['key', 'value', 'receptance'].map((m) => up.linear(`${a}${m}.weight`))),
      // The reference takes -exp(time_decay) in f32 at load, as here.
      decay: up.stack(`${a}decay`, [Float32Array.from(up.vals(`${a}time_decay`), (d) => -Math.exp(d)), up.vals(`${a}time_first`)]),
      o: await up.group(`${a}output.weight`, [up.linear(`${a}output.weight`)]),
      ffnShift: up.stack(`${p}ffn.shift`, [oneMinus(up.vals(`${p}ffn.time_mix_k`)), oneMinus(up.vals(`${p}ffn.time_mix_r`))]),
      ffnKR: await up.group(`${p}ffn.kr`, [up.linear(`${p}ffn.key.weight`), up.linear(`${p}ffn.receptance.weight`)]),
      ffnV: await up.group(`${p}ffn.value.weight`, [up.linear(`${p}ffn.value.weight`)]),
    });
  }
  return { common, layers, bytes: up.bytes };
}
