// Uploads an RWKV-7 checkpoint to the GPU in the layout the kernels read: every matrix as [out, in] row-major
// (LoRA matrices transposed from their [in, out] storage and padded to a multiple of 32 so the kernels need no
// edge cases), weights as f16 packed in u32 or as f32, small vectors always f32.

import type { Checkpoint, ModelInfo, RawTensor } from '../types';
import { f32ToF16, toF16Bits, toF32 } from '../loader/dtype';
import { uploadBuffer } from '../gpu/kernel';

export type WeightPrecision = 'f16' | 'f32';

export interface GpuMatrix {
  buffer: GPUBuffer;
  /** Output rows. */
  n: number;
  /** Input width (a multiple of 32). */
  k: number;
}

export interface LayerWeights {
  ln1: [GPUBuffer, GPUBuffer];
  ln2: [GPUBuffer, GPUBuffer];
  /** x_r, x_w, x_k, x_v, x_a, x_g: [6, C]. */
  attMix: GPUBuffer;
  r: GpuMatrix;
  k: GpuMatrix;
  v: GpuMatrix;
  o: GpuMatrix;
  w1: GpuMatrix;
  w2: GpuMatrix;
  a1: GpuMatrix;
  a2: GpuMatrix;
  v1?: GpuMatrix;
  v2?: GpuMatrix;
  g1: GpuMatrix;
  g2: GpuMatrix;
  /** w0, a0, v0, k_k, k_a: [5, C]. */
  prep: GPUBuffer;
  /** r_k, ln_x.weight, ln_x.bias: [3, C]. */
  post: GPUBuffer;
  ffnMix: GPUBuffer;
  ffnK: GpuMatrix;
  ffnV: GpuMatrix;
}

export interface ModelWeights {
  precision: WeightPrecision;
  emb: GpuMatrix;
  layers: LayerWeights[];
  lnOut: [GPUBuffer, GPUBuffer];
  head: GpuMatrix;
  /** Largest padded LoRA width, for sizing the LoRA scratch buffer. */
  maxLora: number;
  bytes: number;
}

const STORAGE = 0x80; // GPUBufferUsage.STORAGE, spelled out so this file loads before Dawn's globals exist.

const pad32 = (n: number) => Math.ceil(n / 32) * 32;

