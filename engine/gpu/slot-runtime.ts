// The version-independent half of a batched RWKV forward pass on WebGPU: slots and their recurrent states,
// planning a call into sub-passes, recording a sub-pass once per batch shape and replaying it, one read-back
// per call ('last' / 'all' / 'none' / 'top' outputs), and the kernels every version shares (embedding, layer
// norm with token shift, grouped matrix products, output norm and head). A version's runtime (engine/rwkv6/,
// engine/rwkv4/) extends it with the layers of its forward pass (`recordLayers`) and its scratch buffers.
//
// RWKV-7 predates this file and keeps its own copy of the same machinery (engine/rwkv7/runtime.ts).

import { withWgSum } from './wg-sum';
import { VEC_LOADS } from '../rwkv7/vec-loads';
import { lnShiftSplit } from './ln-shift-split';
import { checkJob } from '../job-checks';
import { DRAW_CONTINUATION_STEPS, MAX_DRAW_STEPS, type DrawJob, type InferenceBackend, type JobResult, type ModelInfo, type OutputMode, type SlotJob, type StateSnapshot } from '../types';
import { gpuBroken, releaseGpu, watchGpu, type GpuContext } from './device';
import { BufferRange, createBuffer, Kernel, makeKernel } from './kernel';
import { BindGroupCache } from './bind-group-cache';
import { EncodedAhead, encodeAll } from './encoded-ahead';
import { TOP_CAPACITY, TopLogitsReducer } from '../rwkv7/top-logits';
import { TopDrawer } from '../rwkv7/top-draw';
import { behindBoth, GpuDraws } from './draw-call';
import { writeSubPassInputs, type InputSegment, type SubPassBuffers } from './sub-pass-inputs';
import type { MatrixGroup, WeightPrecision } from '../rwkv7/weights';
import { groupUniform } from '../rwkv7/matmul';
import { quantLayersNote } from '../precision';

export interface SlotRuntimeOptions {
  slots: number;
  /** Most tokens in one sub-pass (the prefill chunk budget of a call). */
  maxTokens: number;
  /** Most logits rows in one sub-pass. */
  maxRows: number;
  /** Up to this many tokens a matrix product uses the streaming kernel (mm_vec), above it the tiled one. */
  vecMaxRows?: number;
  /** Tokens per tile of the tiled kernel. */
  gemmTile?: 16 | 64;
  /** The runtime acquired the device itself: dispose() destroys it. */
  ownsDevice?: boolean;
  /** A state that grows per token (RWKV-7b): most tokens one slot may hold (engine config maxContext). */
  maxContext?: number;
}

/** A layer's channel-mix weights (RWKV-4/5/6): ln2, the k/r token-shift mixes, [key; receptance] and value. */
export interface ChannelMixWeights {
  ln2: GPUBuffer;
  ffnShift: GPUBuffer;
  ffnKR: MatrixGroup;
  ffnV: MatrixGroup;
}

/** What every version's weights hold besides its layers. */
export interface CommonWeights {
  precision: WeightPrecision;
  /** Layers quantised from the first (0 = all; precision.ts WeightStorage). */
  quantLayers: number;
  /** The embedding, already layer-normed with blocks.0.ln0. */
  emb: MatrixGroup;
  lnOut: [GPUBuffer, GPUBuffer];
  head: MatrixGroup;
}

/** One job's tokens (or a piece of them) within a sub-pass. */
type Segment = InputSegment;

type Op = { pipeline: GPUComputePipeline; group: GPUBindGroup; x: number; y: number } | 'submit';

/** Records the dispatches of one sub-pass, to be replayed for every call of the same shape. */
export class Recorder {
  readonly ops: Op[] = [];
  dispatch(pipeline: GPUComputePipeline, group: GPUBindGroup, x: number, y = 1) {
    this.ops.push({ pipeline, group, x, y });
  }
  /** Submit what is recorded so far, so the GPU starts while the rest is encoded. */
  submit() {
    this.ops.push('submit');
  }
}

/** Where one matrix of a group reads and writes (float offsets into the bound buffers). */
export interface SegmentIO {
  xOff: number;
  yOff: number;
  /** 0 none, 1 tanh, 2 sigmoid, 3 relu squared. */
  act?: number;
  /** Add into y instead of overwriting. */
  accum?: boolean;
}

interface SubPass {
  segments: Segment[];
  tokens: number;
  rows: number;
}

