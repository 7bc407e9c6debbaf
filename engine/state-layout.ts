// Where each part of a layer's recurrent state sits in a StateSnapshot (see types.ts): used to
// take embeddings from a layer and to place state-tuned tensors into a snapshot.

import type { ModelInfo } from './types';
import { DEA_QK } from './rwkv7/dea-sizes';

export interface LayerStateParts {
  /** Float offset of each named part within the snapshot, and its length. */
  [part: string]: { offset: number; length: number };
}

/**
 * Per-layer parts, in order. RWKV-5/6/7: att_x [C], att_kv [H,N,N], ffn_x [C]; RWKV-4: att_x, att_a, att_b, att_p, ffn_x [C].
 * RWKV-7b adds, before ffn_x, its DEA token shift: the previous token's raw dea_q [256], dea_k (k̃) [256] and
 * dea_v (ṽ) [C]; its growing cache follows all layers (engine/state-shape.ts, engine/rwkv7/cpu-dea.ts).
 */
export function stateLayout(info: Pick<ModelInfo, 'version' | 'nLayer' | 'nEmbd' | 'nHead' | 'headSize'>): LayerStateParts[] {
  const C = info.nEmbd;
  const parts: [string, number][] =
    info.version === 'v4'
      ? [['att_x', C], ['att_a', C], ['att_b', C], ['att_p', C], ['ffn_x', C]]
      : info.version === 'v7b'
        ? [['att_x', C], ['att_kv', info.nHead * info.headSize * info.headSize], ['dea_q', DEA_QK], ['dea_k', DEA_QK], ['dea_v', C], ['ffn_x', C]]
        : [['att_x', C], ['att_kv', info.nHead * info.headSize * info.headSize], ['ffn_x', C]];
  const layers: LayerStateParts[] = [];
  let offset = 0;
  for (let l = 0; l < info.nLayer; l++) {
    const layer: LayerStateParts = {};
    for (const [name, length] of parts) {
      layer[name] = { offset, length };
      offset += length;
    }
    layers.push(layer);
  }
  return layers;
}

export function stateFloats(info: Parameters<typeof stateLayout>[0]): number {
  const layers = stateLayout(info);
  const last = layers[layers.length - 1];
  return Object.values(last).reduce((end, p) => Math.max(end, p.offset + p.length), 0);
}
