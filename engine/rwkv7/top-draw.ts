// Next tokens drawn on the GPU (shaders/top_draw.wgsl) from the 'top' reduction (top-logits.ts), with the requests'
// logit bias and presence / frequency penalties kept on the GPU between steps: several decode steps run back to back,
// each step's drawn rows written into the forward's token ids, without a readback between them.

import { numberChoice } from '../env-choice';
import { bindGroup, createBuffer, type Kernel, makeKernel } from '../gpu/kernel';
import type { DrawParams } from '../types';
import { JOB_WORDS, NO_MASK, TOP_CAPACITY, type TopLogitsReducer } from './top-logits';

/** One row to draw for: where it is, and its sampler's settings and state (types.ts DrawParams). */
export interface DrawRow extends DrawParams {
  /** Logits row (of the reducer's logits buffer) this row's step output is in. */
  logitsRow: number;
  /** u32 index in the forward's token-id buffer where the drawn row is written: the next step's input token. */
  idsAt: number;
}

/** Most steps prepare may reserve room for beyond its own (the continuations of one prepared call). */
export const MAX_RESERVE = 1024;

/** u32 words of a row's parameters in the shader's `args` (after a 4-word header). */
const PARAM = 8;
/** u32 words of a PairState (bias, penalty, penalized). */
const PAIR_WORDS = 3;

/** Lanes a row of the draw kernel takes (shaders/top_draw.wgsl LANES); 1 is the form where one lane did all of it. */
export type DrawLanes = 1 | 32 | 64 | 128 | 256;

/**
 * RWKV_DRAW_LANES=1|32|64|128|256 (benchmarks compare); unset: 64. On an H100, 64 lanes drew 0.1B batches 9–30% faster
 * than 1 (bench/RESULTS.md, twentieth session).
 */
export function drawLanesFrom(value: string | undefined): DrawLanes {
  return numberChoice('RWKV_DRAW_LANES', value, [1, 32, 64, 128, 256] as const, 64);
}

export class TopDrawer {
  private readonly kernel: Kernel;
  /** [n, steps, -, -], the rows' parameters, the uniforms. */
  private readonly args: GPUBuffer;
  /** [maxRows step counters, maxSteps·maxRows drawn rows]. */
  private readonly state: GPUBuffer;
  /** Per adjust pair: bias, penalty, penalized (grows with the pairs). */
  private pairs: GPUBuffer;
  private group: GPUBindGroup | null = null;
  /** The reducer's adjust buffer the group was made with (it is recreated when an upload outgrows it). */
  private groupAdjust: GPUBuffer | null = null;
  private n = 0;
  private steps = 0;
  private encoded = 0;
  /** Steps the prepared rows' penalty segments still have room for after the prepared ones (continueWith). */
  private roomLeft = 0;

  constructor(
    private readonly device: GPUDevice,
    private readonly reducer: TopLogitsReducer,
    private readonly ids: GPUBuffer,
    readonly maxRows: number,
    readonly maxSteps: number,
    readonly lanes: DrawLanes = drawLanesFrom(process.env.RWKV_DRAW_LANES),
  ) {
    if (!(Number.isInteger(maxRows) && maxRows >= 1)) throw new RangeError(`TopDrawer: maxRows must be an integer >= 1, got ${maxRows}`);
    if (!(Number.isInteger(maxSteps) && maxSteps >= 1)) throw new RangeError(`TopDrawer: maxSteps must be an integer >= 1, got ${maxSteps}`);
    if (reducer.jobsBuffer.size < maxRows * JOB_WORDS * 4) throw new RangeError(`TopDrawer: the reducer holds fewer than ${maxRows} rows`);
    this.kernel = makeKernel(device, ['top_job', 'top_draw'], { CAP: TOP_CAPACITY, MAX_ROWS: maxRows, LANES: lanes }, ['rw', 'rw', 'read', 'rw', 'read', 'rw', 'rw']);
    const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    this.args = createBuffer(device, 'drawArgs', (4 + maxRows * PARAM + maxSteps * maxRows) * 4, S);
    this.state = createBuffer(device, 'drawState', (maxRows + maxSteps * maxRows) * 4, S);
    this.pairs = createBuffer(device, 'drawPairs', 1024 * PAIR_WORDS * 4, S);
  }

