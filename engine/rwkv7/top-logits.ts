// Output 'top': logits rows reduced on the GPU (shaders/top_logits.wgsl) to their largest entries and
// softmax normalizer, so a decode step reads back a few KiB per request instead of the vocabulary and the
// CPU samples from a few hundred candidates instead of 65536 rows.

import { bindGroup, type BindingKind, createBuffer, type Kernel, makeKernel } from '../gpu/kernel';
import type { LogitAdjust, TopLogits } from '../types';

/** Entries a 'top' result holds: enough for ai00's default top_k (128) and any top_k up to it. */
export const TOP_CAPACITY = 256;
// The kernel's bitonic sort needs a power of two.
if ((TOP_CAPACITY & (TOP_CAPACITY - 1)) !== 0) throw new Error('TOP_CAPACITY must be a power of two');

/** Scratch of TopLogitsReducer.parse (synchronous, so one set serves every call). */
const PARSE_KEYS = new Uint32Array(TOP_CAPACITY);
const PARSE_PACKED = new Uint32Array(TOP_CAPACITY);
const PARSE_ORDER = new Uint8Array(TOP_CAPACITY);
/** An f32's bits as a u32 that orders as the floats do (larger float, larger u32; the kernel's sort_key). */
function orderedBits(bits: number): number {
  return bits & 0x80000000 ? ~bits >>> 0 : (bits | 0x80000000) >>> 0;
}

/** u32 words of one job (shaders/top_logits.wgsl TopJob), and its "no mask" marker. */
export const JOB_WORDS = 5;
export const NO_MASK = 0xffffffff;

/** One row to reduce: where it is in the logits buffer, its adjustments, where its result goes. */
export interface TopRow {
  logitsRow: number;
  adjust: LogitAdjust | undefined;
  out: number;
}

/**
 * Logits a workgroup of the first pass reduces (shaders/top_logits.wgsl PHASE 1): a 65,536-row vocabulary is 16
 * slices a row, each to its CAP largest, and the second pass takes the CAP largest of those 4,096.
 */
export const TOP_SLICE = 4096;

export class TopLogitsReducer {
  readonly capacity = TOP_CAPACITY;
  /** u32 words of one result. */
  readonly stride = 4 + 2 * TOP_CAPACITY;
  /** Slices a row is cut into by the first pass. */
  readonly slices: number;
  private readonly sliceKernel: Kernel;
  private readonly kernel: Kernel;
  /** Each (row, slice)'s candidates and sums, between the two passes. */
  private readonly parts: GPUBuffer;
  private readonly jobs: GPUBuffer;
  private adjust: GPUBuffer;
  private readonly out: GPUBuffer;
  /** Allowed-rows bitsets, one per masked row of a call. */
  private readonly masks: GPUBuffer;
  private readonly maskWords: number;
  private group: GPUBindGroup | null = null;
  private readonly seen: Uint8Array;

  constructor(
    private readonly device: GPUDevice,
    readonly V: number,
    maxRows: number,
    private readonly logits: GPUBuffer,
    /**
     * Histogram copies in the kernel (workgroup memory 1 KiB each; shaders/top_logits.wgsl). One: kernel µs for 1/8/64
     * rows on the H200, 91/110/201 with one against 136/112/177 with 8 (bench/RESULTS.md "The top-logits reduction").
     */
    histogramCopies = 1,
  ) {
    const constants = { V, CAP: TOP_CAPACITY, COPIES: histogramCopies, SLICE: TOP_SLICE };
    const bindings: BindingKind[] = ['read', 'read', 'rw', 'rw', 'read', 'rw'];
    this.sliceKernel = makeKernel(device, ['top_job', 'top_logits'], { ...constants, PHASE: 1 }, bindings);
    this.kernel = makeKernel(device, ['top_job', 'top_logits'], { ...constants, PHASE: 2 }, bindings);
    this.slices = Math.ceil(V / TOP_SLICE);
    const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    this.parts = createBuffer(device, 'topParts', maxRows * this.slices * this.stride * 4, GPUBufferUsage.STORAGE);
    this.jobs = createBuffer(device, 'topJobs', maxRows * JOB_WORDS * 4, S);
    this.maskWords = Math.ceil(V / 32);
    this.masks = createBuffer(device, 'topMasks', maxRows * this.maskWords * 4, S);
    this.adjust = createBuffer(device, 'topAdjust', 4096 * 8, S);
    this.out = createBuffer(device, 'topOut', maxRows * this.stride * 4, S);
    this.seen = new Uint8Array(V);
  }

