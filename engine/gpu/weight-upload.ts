// Uploading a checkpoint's tensors in the layout the shared kernels read: matrices as [out, in] row-major in a
// group buffer (f16 packed two per u32, or f32), with the input width padded to a multiple of 32; small
// vectors as f32 stacked [M, C]. With 'int8' or 'nf4' the large matrices (quant/quantised-matrices.ts) are
// quantised (quant/gpu-matrix-group.ts), in the layers `quantLayers` covers; LoRA-like matrices and the
// embedding stay f16. Groups are uploaded one at a time with a yield to the event loop before each (a large
// model is seconds of host work). Used by the RWKV-4/5/6 weights (RWKV-7 keeps its own in rwkv7/weights.ts).

import { normalizedEmbedding } from '../embedding-norm';
import type { Checkpoint, RawTensor } from '../types';
import { f32ToF16, toF16Bits, toF32 } from '../loader/dtype';
import { checkpointTensor } from '../loader/checkpoint';
import { uploadBuffer } from './kernel';
import { floatFormat, matrixSegments, quantiserInput, type MatrixGroup, type WeightPrecision } from '../rwkv7/weights';
import { SEGMENT_ALIGN } from '../rwkv7/matmul';
import { packQuantizedGroup } from '../quant/gpu-matrix-group';
import { gpuMatrixFormat } from '../quant/quantised-matrices';
import { yieldToEventLoop } from '../quant/weight-values';
import type { WeightStorage } from '../precision';
import type { CommonWeights } from './slot-runtime';

const STORAGE = 0x80; // GPUBufferUsage.STORAGE, spelled out so this file loads before Dawn's globals exist.

export const pad32 = (n: number) => Math.ceil(n / 32) * 32;

/** A matrix on the host, [n out, k in] row-major: f16 bits for 'f16', f32 values for 'f32'; the quantised formats as rwkv7/weights.ts quantiserInput. */
export interface HostMatrix {
  name: string;
  data: Uint16Array | Float32Array;
  n: number;
  k: number;
  format: WeightPrecision;
}

export class WeightUploader {
  /** Bytes uploaded so far. */
  bytes = 0;
  readonly precision: WeightPrecision;

  constructor(
    private readonly device: GPUDevice,
    private readonly ck: Checkpoint,
    private readonly storage: WeightStorage,
    private readonly C: number,
  ) {
    const precision = storage.precision;
    this.precision = precision;
    const maxBinding = device.limits.maxStorageBufferBindingSize;
    // int8 and nf4 keep the embedding f16, as large as the head: f16 sizes bound every buffer.
    for (const t of ck.tensors.values()) {
      const gpuBytes = (t.bytes.byteLength / (t.dtype === 'f32' ? 4 : 2)) * (precision === 'f32' ? 4 : 2);
      if (gpuBytes > maxBinding)
        throw new Error(
          `tensor ${t.name} needs ${gpuBytes} bytes as ${precision} but this GPU binds at most ${maxBinding} bytes per buffer` +
            (precision === 'f32' ? '; try precision f16' : ''),
        );
    }
  }

  tensor(name: string): RawTensor {
    return checkpointTensor(this.ck, name);
  }

  /** A tensor's values as f32 (a copy when the tensor is not f32 already). */
  vals(name: string): Float32Array {
    return toF32(this.tensor(name));
  }

  f32(label: string, data: Float32Array): GPUBuffer {
    this.bytes += data.byteLength;
    return uploadBuffer(this.device, label, data, STORAGE);
  }

  /** Vectors of C floats stacked [parts, C]. */
  stack(label: string, parts: Float32Array[]): GPUBuffer {
    const { C } = this;
    const out = new Float32Array(parts.length * C);
    parts.forEach((p, i) => out.set(p.subarray(0, C), i * C));
    return this.f32(label, out);
  }

  /** A matrix stored [out, in] (torch Linear), in the model's precision: quantised for int8 / nf4 if it is a large one. */
  linear(name: string): HostMatrix {
    const t = this.tensor(name);
    const [n, k] = t.shape;
    const format = gpuMatrixFormat(name, this.storage);
    return { name, data: format === 'f16' ? toF16Bits(t) : format === 'f32' ? toF32(t) : quantiserInput(t), n, k, format };
  }

  /** A host f32 matrix [n, k] as a HostMatrix in float storage (f16, or f32 for 'f32'). */
  host(name: string, data: Float32Array, n: number, k: number): HostMatrix {
    const format = floatFormat(this.precision);
    return { name, data: format === 'f16' ? f32ToF16(data) : data, n, k, format };
  }

  /**
   * Columns [from, from + count) of a matrix `src` stored [inDim, outDim] (used as x @ W), as an [out, in]
   * matrix; the output side padded to `padOut` rows and the input side to a multiple of 32 (zeros).
   */
  transposed(name: string, src: Float32Array, inDim: number, outDim: number, from = 0, count = outDim, padOut = count): HostMatrix {
    const k = pad32(inDim);
    const out = new Float32Array(padOut * k);
    for (let i = 0; i < inDim; i++) for (let o = 0; o < count; o++) out[o * k + i] = src[i * outDim + from + o];
    return this.host(name, out, padOut, k);
  }

  async group(label: string, mats: HostMatrix[]): Promise<MatrixGroup> {
    await yieldToEventLoop();
    const format = mats[0].format;
    if (mats.some((m) => m.format !== format)) throw new Error(`${label}: one group holds one storage format`);
    const segs = matrixSegments(mats);
    if (format === 'int8' || format === 'nf4') {
      const packed = await packQuantizedGroup(mats, format, SEGMENT_ALIGN);
      this.bytes += packed.modelBytes;
      return { buffer: uploadBuffer(this.device, label, packed.words, STORAGE), segs, format, scaleWord: packed.scaleWord };
    }
    const total = mats.reduce((s, m) => s + m.data.length, 0);
    let data: Uint16Array | Float32Array;
    if (mats.length === 1) data = mats[0].data;
    else {
      data = format === 'f16' ? new Uint16Array(total) : new Float32Array(total);
      let off = 0;
      for (const m of mats) {
        data.set(m.data, off);
        off += m.data.length;
      }
    }
    this.bytes += data.byteLength;
    return { buffer: uploadBuffer(this.device, label, data, STORAGE), segs, format };
  }

  /** The embedding layer-normed with blocks.0.ln0 (as every reference does once at load), the output norm and head. */
  async common(): Promise<CommonWeights> {
    const { C } = this;
    const embT = this.tensor('emb.weight');
    const [V] = embT.shape;
    const emb = normalizedEmbedding(embT, this.vals('blocks.0.ln0.weight'), this.vals('blocks.0.ln0.bias'));
    return {
      precision: this.precision,
      quantLayers: this.storage.quantLayers,
      emb: await this.group('emb.weight', [this.host('emb.weight', emb, V, C)]),
      lnOut: [this.f32('ln_out.weight', Float32Array.from(this.vals('ln_out.weight'))), this.f32('ln_out.bias', Float32Array.from(this.vals('ln_out.bias')))],
      head: await this.group('head.weight', [this.linear('head.weight')]),
    };
  }
}