export function uploadRwkv7(device: GPUDevice, ck: Checkpoint, info: ModelInfo, precision: WeightPrecision): ModelWeights {
  const C = info.nEmbd;
  let bytes = 0;
  const maxBinding = device.limits.maxStorageBufferBindingSize;
  for (const t of ck.tensors.values()) {
    const gpuBytes = (t.bytes.byteLength / (t.dtype === 'f32' ? 4 : 2)) * (precision === 'f32' ? 4 : 2);
    if (gpuBytes > maxBinding)
      throw new Error(
        `tensor ${t.name} needs ${gpuBytes} bytes as ${precision} but this GPU binds at most ${maxBinding} bytes per buffer` +
          (precision === 'f32' ? '; try precision f16' : ''),
      );
  }
  const get = (name: string): RawTensor => {
    const t = ck.tensors.get(name);
    if (!t) throw new Error(`missing tensor ${name}`);
    return t;
  };
  const f32 = (label: string, data: Float32Array): GPUBuffer => {
    bytes += data.byteLength;
    return uploadBuffer(device, label, data, STORAGE);
  };
  const vec = (name: string) => f32(name, Float32Array.from(toF32(get(name))));
  const stack = (label: string, parts: Float32Array[]) => {
    const out = new Float32Array(parts.length * C);
    parts.forEach((p, i) => out.set(p.subarray(0, C), i * C));
    return f32(label, out);
  };
  const vals = (name: string) => toF32(get(name));

  const matrixFromF32 = (label: string, data: Float32Array, n: number, k: number): GpuMatrix => {
    const buf = precision === 'f16' ? f32ToF16(data) : data;
    bytes += buf.byteLength;
    return { buffer: uploadBuffer(device, label, buf, STORAGE), n, k };
  };
  /** A [out, in] matrix stored as such (torch Linear). */
  const linear = (name: string): GpuMatrix => {
    const t = get(name);
    const [n, k] = t.shape;
    const data = precision === 'f16' ? toF16Bits(t) : toF32(t);
    bytes += data.byteLength;
    return { buffer: uploadBuffer(device, name, data, STORAGE), n, k };
  };
  /** A LoRA matrix stored [in, out]: transposed to [out, in], and the LoRA side padded to 32. */
  const lora = (name: string, loraIsOut: boolean): GpuMatrix => {
    const t = get(name);
    const [inDim, outDim] = t.shape;
    const src = toF32(t);
    const n = loraIsOut ? pad32(outDim) : outDim;
    const k = loraIsOut ? inDim : pad32(inDim);
    const out = new Float32Array(n * k);
    for (let i = 0; i < inDim; i++) for (let o = 0; o < outDim; o++) out[o * k + i] = src[i * outDim + o];
    return matrixFromF32(name, out, n, k);
  };

  // The reference normalizes the embedding with blocks.0.ln0 once at load time; do the same.
  const embT = get('emb.weight');
  const [V] = embT.shape;
  const emb = Float32Array.from(toF32(embT));
  const w0 = vals('blocks.0.ln0.weight');
  const b0 = vals('blocks.0.ln0.bias');
  for (let row = 0; row < V; row++) {
    const r = emb.subarray(row * C, row * C + C);
    let mean = 0;
    for (let c = 0; c < C; c++) mean += r[c];
    mean /= C;
    let v = 0;
    for (let c = 0; c < C; c++) v += (r[c] - mean) ** 2;
    const inv = 1 / Math.sqrt(v / C + 1e-5);
    for (let c = 0; c < C; c++) r[c] = (r[c] - mean) * inv * w0[c] + b0[c];
  }

  let maxLora = 32;
  const layers: LayerWeights[] = [];
  for (let l = 0; l < info.nLayer; l++) {
    const p = `blocks.${l}.`;
    const a = `${p}att.`;
    const first = l === 0;
    const w1 = lora(`${a}w1`, true);
    const a1 = lora(`${a}a1`, true);
    const g1 = lora(`${a}g1`, true);
    const v1 = first ? undefined : lora(`${a}v1`, true);
    maxLora = Math.max(maxLora, w1.n, a1.n, g1.n, v1?.n ?? 0);
    layers.push({
      ln1: [vec(`${p}ln1.weight`), vec(`${p}ln1.bias`)],
      ln2: [vec(`${p}ln2.weight`), vec(`${p}ln2.bias`)],
      attMix: stack(`${a}mix`, ['x_r', 'x_w', 'x_k', 'x_v', 'x_a', 'x_g'].map((n) => vals(a + n))),
      r: linear(`${a}receptance.weight`),
      k: linear(`${a}key.weight`),
      v: linear(`${a}value.weight`),
      o: linear(`${a}output.weight`),
      w1,
      w2: lora(`${a}w2`, false),
      a1,
      a2: lora(`${a}a2`, false),
      v1,
      v2: first ? undefined : lora(`${a}v2`, false),
      g1,
      g2: lora(`${a}g2`, false),
      prep: stack(`${a}prep`, [
        vals(`${a}w0`),
        vals(`${a}a0`),
        first ? new Float32Array(C) : vals(`${a}v0`),
        vals(`${a}k_k`),
        vals(`${a}k_a`),
      ]),
      post: stack(`${a}post`, [vals(`${a}r_k`), vals(`${a}ln_x.weight`), vals(`${a}ln_x.bias`)]),
      ffnMix: stack(`${p}ffn.mix`, [vals(`${p}ffn.x_k`)]),
      ffnK: linear(`${p}ffn.key.weight`),
      ffnV: linear(`${p}ffn.value.weight`),
    });
  }
  return {
    precision,
    emb: matrixFromF32('emb.weight', emb, V, C),
    layers,
    lnOut: [vec('ln_out.weight'), vec('ln_out.bias')],
    head: linear('head.weight'),
    maxLora,
    get bytes() {
      return bytes;
    },
  };
}
