// The weights an int8 model holds on the CPU backend, as an f32 checkpoint: the reference the int8 golden tests run
// in f32 on the same backend to check layout and kernels apart from the quantisation itself. The CPU backend
// quantises every matrix it lays out in panels (the GPU keeps the LoRA-like ones f16): the large ones, RWKV-7's
// LoRAs, RWKV-6's token-shift and decay LoRAs, RWKV-7a's s_emb_x, RWKV-7b's DEA projections; with quantLayers N > 0 only those of layers
// below N (and the head), the later layers' matrices being f16.

import { f16ToF32, toF16Bits, toF32 } from '../engine/loader/dtype';
import { inQuantisedLayers, isQuantisedMatrix } from '../engine/quant/quantised-matrices';
import { dequantizeRowsInt8, quantizeRowsInt8 } from '../engine/quant/int8-rows';
import type { Checkpoint, RawTensor } from '../engine/types';

/** Matrices stored [in, out] that the CPU backend quantises too (each slice of a 3-D one is a matrix). */
const CPU_LORA = /^blocks\.\d+\.(?:att\.(?:[wavg][12]|time_maa_w[12]|time_decay_w[12])|qkv\.[kv][12])$/;
/** Matrices stored [out, in] that the CPU backend quantises besides the large ones. */
const CPU_LINEAR = /^blocks\.\d+\.(?:ffn\.s_emb_x|qkv\.(?:qq|k_emb_x|v_emb_x))\.weight$/;

/** Rows [n, k] quantised per row and back. */
function roundTrip(rows: Float32Array, n: number, k: number): Float32Array {
  const { q, scales } = quantizeRowsInt8(rows, n, k);
  return dequantizeRowsInt8(q, scales, k);
}

/** [inDim, outDim] quantised per output (per row of its transpose) and back. */
function roundTripInOut(m: Float32Array, inDim: number, outDim: number): Float32Array {
  const rows = new Float32Array(m.length);
  for (let i = 0; i < inDim; i++) for (let o = 0; o < outDim; o++) rows[o * inDim + i] = m[i * outDim + o];
  const back = roundTrip(rows, outDim, inDim);
  const out = new Float32Array(m.length);
  for (let i = 0; i < inDim; i++) for (let o = 0; o < outDim; o++) out[i * outDim + o] = back[o * inDim + i];
  return out;
}

/**
 * The checkpoint with every matrix the CPU backend quantises (in the layers `quantLayers` covers, 0 = all)
 * replaced by its dequantised values, and the other layers' matrices by their f16 values, as f32 tensors.
 */
export function cpuDequantised(ck: Checkpoint, quantLayers = 0): Checkpoint {
  const tensors = new Map<string, RawTensor>();
  for (const [name, t] of ck.tensors) {
    const linear = isQuantisedMatrix(name) || CPU_LINEAR.test(name);
    if (!linear && !CPU_LORA.test(name)) {
      tensors.set(name, t);
      continue;
    }
    let back: Float32Array;
    if (!inQuantisedLayers(name, { precision: 'int8', quantLayers })) back = f16ToF32(toF16Bits(t));
    else if (linear) back = roundTrip(Float32Array.from(toF32(t)), t.shape[0], t.shape[1]);
    else {
      const w = Float32Array.from(toF32(t));
      const [inDim, outDim] = t.shape.slice(-2);
      back = new Float32Array(w.length);
      for (let at = 0; at < w.length; at += inDim * outDim) back.set(roundTripInOut(w.subarray(at, at + inDim * outDim), inDim, outDim), at);
    }
    tensors.set(name, { name, dtype: 'f32', shape: t.shape, bytes: new Uint8Array(back.buffer) });
  }
  return { format: 'memory', tensors, metadata: ck.metadata };
}