  /** Throws when an adjustment is malformed: it would race on the GPU or write outside the row. */
  check(adjust: LogitAdjust | undefined, job: number): void {
    if (!adjust) return;
    const { rows, deltas, allowed } = adjust;
    if (allowed && allowed.length !== this.maskWords)
      throw new RangeError(`job ${job}: adjust.allowed has ${allowed.length} words; a bitset over ${this.V} rows has ${this.maskWords}`);
    if (rows.length !== deltas.length) throw new Error(`job ${job}: adjust has ${rows.length} rows but ${deltas.length} deltas`);
    const seen = this.seen;
    try {
      for (let i = 0; i < rows.length; i++) {
        const r = rows[i];
        if (!(r >= 0 && r < this.V)) throw new RangeError(`job ${job}: adjust row ${r} is outside the vocabulary 0..${this.V - 1}`);
        if (seen[r]) throw new Error(`job ${job}: adjust row ${r} appears twice`);
        if (Number.isNaN(deltas[i]) || deltas[i] === Infinity) throw new RangeError(`job ${job}: adjust delta for row ${r} is ${deltas[i]}`);
        seen[r] = 1;
      }
    } finally {
      for (let i = 0; i < rows.length; i++) if (rows[i] >= 0 && rows[i] < this.V) seen[rows[i]] = 0;
    }
  }

  /** Reduce `rows` of the logits buffer as it stands after the commands already in `enc`. */
  encode(enc: GPUCommandEncoder, rows: TopRow[]): void {
    if (rows.length === 0) return;
    this.upload(rows);
    this.dispatch(enc, rows.length);
  }

  /** Writes the jobs and adjustments of `rows` (queue writes: they land before the next submit). */
  upload(rows: TopRow[]): void {
    const pairs = rows.reduce((n, r) => n + (r.adjust?.rows.length ?? 0), 0);
    const jobWords = new Uint32Array(rows.length * JOB_WORDS);
    const adjWords = new Uint32Array(Math.max(2, pairs * 2));
    const adjFloats = new Float32Array(adjWords.buffer);
    let at = 0;
    let masked = 0;
    rows.forEach((r, i) => {
      const n = r.adjust?.rows.length ?? 0;
      const allowed = r.adjust?.allowed;
      let mask = NO_MASK;
      if (allowed) {
        mask = masked * this.maskWords;
        this.device.queue.writeBuffer(this.masks, mask * 4, allowed);
        masked++;
      }
      jobWords.set([r.logitsRow, at, n, r.out, mask], i * JOB_WORDS);
      for (let j = 0; j < n; j++) {
        adjWords[2 * (at + j)] = r.adjust!.rows[j];
        adjFloats[2 * (at + j) + 1] = r.adjust!.deltas[j];
      }
      at += n;
    });
    this.uploadRaw(jobWords, adjWords);
  }

  /** Writes prepared jobs (JOB_WORDS each) and adjust pairs (row, delta f32 bits); unchecked. */
  uploadRaw(jobWords: Uint32Array, adjWords: Uint32Array): void {
    if (adjWords.byteLength > this.adjust.size) {
      this.adjust.destroy();
      const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
      this.adjust = createBuffer(this.device, 'topAdjust', adjWords.byteLength * 2, usage);
      this.group = null;
    }
    this.device.queue.writeBuffer(this.jobs, 0, jobWords);
    this.device.queue.writeBuffer(this.adjust, 0, adjWords);
  }

  /** The two passes over the first `rowCount` jobs uploaded. */
  dispatch(enc: GPUCommandEncoder, rowCount: number): void {
    if (rowCount === 0) return;
    // One group serves both passes: their layouts are the same.
    this.group ??= bindGroup(this.device, this.kernel, [this.jobs, this.adjust, this.logits, this.out, this.masks, this.parts]);
    const pass = enc.beginComputePass();
    pass.setBindGroup(0, this.group);
    pass.setPipeline(this.sliceKernel.pipeline);
    pass.dispatchWorkgroups(this.slices, rowCount);
    pass.setPipeline(this.kernel.pipeline);
    pass.dispatchWorkgroups(rowCount);
    pass.end();
  }

