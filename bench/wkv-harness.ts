// One WKV-7 problem on the GPU outside the engine: random per-token vectors of the ranges the model produces
// (decay w in (0.545, 1), unit-length removal keys kk per head, b = kk·a with a in (0, 1)) for a list of jobs,
// one model layer of state per job, and any WKV kernel variant (engine/rwkv7/wkv.ts) dispatched over them
// exactly as the engine binds it. Shared by the microbenchmark (bench/wkv.ts) and the variant tests.

import type { GpuContext } from '../engine/gpu/device';
import { bindGroup, createBuffer, makeKernel, type Kernel } from '../engine/gpu/kernel';
import { isCpuDriverName } from '../engine/gpu/capabilities';
import { wkvPasses, wkvScratchFloats, wkvVariantName, type WkvConstants, type WkvVariant } from '../engine/rwkv7/wkv';

/** Time-mix regions (shaders/head_common.wgsl): r, w, k, v, b (= kk·a), kk, y. */
const R = 0, W = 1, K = 2, V = 3, B = 4, KK = 6, Y = 7;
const REGIONS = 9;

export interface WkvProblem {
  heads: number;
  headSize: number;
  /** Most tokens of one batch: the kernels are built for this many (their constants), so batches up to it share them. */
  tokens: number;
  /** State slots (one layer each); job j of a batch updates slot j. */
  slots: number;
  seed?: number;
  /** The lane variants' scan as straight-line code (wkvPasses); default: as the engine runs it here (not on CPU drivers). */
  flatScan?: boolean;
}

/** A small deterministic generator (xorshift32): the same problem on every run and machine. */
function uniforms(seed: number): () => number {
  let s = seed >>> 0 || 0x9e3779b9;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return (s + 0.5) / 4294967296;
  };
}

export class WkvHarness {
  readonly consts: WkvConstants;
  /** Tokens of each job of the current batch (use()). */
  private jobs: number[] = [];
  private readonly device: GPUDevice;
  private readonly tm0: Float32Array;
  private readonly state0: Float32Array;
  private readonly buffers: GPUBuffer[] = [];
  private readonly tm: GPUBuffer;
  private readonly state: GPUBuffer;
  private readonly uniforms: GPUBuffer[];
  private readonly jobBuf: GPUBuffer;
  private readonly kernels = new Map<string, { kernel: Kernel; group: GPUBindGroup; dispatch: (H: number, J: number, T: number) => [number, number] }[]>();
  /** Scratch of the chunked variants (made on first use, for every job of a batch of up to `tokens` tokens). */
  private scratch: GPUBuffer | null = null;
  private readonly flatScan: boolean;