export abstract class SlotRuntime implements InferenceBackend {
  readonly slots: number;
  readonly stateSize: number;
  readonly topCapacity = TOP_CAPACITY;
  protected readonly device: GPUDevice;
  protected readonly C: number;
  protected readonly V: number;
  protected readonly TMAX: number;
  protected readonly RMAX: number;
  vecMaxRows: number;
  gemmTile: 16 | 64;
  protected readonly buf: Record<string, GPUBuffer> = {};
  /** Per layer: [att shift offset, second state part offset, ffn shift offset, index] (see save_shift.wgsl). */
  protected readonly layerUniforms: GPUBuffer[] = [];
  private readonly kernels = new Map<string, Kernel>();
  private readonly matUniforms = new Map<string, { buffer: GPUBuffer; virtualRows: number }>();
  private readonly groups: BindGroupCache;
  private readonly recorded = new Map<string, Op[]>();
  /** The next call's commands, encoded while this one waits for its read-back (encoded-ahead.ts). */
  readonly ahead = new EncodedAhead<Op[]>();
  private staging: GPUBuffer | null = null;
  private stateStaging: GPUBuffer | null = null;
  private topReducer: TopLogitsReducer | null = null;
  private topDrawer: TopDrawer | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private disposed = false;
  private readonly ownsDevice: boolean;
  private readonly unwatch: () => void;
  private readonly brokenListeners: ((reason: string) => void)[] = [];

