// The GPU buffer sizes a model's weights need, from the tensor index alone (before any byte is read): each
// weight tensor becomes one buffer bound as storage, at the precision it is uploaded in (the uploads in
// rwkv{5,6,7}/weights.ts and gpu/weight-upload.ts refuse the same tensors, later).

import type { TensorIndex } from './model-spec';
import type { Precision } from './precision';

export interface WeightBufferNeeds {
  /** Bytes of the largest weight buffer (it is bound whole). */
  maxBindingBytes: number;
  maxBufferBytes: number;
  /** The tensor that needs them, for the error message. */
  largest: string;
}

/** int8 and nf4 shrink the large matrices but keep the embedding f16, and it is as large as the head: f16 sizes bound them. */
export function weightBufferNeeds(index: TensorIndex, precision: Precision): WeightBufferNeeds {
  let most = 0;
  let largest = '';
  for (const t of index.tensors.values()) {
    if (t.dtype === 'i32') continue; // vocab_map stays on the host
    const bytes = t.shape.reduce((a, b) => a * b, 1) * (precision === 'f32' ? 4 : 2);
    if (bytes > most) {
      most = bytes;
      largest = `tensor ${t.name} [${t.shape.join(', ')}] as ${precision}`;
    }
  }
  return { maxBindingBytes: most, maxBufferBytes: most, largest };
}