  /** Jobs (JOB_WORDS u32 each), adjust pairs and results: for kernels that read or update them on the GPU (TopDrawer). */
  get jobsBuffer(): GPUBuffer {
    return this.jobs;
  }

  /** Recreated when an upload outgrows it: read it again after each upload. */
  get adjustBuffer(): GPUBuffer {
    return this.adjust;
  }

  get outBuffer(): GPUBuffer {
    return this.out;
  }

  bytes(results: number): number {
    return results * this.stride * 4;
  }

  /** Copy the first `results` results into a staging buffer. */
  copyOut(enc: GPUCommandEncoder, staging: GPUBuffer, offset: number, results: number): void {
    if (results > 0) enc.copyBufferToBuffer(this.out, 0, staging, offset, this.bytes(results));
  }

  /** Result `index` from the mapped copy: candidates best first (ties by lower row). */
  static parse(words: Uint32Array, stride: number, index: number): TopLogits {
    const base = index * stride;
    const f32 = new Float32Array(words.buffer, words.byteOffset, words.length);
    const count = words[base];
    const finite = words[base + 3];
    if (count > TOP_CAPACITY) throw new Error(`a top result of ${count} entries exceeds the ${TOP_CAPACITY} it can hold`);
    const rows = new Int32Array(count);
    const logits = new Float32Array(count);
    const logitBits = new Uint32Array(logits.buffer);
    const result = (): TopLogits => ({
      kind: 'top',
      rows,
      logits,
      max: finite > 0 ? f32[base + 1] : -Infinity,
      logZ: finite > 0 ? Math.log(f32[base + 2]) : -Infinity,
      finite,
    });
    // The kernel writes its candidates best first (shaders/top_logits.wgsl): check that in one pass and take them
    // as they are; only a result out of order is sorted here.
    let sorted = true;
    let prev = 0;
    for (let j = 0; j < count; j++) {
      const bits = words[base + 5 + 2 * j];
      const ordered = orderedBits(bits);
      const row = words[base + 4 + 2 * j];
      if (j > 0 && (ordered > prev || (ordered === prev && row < rows[j - 1]))) {
        sorted = false;
        break;
      }
      prev = ordered;
      rows[j] = row;
      logitBits[j] = bits;
    }
    if (sorted) return result();
    // Out of order (not this kernel's output): value descending, then row ascending. Each entry's value as an
    // order-preserving u32, flipped so that ascending is descending, goes in `key`; its top 24 bits and the entry's
    // index (< 256) pack into one u32, and a native sort of those (3 µs for 256 on the 2-core CI machine, against
    // 13 µs for packed f64 keys) gives the order up to the key's low 8 bits. Runs whose top 24 bits tie are then
    // put in exact order by insertion.
    const key = PARSE_KEYS;
    const packed = PARSE_PACKED.subarray(0, count);
    for (let j = 0; j < count; j++) {
      const k = (0xffffffff - orderedBits(words[base + 5 + 2 * j])) >>> 0;
      key[j] = k;
      packed[j] = ((k & 0xffffff00) | j) >>> 0;
    }
    packed.sort();
    const order = PARSE_ORDER;
    for (let j = 0; j < count; j++) order[j] = packed[j] & 0xff;
    const rowOf = (j: number) => words[base + 4 + 2 * j];
    for (let start = 0; start < count; ) {
      let end = start + 1;
      while (end < count && packed[end] >>> 8 === packed[start] >>> 8) end++;
      for (let i = start + 1; i < end; i++) {
        const e = order[i];
        let p = i - 1;
        while (p >= start && (key[order[p]] > key[e] || (key[order[p]] === key[e] && rowOf(order[p]) > rowOf(e)))) {
          order[p + 1] = order[p];
          p--;
        }
        order[p + 1] = e;
      }
      start = end;
    }
    for (let j = 0; j < count; j++) {
      const e = order[j];
      rows[j] = rowOf(e);
      logitBits[j] = words[base + 5 + 2 * e];
    }
    return result();
  }

  dispose(): void {
    this.jobs.destroy();
    this.adjust.destroy();
    this.out.destroy();
    this.masks.destroy();
    this.parts.destroy();
  }
}
