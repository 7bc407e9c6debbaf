// The RWKV-7 backend on the CPU: the InferenceBackend the WebGPU runtime (runtime.ts) implements, computed by
// WebAssembly SIMD kernels on worker threads over one shared memory (weights, slot states, scratch). This side
// validates and plans each call (same rules and messages as the GPU runtime), hands the plan to the compute
// thread (cpu-worker.ts) and reduces 'top' rows; the host's event loop only waits. Calls run one at a time in
// order; state reads and writes are ordered with them as a GPU queue orders them.

import * as os from 'os';
import * as path from 'path';
import { Worker } from 'worker_threads';
import type { Checkpoint, InferenceBackend, JobResult, ModelInfo, OutputMode, SlotJob, StateSnapshot } from '../types';
import { Arena } from '../cpu/arena';
import { checkLogitAdjust, reduceTop } from '../cpu/top-logits-cpu';
import { type KernelVariant, kernelModule } from '../cpu/wasm-kernels';
import { TOP_CAPACITY } from './top-logits';
import type { CpuLayout, CpuSegment, CpuSubPass } from './cpu-forward';
import { type CpuPrecision, type CpuWeightPlan, type CpuWeights, planRwkv7Cpu } from './cpu-weights';
import { int8ScratchBytes } from '../cpu/int8-quant';
import { DEEP_EMBED_ROW } from '../model-spec';

export interface CpuRuntimeOptions {
  slots: number;
  /** Most tokens in one sub-pass. */
  maxTokens: number;
  /** Most logits rows in one sub-pass. */
  maxRows: number;
  precision: CpuPrecision;
  /** int8: layers quantised from the first (0 or unset = all; precision.ts WeightStorage). */
  quantLayers?: number;
  /** Threads computing (the compute thread and its helpers); default: the machine's available parallelism. */
  threads?: number;
}

/** Threads the CPU backend uses when not told: every core the process may use. */
export function defaultCpuThreads(): number {
  return typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
}

type Reply = { type: 'ready' } | { type: 'done'; logits: Float32Array } | { type: 'error'; message: string };

/** What the CPU backend cannot run, refused before the weights are laid out. */
function checkCpuModel(info: ModelInfo, opts: CpuRuntimeOptions): void {
  const { nEmbd: C, headSize: N, ffnDim: F } = info;
  if (C % 8 !== 0 || N % 4 !== 0) throw new Error(`the CPU backend needs n_embd a multiple of 8 and a head size a multiple of 4 (got ${C}, ${N})`);
  if (opts.threads !== undefined && !(Number.isInteger(opts.threads) && opts.threads >= 1 && opts.threads <= 1024))
    throw new RangeError(`threads must be an integer in [1, 1024], got ${opts.threads}`);
  if (info.version === 'v7a' && F % 4 !== 0) throw new Error(`the CPU backend needs an RWKV-7a FFN width that is a multiple of 4 (got ${F})`);
}

export class Rwkv7CpuRuntime implements InferenceBackend {
  readonly slots: number;
  readonly stateSize: number;
  readonly topCapacity = TOP_CAPACITY;
  readonly threads: number;
  readonly weightBytes: number;
  readonly memoryBytes: number;
  /** Which build of the kernels runs: plain SIMD, or with relaxed SIMD's fused multiply-add. */
  readonly kernelVariant: KernelVariant;
  private readonly V: number;
  private readonly TMAX: number;
  private readonly RMAX: number;
  private readonly state: Float32Array;
  private readonly worker: Worker;
  private waiting: { resolve: (r: Reply) => void } | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  /** Calls queued or running; state writes made while 0 apply at once. */
  private busy = 0;
  private disposed = false;
  private lostReason: string | null = null;

