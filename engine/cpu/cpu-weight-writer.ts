// Lays out a checkpoint's weights for the CPU kernels (kernels.ts), for every version's CPU pass: every matrix in
// panels of 8 output rows ([k][8] per panel, so the kernels multiply 8 rows against one broadcast input) in the
// precision the GPU path uses (f16 by default, f32 on request) or int8 with per-row scales (CPU only); the
// embedding table row-major after the load-time ln0 normalization; small vectors f32. Two phases: the writer
// reserves addresses in the arena and keeps the host copies; `write` copies them into the memory once it exists.

import { normalizedEmbedding } from '../embedding-norm';
import type { Checkpoint, RawTensor } from '../types';
import { f32ToF16, toF16Bits, toF32 } from '../loader/dtype';
import type { Arena } from './arena';
import { int8Panels } from './int8-quant';

export type CpuPrecision = 'f16' | 'f32' | 'int8';

/** The kernels' matrix kinds (kernels.ts `matmul`). */
export const MATRIX_KIND: Record<CpuPrecision, number> = { f16: 0, f32: 1, int8: 2 };

/** One matrix: its panels' address, output rows n (padded to whole panels with zero rows), input width k. */
export interface CpuMatrix {
  w: number;
  n: number;
  k: number;
  panels: number;
}

/** What every version's CPU weights hold besides its layers; plain data, so it can be posted to a worker. */
export interface CpuCommonWeights {
  precision: CpuPrecision;
  /** 1 when the embedding table is f32 (the kernels' `embed` `wide`). */
  wide: number;
  /** The matrices' storage: 0 f16, 1 f32, 2 int8 (MATRIX_KIND). */
  kind: number;
  /** [V, C] embedding table, f16 (also for int8) or f32. */
  emb: number;
  lnOut: [number, number];
  head: CpuMatrix;
  /** Bytes of all weights. */
  bytes: number;
}

/**
 * A matrix's values: element (output row o, input i) at data[offset + o * rowStride + i * colStride]. A torch
 * Linear [out, in] has rowStride k and colStride 1; a LoRA-like [in, out] tensor rowStride 1 and colStride n.
 */
export interface MatrixSource {
  name: string;
  /** f32 values for int8 (quantized here) and f32, f16 bits for f16. */
  data: Float32Array | Uint16Array;
  n: number;
  k: number;
  offset: number;
  rowStride: number;
  colStride: number;
}

export class CpuWeightWriter {
  readonly wide: boolean;
  readonly int8: boolean;
  private readonly writes: { at: number; data: Float32Array | Uint16Array | Uint8Array }[] = [];
  private placed = 0;

  constructor(
    private readonly arena: Arena,
    private readonly ck: Checkpoint,
    readonly precision: CpuPrecision,
    private readonly C: number,
  ) {
    this.wide = precision === 'f32';
    this.int8 = precision === 'int8';
  }

  /** Bytes placed so far. */
  get bytes(): number {
    return this.placed;
  }

  tensor(name: string): RawTensor {
    const t = this.ck.tensors.get(name);
    if (!t) throw new Error(`missing tensor ${name}`);
    return t;
  }

  /** A tensor's values as f32. */
  vals(name: string): Float32Array {
    return toF32(this.tensor(name));
  }

  /** Reserves room for `data` and returns its address; the bytes are copied by `write`. */
  place(data: Float32Array | Uint16Array | Uint8Array): number {
    const at = this.arena.alloc(data.byteLength);
    this.writes.push({ at, data });
    this.placed += data.byteLength;
    return at;
  }

  /** Vectors of C floats stacked [parts, C], f32. */
  stack(parts: Float32Array[]): number {
    const { C } = this;
    const out = new Float32Array(parts.length * C);
    parts.forEach((p, i) => out.set(p.subarray(0, C), i * C));
    return this.place(out);
  }

  /** A tensor in the matrices' float storage: f32 values for 'f32' and 'int8', f16 bits for 'f16'. */
  private inPrecision(t: RawTensor): Float32Array | Uint16Array {
    return this.wide || this.int8 ? toF32(t) : toF16Bits(t);
  }

  /** A matrix stored [out, in] (torch Linear). */
  linear(name: string): MatrixSource {
    const t = this.tensor(name);
    const [n, k] = t.shape;
    return { name, data: this.inPrecision(t), n, k, offset: 0, rowStride: k, colStride: 1 };
  }

  /** A matrix stored [in, out] (used as x @ W: the LoRA-like tensors). */
  lora(name: string): MatrixSource {
    const t = this.tensor(name);
    return this.columns(name, this.inPrecision(t), t.shape[0], t.shape[1]);
  }

  /**
   * Outputs [from, from + count) of a matrix stored [inDim, outDim] starting at `offset` of `data` (values in
   * the matrices' float storage, as `lora` reads them).
   */
  columns(name: string, data: Float32Array | Uint16Array, inDim: number, outDim: number, offset = 0, from = 0, count = outDim): MatrixSource {
    return { name, data, n: count, k: inDim, offset: offset + from, rowStride: 1, colStride: outDim };
  }

  /** A tensor's values in the matrices' float storage (for `columns`). */
  storage(name: string): Float32Array | Uint16Array {
    return this.inPrecision(this.tensor(name));
  }

  matrix(s: MatrixSource): CpuMatrix {
    const { data, n, k, offset, rowStride, colStride } = s;
    const panels = Math.ceil(n / 8);
    if (this.int8) {
      let rows = data as Float32Array;
      if (offset !== 0 || rowStride !== k || colStride !== 1) {
        rows = new Float32Array(n * k);
        for (let o = 0; o < n; o++) for (let i = 0; i < k; i++) rows[o * k + i] = data[offset + o * rowStride + i * colStride];
      }
      return { w: this.place(int8Panels(rows, n, k)), n, k, panels };
    }
    const out = this.wide ? new Float32Array(panels * 8 * k) : new Uint16Array(panels * 8 * k);
    for (let o = 0; o < n; o++) {
      const base = (o >> 3) * 8 * k + (o & 7);
      const src = offset + o * rowStride;
      if (colStride === 1) for (let i = 0; i < k; i++) out[base + i * 8] = data[src + i];
      else for (let i = 0; i < k; i++) out[base + i * 8] = data[src + i * colStride];
    }
    return { w: this.place(out), n, k, panels };
  }

  /** The embedding normalized with blocks.0.ln0 (as the reference does once at load), the output norm and head. */
  common(): Omit<CpuCommonWeights, 'bytes'> {
    const emb = normalizedEmbedding(this.tensor('emb.weight'), this.vals('blocks.0.ln0.weight'), this.vals('blocks.0.ln0.bias'));
    return {
      precision: this.precision,
      wide: this.wide ? 1 : 0,
      kind: MATRIX_KIND[this.precision],
      emb: this.place(this.wide ? emb : f32ToF16(emb)),
      lnOut: [this.place(Float32Array.from(this.vals('ln_out.weight'))), this.place(Float32Array.from(this.vals('ln_out.bias')))],
      head: this.matrix(this.linear('head.weight')),
    };
  }

  /** Copies every host array to its address; call once the memory exists. */
  write(memory: WebAssembly.Memory): void {
    const u8 = new Uint8Array(memory.buffer);
    for (const { at, data } of this.writes) u8.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength), at);
    this.writes.length = 0;
  }
}