  constructor(
    gpu: GpuContext,
    readonly problem: WkvProblem,
  ) {
    this.device = gpu.device;
    this.flatScan = problem.flatScan ?? !isCpuDriverName(gpu.adapterName);
    const { heads: H, headSize: N, tokens: T, slots } = problem;
    for (const [k, n] of Object.entries({ heads: H, headSize: N, tokens: T, slots })) {
      if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`WKV problem: ${k} must be a positive integer, got ${n}`);
    }
    const C = H * N;
    // One layer of state per slot: [att_x (C), att_kv (H·N·N), ffn_x (C)], the engine's stride.
    const STATE = 2 * C + H * N * N;
    this.consts = { C, N, TMAX: T, STATE };
    const REG = T * C;
    const rnd = uniforms(problem.seed ?? 1);
    const signed = () => 2 * rnd() - 1;
    const tm = new Float32Array(REGIONS * REG);
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < H; h++) {
        const at = t * C + h * N;
        let norm = 0;
        for (let i = 0; i < N; i++) {
          tm[R * REG + at + i] = signed();
          tm[K * REG + at + i] = signed();
          tm[V * REG + at + i] = signed();
          tm[W * REG + at + i] = Math.exp(-0.606531 * rnd());
          const kk = signed();
          tm[KK * REG + at + i] = kk;
          norm += kk * kk;
        }
        for (let i = 0; i < N; i++) {
          const kk = (tm[KK * REG + at + i] /= Math.sqrt(norm));
          tm[B * REG + at + i] = kk * rnd();
        }
      }
    }
    tm.fill(NaN, Y * REG, (Y + 1) * REG); // an output a kernel leaves unwritten shows
    this.tm0 = tm;
    const state = new Float32Array(slots * STATE);
    for (let i = 0; i < state.length; i++) state[i] = 0.1 * signed();
    this.state0 = state;

    const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST | GPUBufferUsage.COPY_SRC;
    const U = GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST;
    const make = (label: string, bytes: number, usage: number) => {
      const b = createBuffer(this.device, label, bytes, usage);
      this.buffers.push(b);
      return b;
    };
    this.tm = make('wkv tm', tm.byteLength, S);
    this.state = make('wkv state', state.byteLength, S);
    this.jobBuf = make('wkv jobs', slots * 16, S);
    const batch = make('wkv batch', 16, U);
    const layer = make('wkv layer', 16, U);
    this.uniforms = [batch, layer];
    const q = this.device.queue;
    q.writeBuffer(layer, 0, new Uint32Array([0, C, C + H * N * N, 0]));
    this.reset();
  }

  /** Sets the batch: tokens of each job, job j on slot j, their tokens one after another from token 0. */
  use(jobs: number[]): this {
    const { tokens, slots } = this.problem;
    if (!jobs.length || jobs.some((t) => !Number.isInteger(t) || t < 1)) throw new RangeError(`WKV batch: every job needs at least one token (${jobs})`);
    const total = jobs.reduce((a, b) => a + b, 0);
    if (jobs.length > slots || total > tokens) throw new RangeError(`WKV batch of ${jobs.length} jobs, ${total} tokens exceeds the problem's ${slots} slots, ${tokens} tokens`);
    const words = new Uint32Array(jobs.length * 4);
    let start = 0;
    jobs.forEach((n, j) => {
      words.set([j, start, n, 0], j * 4);
      start += n;
    });
    this.device.queue.writeBuffer(this.jobBuf, 0, words);
    this.device.queue.writeBuffer(this.uniforms[0], 0, new Uint32Array([total, jobs.length, 0, 0]));
    this.jobs = [...jobs];
    return this;
  }

  /** Puts the random inputs and initial states back (a kernel updates the state and writes y in place). */
  reset(): void {
    this.device.queue.writeBuffer(this.tm, 0, this.tm0);
    this.device.queue.writeBuffer(this.state, 0, this.state0);
  }

  private built(v: WkvVariant) {
    const name = wkvVariantName(v);
    let k = this.kernels.get(name);
    if (!k) {
      const floats = wkvScratchFloats(v, this.problem.heads, this.problem.headSize, this.problem.tokens, this.problem.slots);
      if (floats > 0 && (!this.scratch || this.scratch.size < floats * 4)) {
        this.scratch?.destroy();
        this.kernels.clear(); // groups bound the old scratch
        this.scratch = createBuffer(this.device, 'wkv chunks', floats * 4, GPUBufferUsage.STORAGE);
        this.buffers.push(this.scratch);
      }
      k = wkvPasses(v, this.consts, this.flatScan).map((p) => {
        const kernel = makeKernel(this.device, p.parts, p.constants, p.bindings);
        const group = bindGroup(this.device, kernel, [...this.uniforms, this.jobBuf, this.tm, this.state, ...(p.scratch ? [this.scratch!] : [])]);
        return { kernel, group, dispatch: p.dispatch };
      });
      this.kernels.set(name, k);
    }
    return k;
  }

  /** Builds a variant's pipeline, reporting a shader or pipeline error as a thrown one. */
  async build(v: WkvVariant): Promise<void> {
    this.device.pushErrorScope('validation');
    this.device.pushErrorScope('internal');
    this.built(v);
    const internal = await this.device.popErrorScope();
    const validation = await this.device.popErrorScope();
    if (validation || internal) throw new Error(`WKV kernel ${wkvVariantName(v)} failed to build: ${(validation ?? internal)!.message}`);
  }

  /** Records `reps` dispatches of a variant over the whole problem (each continues from the last one's state). */
  encode(v: WkvVariant, reps: number): (enc: GPUCommandEncoder) => void {
    const steps = this.built(v);
    if (!this.jobs.length) throw new Error('WKV harness: no batch set (use())');
    const T = this.jobs.reduce((a, b) => a + b, 0);
    const sized = steps.map((p) => ({ ...p, xy: p.dispatch(this.problem.heads, this.jobs.length, T) }));
    return (enc) => {
      const pass = enc.beginComputePass();
      for (let i = 0; i < reps; i++) {
        for (const p of sized) {
          pass.setPipeline(p.kernel.pipeline);
          pass.setBindGroup(0, p.group);
          pass.dispatchWorkgroups(p.xy[0], p.xy[1]);
        }
      }
      pass.end();
    };
  }

  /** One dispatch of the batch from the initial inputs: its tokens' outputs y ([tokens, C]) and its jobs' final states. */
  async run(v: WkvVariant): Promise<{ y: Float32Array; state: Float32Array }> {
    await this.build(v);
    this.reset();
    const REG = this.problem.tokens * this.consts.C;
    const yFloats = this.jobs.reduce((a, b) => a + b, 0) * this.consts.C;
    const yBytes = yFloats * 4;
    const sBytes = this.jobs.length * this.consts.STATE * 4;
    const read = this.device.createBuffer({ size: yBytes + sBytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    try {
      const enc = this.device.createCommandEncoder();
      this.encode(v, 1)(enc);
      enc.copyBufferToBuffer(this.tm, Y * REG * 4, read, 0, yBytes);
      enc.copyBufferToBuffer(this.state, 0, read, yBytes, sBytes);
      this.device.queue.submit([enc.finish()]);
      await read.mapAsync(GPUMapMode.READ);
      const all = new Float32Array(read.getMappedRange().slice(0));
      read.unmap();
      return { y: all.subarray(0, yFloats), state: all.subarray(yFloats) };
    } finally {
      read.destroy();
    }
  }

  dispose(): void {
    for (const b of this.buffers) b.destroy();
    this.kernels.clear();
  }
}

/** Largest |a − b| over two equally long arrays; NaN when either holds a non-finite value. */
export function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) throw new RangeError(`lengths differ: ${a.length} vs ${b.length}`);
  let worst = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]);
    if (!Number.isFinite(d)) return NaN;
    if (d > worst) worst = d;
  }
  return worst;
}