  private constructor(readonly info: ModelInfo, arena: Arena, plan: CpuWeightPlan, opts: CpuRuntimeOptions) {
    const { nEmbd: C, nHead: H, headSize: N, ffnDim: F, nLayer } = info;
    this.slots = opts.slots;
    this.threads = opts.threads ?? defaultCpuThreads();
    this.TMAX = Math.max(1, opts.maxTokens);
    this.RMAX = Math.max(1, Math.min(opts.maxRows, this.TMAX));
    this.stateSize = nLayer * (2 * C + H * N * N);
    const weights: CpuWeights = plan.weights;
    this.weightBytes = weights.bytes;
    this.V = weights.head.n;
    const T = this.TMAX;
    const loraStride = weights.maxLora;
    const layout: CpuLayout = {
      C, H, N, F, V: this.V, nLayer,
      slots: this.slots,
      TMAX: T,
      RMAX: this.RMAX,
      stateSize: this.stateSize,
      state: arena.allocFloats(this.slots * this.stateSize),
      ids: arena.allocFloats(T),
      prevAddr: arena.allocFloats(T),
      rows: arena.allocFloats(this.RMAX),
      x: arena.allocFloats(T * C),
      xn: arena.allocFloats(T * C),
      mix: arena.allocFloats(6 * T * C),
      tm: arena.allocFloats(9 * T * C),
      lora: arena.allocFloats(4 * T * loraStride),
      loraStride,
      vfirst: arena.allocFloats(T * C),
      xx: arena.allocFloats(T * C),
      ffk: arena.allocFloats(T * F),
      xo: arena.allocFloats(this.RMAX * C),
      logits: arena.allocFloats(this.RMAX * this.V),
      se: weights.deepEmbed ? arena.allocFloats(nLayer * T * DEEP_EMBED_ROW) : 0,
      deScratch: weights.deepEmbed ? arena.allocFloats(64) : 0,
      scratch: 0,
      scratchBytes: 0,
    };
    // The widest input of any matrix (ffn value: F; the others C or a LoRA rank), 32 bytes per input (f16).
    // int8 weights: the call's tokens quantized to i16 instead (int8-quant.ts).
    // A model quantised in its first layers only runs both kinds: the larger need.
    const widest = Math.max(C, F, loraStride);
    const scratchNeed = Math.max(widest * 32, weights.hasInt8 ? int8ScratchBytes(T, widest) : 0);
    layout.scratchBytes = Math.ceil(scratchNeed / 64) * 64;
    layout.scratch = arena.alloc(this.threads * layout.scratchBytes);
    const kernels = kernelModule();
    this.kernelVariant = kernels.variant;
    const memory = arena.createMemory();
    this.memoryBytes = arena.bytes;
    plan.write(memory);
    this.state = new Float32Array(memory.buffer, layout.state, this.slots * this.stateSize);
    this.worker = new Worker(path.join(__dirname, 'cpu-worker.js'), {
      workerData: { memory, module: kernels.module, layout, weights, threads: this.threads },
    });
    this.worker.on('message', (m: Reply) => this.reply(m));
    this.worker.on('error', (e: Error) => this.fail(`the CPU backend's compute thread failed: ${e.message}`));
    this.worker.on('exit', (code) => {
      if (!this.disposed) this.fail(`the CPU backend's compute thread exited (code ${code})`);
    });
  }

  /** Lays the model out and starts the compute thread; resolves once it is ready. */
  static async create(ck: Checkpoint, info: ModelInfo, opts: CpuRuntimeOptions): Promise<Rwkv7CpuRuntime> {
    // The checks on the options the constructor makes come before the (long) weight layout.
    checkCpuModel(info, opts);
    const arena = new Arena();
    const plan = await planRwkv7Cpu(arena, ck, info, { precision: opts.precision, quantLayers: opts.quantLayers ?? 0 });
    const rt = new Rwkv7CpuRuntime(info, arena, plan, opts);
    const first = await rt.await();
    if (first.type !== 'ready') {
      rt.dispose();
      throw new Error(first.type === 'error' ? first.message : 'the CPU backend did not start');
    }
    rt.worker.unref();
    return rt;
  }

  get lost(): string | null {
    return this.lostReason;
  }

  private reply(m: Reply) {
    const w = this.waiting;
    this.waiting = null;
    w?.resolve(m);
  }

  private fail(reason: string) {
    this.lostReason ??= reason;
    this.reply({ type: 'error', message: reason });
  }

  private await(): Promise<Reply> {
    if (this.lostReason) return Promise.resolve({ type: 'error', message: this.lostReason });
    return new Promise((resolve) => (this.waiting = { resolve }));
  }

  private checkAlive() {
    if (this.disposed) throw new Error('the RWKV backend was disposed');
    if (this.lostReason) throw new Error(this.lostReason);
  }

  private serialize<T>(fn: () => Promise<T> | T): Promise<T> {
    this.busy++;
    const p = this.queue.then(() => {
      this.checkAlive();
      return fn();
    });
    this.queue = p.catch(() => undefined).finally(() => this.busy--);
    return p;
  }

  // ---- planning (the GPU runtime's rules) -----------------------------------------------------------------

