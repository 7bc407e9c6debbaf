// Which tensors precision 'int8' and 'nf4' quantise: the large matrices, read once per token and holding almost
// all of a model's bytes — the time mix's receptance, key, value, gate and output, the channel mix's key,
// receptance and value, and the head. LoRA-like matrices (RWKV-7's w/a/v/g stages, RWKV-6's token-shift and
// decay LoRAs), the embedding (a table lookup: one row read a token) and vectors stay f16 (f32 for vectors).
// With `quantLayers` N > 0 only the layers below N are quantised (precision.ts WeightStorage); the head is a
// model-wide matrix and stays with the precision.

import { layerIsQuantised, type WeightStorage } from '../precision';

export const QUANTISED_MATRIX = /^(?:blocks\.\d+\.(?:att\.(?:receptance|key|value|gate|output)|ffn\.(?:key|receptance|value))|head)\.weight$/;

export function isQuantisedMatrix(name: string): boolean {
  return QUANTISED_MATRIX.test(name);
}

const BLOCK = /^blocks\.(\d+)\./;

/** The layer a tensor belongs to (`blocks.{i}.…`), or null for the model-wide ones (emb, head, ln_out). */
export function tensorLayer(name: string): number | null {
  const m = BLOCK.exec(name);
  return m ? Number(m[1]) : null;
}

/** Whether the storage's quantised layers cover the tensor: model-wide tensors always, a layer's when it is quantised. */
export function inQuantisedLayers(name: string, s: WeightStorage): boolean {
  const l = tensorLayer(name);
  return l === null || layerIsQuantised(s, l);
}

/** The GPU storage of a [out, in] matrix: the quantised precision for a large matrix of a quantised layer, else f16 (f32 for 'f32'). */
export function gpuMatrixFormat(name: string, s: WeightStorage): WeightStorage['precision'] {
  if (s.precision === 'f16' || s.precision === 'f32') return s.precision;
  return isQuantisedMatrix(name) && inQuantisedLayers(name, s) ? s.precision : 'f16';
}