  constructor(
    protected readonly gpu: GpuContext,
    readonly info: ModelInfo,
    private readonly common: CommonWeights,
    /** Floats of one layer's state; its shift parts are the first and the last C floats. */
    protected readonly layerStride: number,
    opts: SlotRuntimeOptions,
  ) {
    this.device = gpu.device;
    this.groups = new BindGroupCache(gpu.device);
    this.slots = opts.slots;
    this.C = info.nEmbd;
    this.V = common.head.segs[0].n;
    this.TMAX = Math.max(1, opts.maxTokens);
    this.RMAX = Math.max(1, Math.min(opts.maxRows, this.TMAX));
    this.vecMaxRows = opts.vecMaxRows ?? 32;
    this.gemmTile = opts.gemmTile ?? 64;
    this.stateSize = info.nLayer * layerStride;
    this.ownsDevice = opts.ownsDevice ?? false;
    this.unwatch = watchGpu(gpu, (reason) => {
      for (const fn of this.brokenListeners) fn(reason);
    });
    const { C, TMAX, RMAX, V } = this;
    this.buf.batch = createBuffer(this.device, 'batch', 16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    for (const [name, floats] of [
      ['ids', TMAX], ['tok', TMAX], ['jobs', this.slots * 4], ['rows', RMAX], ['x', TMAX * C], ['xn', TMAX * C],
      ['xo', RMAX * C], ['logits', RMAX * V], ['state', this.slots * this.stateSize], ['stateTmp', this.stateSize],
      // channelMix(): relu(K xk)² then sigmoid(R xr).
      ['ffk', TMAX * info.ffnDim + TMAX * C],
    ] as [string, number][]) this.scratch(name, floats);
    for (let l = 0; l < info.nLayer; l++) {
      const u = createBuffer(this.device, `layer${l}`, 16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      const base = l * layerStride;
      this.device.queue.writeBuffer(u, 0, new Uint32Array([base, base + C, base + layerStride - C, l]));
      this.layerUniforms.push(u);
    }
  }

  /** A storage buffer of `floats` f32, kept in `buf` and freed on dispose. */
  protected scratch(name: string, floats: number): GPUBuffer {
    const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    return (this.buf[name] = createBuffer(this.device, name, floats * 4, S));
  }

  /** Records the layers of one sub-pass of T tokens in J jobs: buf.x holds the embeddings, and the residual after. */
  protected abstract recordLayers(pass: Recorder, T: number, J: number): void;

  /** Every GPU buffer of the version's weights (freed on dispose). */
  protected abstract weightObjects(): unknown;

  // ---- kernels ------------------------------------------------------------------------------------------

  protected kernel(key: string, make: () => Kernel): Kernel {
    let k = this.kernels.get(key);
    if (!k) this.kernels.set(key, (k = make()));
    return k;
  }

  protected group(key: string, kernel: Kernel, res: BufferRange[]): GPUBindGroup {
    return this.groups.get(key, kernel, res);
  }

  /** Weight access of the embedding (f16 or f32 whatever the precision). */
  protected get wprelude() {
    return this.common.emb.format === 'f32' ? 'weights_f32' : 'weights_f16';
  }

  /** Weight access of a matrix group, by its storage (int8 and nf4 models keep f16 LoRA groups). */
  private static weightInclude(format: WeightPrecision): string {
    return format === 'f32' ? 'weights_f32' : format === 'int8' ? 'weights_i8' : format === 'nf4' ? 'weights_nf4' : 'weights_f16';
  }

  /** Constants every shader may name. */
  protected get consts() {
    return { C: this.C, N: this.info.headSize, TMAX: this.TMAX, STATE: this.stateSize };
  }

  private matmulKernel(variant: 'mm_vec' | 'mm_gemm' | 'mm_gemm16', tb: number, format: WeightPrecision) {
    const sub = this.gpu.subgroup32 ? 'subgroup_on' : 'subgroup_off';
    // mm_gemm's K range and output: all of K, through store() (mm_whole.wgsl; split K is RWKV-7's only).
    const parts = variant === 'mm_vec' ? [variant] : variant === 'mm_gemm' ? ['gemm_tiles', 'mm_whole', variant] : ['gemm_tiles', variant];
    const w = SlotRuntime.weightInclude(format);
    const key = `${variant === 'mm_vec' ? `${variant}${tb}u${VEC_LOADS}` : variant}:${w}`;
    return this.kernel(key, () =>
      // RWKV-4/5/6 keep the checkpoint's rows (RWKV-7's f16 products may be blocks: engine/rwkv7/weight-blocks.ts).
      makeKernel(this.device, [sub, w, 'mm_common', 'wlayout_rows', ...parts], { TB: tb, LPR: 32, LOADS: VEC_LOADS }, ['uniform', 'read', 'read', 'rw', 'uniform']),
    );
  }

  /** The uniform describing a matrix group at one use site (see mm_common.wgsl), made once per site. */
  private groupUniform(key: string, g: MatrixGroup, io: SegmentIO[], useR: boolean): { buffer: GPUBuffer; virtualRows: number } {
    let u = this.matUniforms.get(key);
    if (!u) {
      const { words, virtualRows } = groupUniform(key, g, io, useR); // the layout RWKV-7's products use too
      const buffer = createBuffer(this.device, `group:${key}`, words.byteLength, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
      this.device.queue.writeBuffer(buffer, 0, words);
      u = { buffer, virtualRows };
      this.matUniforms.set(key, u);
    }
    return u;
  }

  /** y_s = act_s(W_s x_s) (+ y_s) for every matrix s of the group, over `rows` rows, in one dispatch. */
  protected matmul(pass: Recorder, key: string, g: MatrixGroup, x: GPUBuffer, y: GPUBuffer, rows: number, io: SegmentIO[], useR = false) {
    const variant = rows <= this.vecMaxRows ? 'mm_vec' : this.gemmTile === 16 ? 'mm_gemm16' : 'mm_gemm';
    const tb = rows <= 4 ? 4 : 8;
    const k = this.matmulKernel(variant, tb, g.format);
    const u = this.groupUniform(key, g, io, useR);
    const group = this.group(`${k.name}:${key}`, k, [this.buf.batch, g.buffer, x, y, u.buffer]);
    if (variant === 'mm_vec') pass.dispatch(k.pipeline, group, Math.ceil(u.virtualRows / 8), Math.ceil(rows / tb));
    else pass.dispatch(k.pipeline, group, Math.ceil(u.virtualRows / 64), Math.ceil(rows / this.gemmTile));
  }

  /**
   * Layer norm of buf.x into buf.xn, then M token-shift mixes xn + (prev - xn) * mixW[m] into `out` (copy m at
   * m*TMAX rows), prev being the slot's previous normalized token; then the slots' last normalized tokens are
   * saved as the shift state (the attention's or the FFN's).
   */
  protected normShift(pass: Recorder, key: string, T: number, J: number, ffn: boolean, l: number, ln: GPUBuffer, mixW: GPUBuffer, M: number, out: GPUBuffer) {
    const { buf } = this;
    // A step where every job has one token stores the shift state inside the norm kernel (ln_shift.wgsl, SAVE).
    const fusedSave = T === J;
    const split = lnShiftSplit(T, this.C);
    const k = this.kernel(`lnShift${ffn},${M},${fusedSave},${split}`, () =>
      makeKernel(this.device, ...withWgSum(this.gpu, ['wg_sum', 'ln_shift_no_tiles', 'ln_shift'], { ...this.consts, WG: 256, M, FFN: ffn, SAVE: fusedSave, SPLIT: split }), [
        'uniform', 'uniform', 'read', 'read', 'read', 'rw', 'read', 'rw', 'rw',
      ]),
    );
    pass.dispatch(k.pipeline, this.group(`${key}:${fusedSave}`, k, [buf.batch, this.layerUniforms[l], buf.tok, buf.x, ln, buf.state, mixW, buf.xn, out]), T, split);
    if (fusedSave) return;
    const s = this.kernel(`save${ffn}`, () =>
      makeKernel(this.device, ['save_shift'], { ...this.consts, FFN: ffn }, ['uniform', 'uniform', 'read', 'read', 'rw']),
    );
    pass.dispatch(s.pipeline, this.group(`${key}:save`, s, [buf.batch, this.layerUniforms[l], buf.jobs, buf.xn, buf.state]), Math.ceil(this.C / 64), J);
  }

  /**
   * The channel mix of RWKV-4/5/6, after ln2 and its token shift: x += sigmoid(R xr) ⊙ V relu(K xk)²
   * (shaders/rwkv6_ffn.wgsl). Its output goes through the version's scratch `tm` (at least TMAX·C floats).
   */
  protected channelMix(pass: Recorder, key: string, T: number, J: number, l: number, L: ChannelMixWeights) {
    const { buf, C, TMAX } = this;
    const F = this.info.ffnDim;
    this.normShift(pass, `${key}:ln2`, T, J, true, l, L.ln2, L.ffnShift, 2, buf.mix);
    this.matmul(pass, `${key}:fkr`, L.ffnKR, buf.mix, buf.ffk, T, [
      { xOff: 0, yOff: 0, act: 3 },
      { xOff: TMAX * C, yOff: TMAX * F, act: 2 },
    ]);
    this.matmul(pass, `${key}:fv`, L.ffnV, buf.ffk, buf.tm, T, [{ xOff: 0, yOff: 0 }]);
    const out = this.kernel('ffnOut', () => makeKernel(this.device, ['rwkv6_ffn'], { ...this.consts, F }, ['uniform', 'read', 'read', 'rw']));
    pass.dispatch(out.pipeline, this.group(`${key}:ffnOut`, out, [buf.batch, buf.ffk, buf.tm, buf.x]), Math.ceil(C / 64), T);
  }

  // ---- the forward pass ---------------------------------------------------------------------------------

  /** The recorded commands of a sub-pass: they depend only on its shape, so they are recorded once per shape. */
  private opsFor(sp: SubPass): Op[] {
    const key = `${sp.tokens},${sp.segments.length},${sp.rows},${this.vecMaxRows},${this.gemmTile}`;
    let ops = this.recorded.get(key);
    if (!ops) {
      ops = this.record(sp.tokens, sp.segments.length, sp.rows);
      if (this.recorded.size >= 64) this.recorded.delete(this.recorded.keys().next().value!);
      this.recorded.set(key, ops);
    }
    return ops;
  }

  private record(T: number, J: number, R: number): Op[] {
    const { device, C, buf, common } = this;
    const pass = new Recorder();
    const emb = this.kernel('embed', () => makeKernel(device, [this.wprelude, 'embed'], { C }, ['uniform', 'read', 'read', 'rw']));
    pass.dispatch(emb.pipeline, this.group('embed', emb, [buf.batch, common.emb.buffer, buf.ids, buf.x]), Math.ceil(C / 8 / 64), T);
    this.recordLayers(pass, T, J);
    if (R > 0) {
      const lnG = this.kernel('lnGather', () =>
        makeKernel(device, ...withWgSum(this.gpu, ['wg_sum', 'layer_norm'], { C, WG: 256, GATHER: true }), ['uniform', 'read', 'read', 'read', 'rw', 'read']),
      );
      pass.dispatch(lnG.pipeline, this.group('lnOut', lnG, [buf.batch, buf.x, common.lnOut[0], common.lnOut[1], buf.xo, buf.rows]), R);
      this.matmul(pass, 'head', common.head, buf.xo, buf.logits, R, [{ xOff: 0, yOff: 0 }], true);
    }
    return pass.ops;
  }

  // ---- planning -----------------------------------------------------------------------------------------

  private plan(jobs: SlotJob[]): { passes: SubPass[]; rowsPerJob: number[] } {
    const seen = new Set<number>();
    const rowsPerJob: number[] = [];
    jobs.forEach((j, i) => {
      checkJob(j, i, this.slots, this.V, seen, (a, k) => this.top.check(a, k));
      rowsPerJob.push(j.output === 'all' ? j.tokens.length : j.output === 'last' ? 1 : 0);
    });
    const passes: SubPass[] = [];
    let cur: SubPass = { segments: [], tokens: 0, rows: 0 };
    const flush = () => {
      if (cur.segments.length) passes.push(cur);
      cur = { segments: [], tokens: 0, rows: 0 };
    };
    jobs.forEach((j, ji) => {
      let pos = 0;
      const n = j.tokens.length;
      while (pos < n) {
        let room = this.TMAX - cur.tokens;
        if (j.output === 'all') room = Math.min(room, this.RMAX - cur.rows);
        const needsLastRow = j.output === 'last' || j.output === 'top';
        if (room <= 0 || (needsLastRow && pos + room >= n && cur.rows >= this.RMAX)) {
          flush();
          continue;
        }
        const to = Math.min(n, pos + room);
        const outMode = j.output === 'all' ? 'all' : needsLastRow && to === n ? j.output : 'none';
        cur.segments.push({ job: ji, slot: j.slot, tokens: j.tokens, from: pos, to, outFrom: j.output === 'all' ? pos : 0, outMode });
        cur.tokens += to - pos;
        cur.rows += outMode === 'all' ? to - pos : outMode === 'none' ? 0 : 1;
        pos = to;
      }
    });
    flush();
    return { passes, rowsPerJob };
  }

  // ---- InferenceBackend -----------------------------------------------------------------------------------

  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.queue
      .then(() => {
        this.checkAlive();
        return fn();
      })
      .catch((e: unknown) => {
        throw this.explain(e);
      });
    this.queue = p.catch(() => undefined);
    return p;
  }

  private explain(e: unknown): Error {
    const broken = gpuBroken(this.gpu);
    if (broken && !(e instanceof Error && e.message === broken)) return new Error(broken, { cause: e });
    if (e instanceof Error && e.message.trim()) return e;
    return new Error(`GPU call failed without a message${e instanceof Error ? ` (${e.name})` : ''}`, { cause: e });
  }

  /**
   * Which matrix kernels run (printed by `rwkv-flow info`): the RWKV-4/5/6 passes use the f32-compute products
   * (f16 weights unpacked in the shader) on every adapter; the subgroup-matrix variants are RWKV-7's so far.
   */
  get kernelPath(): string {
    const p = this.common.precision;
    const partly = quantLayersNote({ precision: p, quantLayers: this.common.quantLayers }, this.info.nLayer);
    const loads = p === 'int8' || p === 'nf4' ? `${p} weights${partly} (small matrices f16)` : p === 'f32' ? 'f32 weights' : 'f16 weights unpacked in the shader';
    return `f32 path: RWKV-4/5/6 products compute in f32 (${loads}) on every adapter`;
  }

  get lost(): string | null {
    return gpuBroken(this.gpu);
  }

  onBroken(fn: (reason: string) => void): void {
    this.brokenListeners.push(fn);
  }

  private checkAlive() {
    if (this.disposed) throw new Error('the RWKV backend was disposed');
    const broken = gpuBroken(this.gpu);
    if (broken) throw new Error(broken);
  }

  run(jobs: SlotJob<Exclude<OutputMode, 'top'>>[]): Promise<(Float32Array | null)[]>;
  run(jobs: SlotJob[]): Promise<JobResult[]>;
  run(jobs: SlotJob[]): Promise<JobResult[]> {
    this.draws.touch();
    let planned: ReturnType<SlotRuntime['plan']>;
    try {
      planned = this.plan(jobs);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.serialize(() => this.execute(jobs, planned.passes, planned.rowsPerJob));
  }

  private get top(): TopLogitsReducer {
    return (this.topReducer ??= new TopLogitsReducer(this.device, this.V, this.slots, this.buf.logits));
  }

  private async execute(jobs: SlotJob[], passes: SubPass[], rowsPerJob: number[]): Promise<JobResult[]> {
    const { device, V } = this;
    const totalRows = rowsPerJob.reduce((a, b) => a + b, 0);
    const rowBytes = V * 4;
    const fullBytes = totalRows * rowBytes;
    const jobRowBase: number[] = [];
    const topIndex: number[] = [];
    let acc = 0;
    let tops = 0;
    jobs.forEach((j, i) => {
      jobRowBase.push(acc);
      acc += rowsPerJob[i];
      topIndex.push(j.output === 'top' ? tops++ : -1);
    });
    const topBytes = tops > 0 ? this.top.bytes(tops) : 0;
    const staging = fullBytes + topBytes > 0 ? this.stagingBuffer(fullBytes + topBytes) : null;
    let lastOps: Op[] | null = null;
    passes.forEach((sp, spi) => {
      const { copies, topRows } = writeSubPassInputs(device.queue, this.inputBuffers, sp, jobs, jobRowBase, topIndex);
      const before = this.ahead.submitAllButLast(device, (lastOps = this.opsFor(sp)));
      const enc = device.createCommandEncoder();
      for (const [from, to, count] of copies) {
        enc.copyBufferToBuffer(this.buf.logits, from * rowBytes, staging!, to * rowBytes, count * rowBytes);
      }
      if (topRows.length) this.top.encode(enc, topRows);
      if (spi === passes.length - 1 && tops > 0) this.top.copyOut(enc, staging!, fullBytes, tops);
      device.queue.submit([before, enc.finish()]);
    });
    const done = staging ? staging.mapAsync(GPUMapMode.READ, 0, fullBytes + topBytes) : device.queue.onSubmittedWorkDone();
    // While the GPU runs, the next call's commands (when the call before ran the same ones: a steady loop).
    const ops = passes.length === 1 ? lastOps : null;
    if (ops) this.ahead.afterCall(ops, () => encodeAll(device, ops));
    else this.ahead.clear();
    await done;
    if (!staging) {
      this.checkAlive();
      return jobs.map(() => null);
    }
    try {
      this.checkAlive();
      const all = new Float32Array(totalRows * V);
      if (fullBytes > 0) all.set(new Float32Array(staging.getMappedRange(0, fullBytes)));
      const topWords = tops > 0 ? new Uint32Array(staging.getMappedRange(fullBytes, topBytes).slice(0)) : null;
      return jobs.map((j, i) => {
        if (j.output === 'top') return TopLogitsReducer.parse(topWords!, this.top.stride, topIndex[i]);
        return rowsPerJob[i] ? all.subarray(jobRowBase[i] * V, (jobRowBase[i] + rowsPerJob[i]) * V) : null;
      });
    } finally {
      staging.unmap();
    }
  }

  /** Most steps of one runDraws call. */
  readonly maxDrawSteps = MAX_DRAW_STEPS;

  /** Decode steps with each token drawn on the GPU, as the RWKV-7 runtime runs them (engine/gpu/draw-call.ts). */
  runDraws(jobs: DrawJob[], steps: number): Promise<Int32Array> {
    return this.draws.run(jobs, steps);
  }

  /** Steps continueDraws may add after a runDraws call before the next one (the penalty room it reserves). */
  readonly drawContinuationSteps = DRAW_CONTINUATION_STEPS;

  /** The last draw call's jobs, `steps` more steps, queued behind it before it is read back (engine/gpu/draw-call.ts). */
  continueDraws(uniforms: Float32Array[], steps: number): Promise<Int32Array> {
    return this.draws.continue(uniforms, steps);
  }

  /** What the draw calls need of this runtime (gpu/draw-call.ts). */
  private readonly draws = new GpuDraws(() => ({
    device: this.device,
    drawer: () => (this.topDrawer ??= new TopDrawer(this.device, this.top, this.buf.ids, this.slots, MAX_DRAW_STEPS)),
    inputBuffers: () => this.inputBuffers,
    serialize: (fn) => this.serialize(fn),
    holdQueue: (p) => (this.queue = behindBoth(this.queue, p)),
    plan: (jobs) => this.plan(jobs),
    stepsOf: (sp) => {
      const ops = this.opsFor(sp as SubPass);
      return {
        encodeStep: () => ({ before: this.ahead.submitAllButLast(this.device, ops), enc: this.device.createCommandEncoder() }),
        afterSubmit: () => this.ahead.afterCall(ops, () => encodeAll(this.device, ops)),
      };
    },
    checkAlive: () => this.checkAlive(),
    refusal: () => null,
  }));

  /** The buffers a sub-pass's inputs go to (sub-pass-inputs.ts). */
  private get inputBuffers(): SubPassBuffers {
    const { batch, ids, tok, jobs, rows } = this.buf;
    return { batch, ids, tok, jobs, rows };
  }

  private stagingBuffer(bytes: number): GPUBuffer {
    if (!this.staging || this.staging.size < bytes) {
      this.staging?.destroy();
      this.staging = this.device.createBuffer({
        label: 'staging',
        size: Math.ceil(bytes / 4096) * 4096,
        usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
      });
    }
    return this.staging;
  }

  private checkSlot(slot: number) {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slots)
      throw new RangeError(`slot ${slot} is out of range 0..${this.slots - 1}`);
  }

  readState(slot: number): Promise<StateSnapshot> {
    this.draws.touch();
    this.checkSlot(slot);
    return this.serialize(async () => {
      const bytes = this.stateSize * 4;
      const staging = (this.stateStaging ??= this.device.createBuffer({
        label: 'state staging',
        size: bytes,
        usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
      }));
      const enc = this.device.createCommandEncoder();
      enc.copyBufferToBuffer(this.buf.state, slot * bytes, staging, 0, bytes);
      this.device.queue.submit([enc.finish()]);
      await staging.mapAsync(GPUMapMode.READ);
      try {
        this.checkAlive();
        return new Float32Array(staging.getMappedRange().slice(0));
      } finally {
        staging.unmap();
      }
    });
  }

  writeState(slot: number, state: StateSnapshot): void {
    this.draws.touch();
    this.checkSlot(slot);
    this.checkAlive();
    if (state.length !== this.stateSize)
      throw new RangeError(`state has ${state.length} floats; this model's state has ${this.stateSize}`);
    this.device.queue.writeBuffer(this.buf.state, slot * this.stateSize * 4, state.buffer, state.byteOffset, state.byteLength);
  }

  resetState(slot: number): void {
    this.draws.touch();
    this.checkSlot(slot);
    this.checkAlive();
    const enc = this.device.createCommandEncoder();
    enc.clearBuffer(this.buf.state, slot * this.stateSize * 4, this.stateSize * 4);
    this.device.queue.submit([enc.finish()]);
  }

  copyState(fromSlot: number, toSlot: number): void {
    this.draws.touch();
    this.checkSlot(fromSlot);
    this.checkSlot(toSlot);
    this.checkAlive();
    if (fromSlot === toSlot) return;
    const bytes = this.stateSize * 4;
    const enc = this.device.createCommandEncoder();
    // WebGPU forbids a copy within one buffer, so go through a one-slot scratch buffer.
    enc.copyBufferToBuffer(this.buf.state, fromSlot * bytes, this.buf.stateTmp, 0, bytes);
    enc.copyBufferToBuffer(this.buf.stateTmp, 0, this.buf.state, toSlot * bytes, bytes);
    this.device.queue.submit([enc.finish()]);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.unwatch();
    this.brokenListeners.length = 0;
    for (const b of Object.values(this.buf)) b.destroy();
    for (const b of this.layerUniforms) b.destroy();
    for (const u of this.matUniforms.values()) u.buffer.destroy();
    for (const b of gpuBuffersIn([this.common, this.weightObjects()])) b.destroy();
    this.staging?.destroy();
    this.stateStaging?.destroy();
    this.topDrawer?.dispose();
    this.draws.dispose();
    this.topReducer?.dispose();
    this.kernels.clear();
    this.groups.clear();
    this.recorded.clear();
    this.ahead.clear();
    this.matUniforms.clear();
    if (this.ownsDevice) releaseGpu(this.gpu);
  }
}

/** Every GPU buffer reachable from `root` (so a new weight field is freed too). */
function gpuBuffersIn(root: unknown): GPUBuffer[] {
  const found = new Set<GPUBuffer>();
  const walk = (v: unknown) => {
    if (!v || typeof v !== 'object' || ArrayBuffer.isView(v)) return;
    const o = v as Record<string, unknown>;
    if (typeof o.destroy === 'function' && typeof o.mapAsync === 'function') found.add(v as GPUBuffer);
    else for (const x of Object.values(o)) walk(x);
  };
  walk(root);
  return [...found];
}