  private plan(jobs: SlotJob[]): { passes: CpuSubPass[]; rowsPerJob: number[]; rowBase: number[] } {
    const seen = new Set<number>();
    const rowsPerJob: number[] = [];
    jobs.forEach((j, i) => {
      if (!Number.isInteger(j.slot) || j.slot < 0 || j.slot >= this.slots)
        throw new RangeError(`job ${i}: slot ${j.slot} is out of range 0..${this.slots - 1}`);
      if (seen.has(j.slot)) throw new Error(`job ${i}: slot ${j.slot} appears twice in one call`);
      seen.add(j.slot);
      if (j.tokens.length === 0 && j.output !== 'none') throw new Error(`job ${i}: no tokens but output '${j.output}'`);
      if (j.output === 'top') checkLogitAdjust(j.adjust, i, this.V);
      else if (j.adjust) throw new Error(`job ${i}: adjust is for output 'top' only`);
      for (let t = 0; t < j.tokens.length; t++) {
        const id = j.tokens[t];
        if (!Number.isInteger(id) || id < 0 || id >= this.V)
          throw new RangeError(`job ${i}: token ${id} at position ${t} is outside the model's vocabulary 0..${this.V - 1}`);
      }
      rowsPerJob.push(j.output === 'all' ? j.tokens.length : j.output === 'none' ? 0 : 1);
    });
    const rowBase: number[] = [];
    let acc = 0;
    for (const r of rowsPerJob) {
      rowBase.push(acc);
      acc += r;
    }
    const passes: CpuSubPass[] = [];
    let segs: CpuSegment[] = [];
    let ids: number[] = [];
    let rows = 0;
    const flush = () => {
      if (segs.length) passes.push({ ids: Int32Array.from(ids), segments: segs });
      segs = [];
      ids = [];
      rows = 0;
    };
    jobs.forEach((j, ji) => {
      let pos = 0;
      const n = j.tokens.length;
      while (pos < n) {
        let room = this.TMAX - ids.length;
        if (j.output === 'all') room = Math.min(room, this.RMAX - rows);
        const needsLastRow = j.output === 'last' || j.output === 'top';
        if (room <= 0 || (needsLastRow && pos + room >= n && rows >= this.RMAX)) {
          flush();
          continue;
        }
        const to = Math.min(n, pos + room);
        const out = j.output === 'all' ? 'all' : needsLastRow && to === n ? 'last' : 'none';
        segs.push({ slot: j.slot, start: ids.length, count: to - pos, out, resultRow: rowBase[ji] + (j.output === 'all' ? pos : 0) });
        for (let t = pos; t < to; t++) ids.push(j.tokens[t]);
        rows += out === 'all' ? to - pos : out === 'none' ? 0 : 1;
        pos = to;
      }
    });
    flush();
    return { passes, rowsPerJob, rowBase };
  }

  // ---- InferenceBackend -----------------------------------------------------------------------------------

  run(jobs: SlotJob<Exclude<OutputMode, 'top'>>[]): Promise<(Float32Array | null)[]>;
  run(jobs: SlotJob[]): Promise<JobResult[]>;
  run(jobs: SlotJob[]): Promise<JobResult[]> {
    let planned: ReturnType<Rwkv7CpuRuntime['plan']>;
    try {
      this.checkAlive();
      planned = this.plan(jobs);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.serialize(async () => {
      const { passes, rowsPerJob, rowBase } = planned;
      const total = rowsPerJob.reduce((a, b) => a + b, 0);
      if (passes.length === 0) return jobs.map(() => null);
      this.worker.ref();
      const reply = this.await();
      this.worker.postMessage({ type: 'run', passes, rows: total });
      const m = await reply;
      if (!this.disposed) this.worker.unref();
      if (m.type !== 'done') throw new Error(m.type === 'error' ? m.message : 'unexpected reply from the CPU backend');
      const V = this.V;
      return jobs.map((j, i) => {
        if (rowsPerJob[i] === 0) return null;
        const rows = m.logits.subarray(rowBase[i] * V, (rowBase[i] + rowsPerJob[i]) * V);
        return j.output === 'top' ? reduceTop(rows, j.adjust, TOP_CAPACITY) : rows;
      });
    });
  }

  private checkSlot(slot: number) {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slots)
      throw new RangeError(`slot ${slot} is out of range 0..${this.slots - 1}`);
  }

  private slotState(slot: number): Float32Array {
    return this.state.subarray(slot * this.stateSize, (slot + 1) * this.stateSize);
  }

  /** Applies a state change now when nothing is queued, else after what is queued. */
  private ordered(apply: () => void) {
    if (this.busy === 0) apply();
    else void this.serialize(apply).catch(() => undefined);
  }

  readState(slot: number): Promise<StateSnapshot> {
    this.checkSlot(slot);
    return this.serialize(() => Float32Array.from(this.slotState(slot)));
  }

  writeState(slot: number, state: StateSnapshot): void {
    this.checkSlot(slot);
    this.checkAlive();
    if (state.length !== this.stateSize)
      throw new RangeError(`state has ${state.length} floats; this model's state has ${this.stateSize}`);
    if (this.busy === 0) this.slotState(slot).set(state);
    else {
      const copy = Float32Array.from(state);
      this.ordered(() => this.slotState(slot).set(copy));
    }
  }

  resetState(slot: number): void {
    this.checkSlot(slot);
    this.checkAlive();
    this.ordered(() => this.slotState(slot).fill(0));
  }

  copyState(fromSlot: number, toSlot: number): void {
    this.checkSlot(fromSlot);
    this.checkSlot(toSlot);
    this.checkAlive();
    if (fromSlot === toSlot) return;
    this.ordered(() => this.slotState(toSlot).set(this.slotState(fromSlot)));
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.reply({ type: 'error', message: 'the RWKV backend was disposed' });
    this.worker.postMessage({ type: 'dispose' });
    void this.worker.terminate();
  }
}