  /**
   * Validates, then uploads: the reducer's jobs and adjust words for rows i = 0..n-1 (out index i, mask none, each
   * row's adjust segment the union of its bias and penalty rows with delta bias - penalty, with room for `steps` more
   * pairs after it), the draw parameters, the uniforms (step-major: uniforms[s*n + i]) and zeroed step counters.
   */
  prepare(rows: DrawRow[], uniforms: Float32Array, steps: number, reserve = 0): void {
    const n = rows.length;
    if (n < 1 || n > this.maxRows) throw new RangeError(`TopDrawer: ${n} rows; between 1 and ${this.maxRows} can be drawn for`);
    this.checkSteps(uniforms, steps, n);
    if (!(Number.isInteger(reserve) && reserve >= 0 && reserve <= MAX_RESERVE)) throw new RangeError(`TopDrawer: reserve must be an integer in 0..${MAX_RESERVE}, got ${reserve}`);
    const V = this.reducer.V;
    const idsWords = this.ids.size / 4;
    rows.forEach((r, i) => this.check(r, i, V, idsWords));

    // Each row's segment: penalized rows first, then rows with only a bias (as TokenSampler.adjustments orders them).
    const segments = rows.map((r) => {
      const at = new Map<number, number>();
      const rowsOf: number[] = [];
      const bias: number[] = [];
      const penalty: number[] = [];
      const penalized: number[] = [];
      r.penalties.rows.forEach((row, k) => {
        at.set(row, rowsOf.length);
        rowsOf.push(row), bias.push(0), penalty.push(r.penalties.values[k]), penalized.push(1);
      });
      r.bias.rows.forEach((row, k) => {
        const j = at.get(row);
        if (j !== undefined) bias[j] = r.bias.values[k];
        else rowsOf.push(row), bias.push(r.bias.values[k]), penalty.push(0), penalized.push(0);
      });
      return { rowsOf, bias, penalty, penalized };
    });
    const room = steps + reserve;
    const total = segments.reduce((t, g) => t + g.rowsOf.length + room, 0);
    const jobWords = new Uint32Array(n * JOB_WORDS);
    const adjWords = new Uint32Array(2 * total);
    const adjFloats = new Float32Array(adjWords.buffer);
    const pairWords = new Uint32Array(PAIR_WORDS * total);
    const pairFloats = new Float32Array(pairWords.buffer);
    const argWords = new Uint32Array(4 + n * PARAM + steps * n);
    const argFloats = new Float32Array(argWords.buffer);
    argWords[0] = n;
    argWords[1] = steps;
    let off = 0;
    segments.forEach((g, i) => {
      const count = g.rowsOf.length;
      jobWords.set([rows[i].logitsRow, off, count, i, NO_MASK], i * JOB_WORDS);
      for (let j = 0; j < count; j++) {
        const q = off + j;
        adjWords[2 * q] = g.rowsOf[j];
        adjFloats[2 * q + 1] = Math.fround(g.bias[j]) - Math.fround(g.penalty[j]);
        pairFloats[PAIR_WORDS * q] = g.bias[j];
        pairFloats[PAIR_WORDS * q + 1] = g.penalty[j];
        pairWords[PAIR_WORDS * q + 2] = g.penalized[j];
      }
      const r = rows[i];
      const p = 4 + i * PARAM;
      argWords[p] = r.idsAt;
      argWords[p + 1] = r.temperature === 0 ? 1 : r.topK;
      argFloats[p + 2] = r.temperature;
      argFloats[p + 3] = r.topP;
      argFloats[p + 4] = r.presence;
      argFloats[p + 5] = r.frequency;
      argFloats[p + 6] = r.decay;
      // The segment's end: the draws append at most one pair a step.
      argWords[p + 7] = count + room;
      off += count + room;
    });
    argFloats.set(uniforms, 4 + n * PARAM);

    this.reducer.uploadRaw(jobWords, adjWords);
    if (pairWords.byteLength > this.pairs.size) {
      this.pairs.destroy();
      this.pairs = createBuffer(this.device, 'drawPairs', pairWords.byteLength * 2, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC);
      this.group = null;
    }
    const q = this.device.queue;
    q.writeBuffer(this.pairs, 0, pairWords);
    q.writeBuffer(this.args, 0, argWords);
    q.writeBuffer(this.state, 0, new Uint32Array(n));
    this.n = n;
    this.steps = steps;
    this.encoded = 0;
    this.roomLeft = reserve;
  }

  /**
   * `steps` more steps of the rows prepared last, from where the GPU leaves them: each fed the row it drew last (in the
   * ids buffer), its penalties as the draws updated them. Only the uniforms are new. The queue orders these writes
   * after the commands already submitted, so a call may be continued before its drawn rows are read back. Throws when
   * the penalty segments have no room left for `steps` more (prepare again, with a reserve).
   */
  continueWith(uniforms: Float32Array, steps: number): void {
    if (this.n === 0) throw new Error('TopDrawer.continueWith: nothing prepared');
    this.checkSteps(uniforms, steps, this.n);
    if (steps > this.roomLeft) throw new RangeError(`TopDrawer.continueWith: room for ${this.roomLeft} more steps, not ${steps}; prepare again`);
    const head = new Uint32Array([this.n, steps, 0, 0]);
    const q = this.device.queue;
    q.writeBuffer(this.args, 0, head);
    q.writeBuffer(this.args, (4 + this.n * PARAM) * 4, uniforms);
    q.writeBuffer(this.state, 0, new Uint32Array(this.n));
    this.roomLeft -= steps;
    this.steps = steps;
    this.encoded = 0;
  }

