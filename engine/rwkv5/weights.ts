// Uploads an RWKV-5.2 ("Eagle") checkpoint. Its layer is RWKV-6's without the data-dependent parts: a static
// token shift (xx*mix + prev*(1 - mix)) and a static per-channel decay w = exp(-exp(time_decay)); so it runs
// on the RWKV-6 runtime (engine/rwkv6/runtime.ts) with `ddlerp` absent.

import { oneMinus } from '../static-shift-mix';
import type { Checkpoint, ModelInfo } from '../types';
import type { WeightStorage } from '../precision';
import { WeightUploader } from '../gpu/weight-upload';
import { finchLayerCommon, type FinchLayer, type FinchWeights } from '../rwkv6/weights';

export async function uploadRwkv5(device: GPUDevice, ck: Checkpoint, info: ModelInfo, storage: WeightStorage): Promise<FinchWeights> {
  const up = new WeightUploader(device, ck, storage, info.nEmbd);
  const common = await up.common();
  const layers: FinchLayer[] = [];
  for (let l = 0; l < info.nLayer; l++) {
    const p = `blocks.${l}.`;
    const a = `${p}att.`;
    layers.push({
      ...(await finchLayerCommon(up, l)),
      attShift: up.stack(`${a}shift`, ['r', 'k', 'v', 'g'].map((m) => oneMinus(up.vals(`${a}time_mix_${m}`)))),
      wkv: up.stack(`${a}wkv`, [up.vals(`${a}time_decay`), up.vals(`${a}time_faaaa`)]),
      ffnShift: up.stack(`${p}ffn.shift`, [oneMinus(up.vals(`${p}ffn.time_mix_k`)), oneMinus(up.vals(`${p}ffn.time_mix_r`))]),
    });
  }
  return { version: 'v5', common, layers, loraWidth: 0, bytes: up.bytes };
}