  private checkSteps(uniforms: Float32Array, steps: number, n: number): void {
    if (!(Number.isInteger(steps) && steps >= 1 && steps <= this.maxSteps)) throw new RangeError(`TopDrawer: steps must be an integer in 1..${this.maxSteps}, got ${steps}`);
    if (uniforms.length !== steps * n) throw new RangeError(`TopDrawer: ${uniforms.length} uniforms for ${steps} steps of ${n} rows; expected ${steps * n}`);
    for (let k = 0; k < uniforms.length; k++) {
      if (!(uniforms[k] >= 0 && uniforms[k] < 1)) throw new RangeError(`TopDrawer: uniform ${k} is ${uniforms[k]}, not in [0, 1)`);
    }
  }

  private check(r: DrawRow, i: number, V: number, idsWords: number): void {
    const what = `TopDrawer: row ${i}`;
    if (!(Number.isInteger(r.logitsRow) && r.logitsRow >= 0)) throw new RangeError(`${what}: logitsRow ${r.logitsRow} is not a row index`);
    if (!(Number.isInteger(r.idsAt) && r.idsAt >= 0 && r.idsAt < idsWords)) throw new RangeError(`${what}: idsAt ${r.idsAt} is outside the ids buffer (0..${idsWords - 1})`);
    if (!(Number.isFinite(r.temperature) && r.temperature >= 0)) throw new RangeError(`${what}: temperature must be a finite number >= 0, got ${r.temperature}`);
    if (r.temperature > 0 && !(Number.isInteger(r.topK) && r.topK >= 1 && r.topK <= TOP_CAPACITY)) {
      throw new RangeError(`${what}: topK must be an integer in 1..${TOP_CAPACITY} to draw from the top, got ${r.topK}`);
    }
    if (!(r.topP > 0 && r.topP <= 1)) throw new RangeError(`${what}: topP must be in (0, 1], got ${r.topP}`);
    if (!Number.isFinite(r.presence) || !Number.isFinite(r.frequency)) throw new RangeError(`${what}: presence and frequency penalties must be finite, got ${r.presence} and ${r.frequency}`);
    if (!(r.decay >= 0 && r.decay <= 1)) throw new RangeError(`${what}: decay must be in [0, 1], got ${r.decay}`);
    const list = (name: string, l: { rows: Int32Array; values: Float32Array }, ok: (v: number) => boolean, want: string) => {
      if (l.rows.length !== l.values.length) throw new RangeError(`${what}: ${name} has ${l.rows.length} rows but ${l.values.length} values`);
      const seen = new Set<number>();
      l.rows.forEach((row, k) => {
        if (!(Number.isInteger(row) && row >= 0 && row < V)) throw new RangeError(`${what}: ${name} row ${row} is outside the vocabulary 0..${V - 1}`);
        if (seen.has(row)) throw new RangeError(`${what}: ${name} row ${row} appears twice`);
        seen.add(row);
        if (!ok(l.values[k])) throw new RangeError(`${what}: ${name} value for row ${row} is ${l.values[k]}; expected ${want}`);
      });
    };
    list('bias', r.bias, (v) => Number.isFinite(v) || v === -Infinity, 'a finite number or -Infinity');
    list('penalties', r.penalties, (v) => Number.isFinite(v), 'a finite number');
  }

  /** One step: the reducer's two passes over the prepared rows, then the draw pass. Once a step, after the forward's commands. */
  encode(enc: GPUCommandEncoder): void {
    if (this.n === 0) throw new Error('TopDrawer.encode: nothing prepared');
    if (this.encoded >= this.steps) throw new Error(`TopDrawer.encode: all ${this.steps} prepared steps are encoded; prepare again`);
    this.encoded++;
    this.reducer.dispatch(enc, this.n);
    const adjust = this.reducer.adjustBuffer;
    if (!this.group || this.groupAdjust !== adjust) {
      this.group = bindGroup(this.device, this.kernel, [this.reducer.jobsBuffer, adjust, this.reducer.outBuffer, this.pairs, this.args, this.state, this.ids]);
      this.groupAdjust = adjust;
    }
    const pass = enc.beginComputePass();
    pass.setPipeline(this.kernel.pipeline);
    pass.setBindGroup(0, this.group);
    pass.dispatchWorkgroups(this.n);
    pass.end();
  }

  /** Bytes of the drawn rows of the prepared call (steps * n u32). */
  bytes(): number {
    return this.steps * this.n * 4;
  }

  /** Copies the drawn rows (step-major, steps*n u32) to `staging` at `offset`. */
  copyOut(enc: GPUCommandEncoder, staging: GPUBuffer, offset: number): void {
    if (this.n > 0) enc.copyBufferToBuffer(this.state, this.maxRows * 4, staging, offset, this.bytes());
  }

  /** Drawn rows from the mapped copy; -1 where nothing was allowed (count or finite 0). */
  static parse(words: Uint32Array): Int32Array {
    return Int32Array.from(words, (w) => w | 0);
  }

  dispose(): void {
    this.args.destroy();
    this.state.destroy();
    this.pairs.destroy();
  }
}
