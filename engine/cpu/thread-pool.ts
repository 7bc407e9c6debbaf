// Splits the CPU backend's large kernels (matrix products, the WKV recurrence) over threads that share one
// WebAssembly memory. The thread that runs the forward pass (the leader) posts a task into a shared control
// block and takes share 0 itself; helper threads (helper-worker.ts) wake, compute their share, and count down.
// Waiting spins briefly before sleeping on a futex: a decode step issues several tasks per layer, and a sleep
// and wake-up per task would cost more than the work on small models.

import * as path from 'path';
import { Worker } from 'worker_threads';
import type { CpuKernels } from './wasm-kernels';

/** Control block words: generation, helpers still running, op, item count, then the items. */
const GEN = 0;
const PENDING = 1;
const OP = 2;
const COUNT = 3;
const HEAD = 8;
const ITEMS = 16;
const OP_MATMUL = 1;
const OP_WKV = 2;
const OP_EXIT = 3;
const OP_PREP = 4;
const OP_POST = 5;
const OP_FINCH_MIX = 6;
const OP_FINCH_POST = 7;
const OP_FINCH_WKV = 8;
const OP_RWKV4_WKV = 9;
const OP_LN_SHIFT = 10;
/** Words per matrix product: w n k kind x xs y ys T act accum panels. */
const MM_WORDS = 12;
/** Words per WKV segment: first token, token count, the slot's state address for this layer's recurrence. */
const WKV_WORDS = 3;
const MAX_ITEMS = 512;
/** Argument words of the layer norm with token shift (they run past HEAD's 8 words into the items, unused then). */
const LN_SHIFT_WORDS = 12;
/** Channels of one unit of the RWKV-4 recurrence (its channels are independent): a slot's tokens over 64 channels. */
const RWKV4_BLOCK = 64;
/**
 * Multiply-adds below which a task runs on the leader alone: waking the helpers and waiting for the slowest
 * costs microseconds, more than a small product takes (a decode step's per-layer products on small models).
 */
const MIN_PARALLEL_MACS = 1 << 20;
/** Polls before sleeping: a few microseconds (longer spins starve the other threads on a busy machine). */
const SPINS = 2000;

/** One matrix product y = act(W x) (+ y) over T tokens (see kernels.ts `matmul`). */
export interface MatmulTask {
  w: number;
  /** The matrix's storage, kernels.ts `matmul` kind: 0 f16, 1 f32, 2 int8 (a model quantised in its first layers mixes them). */
  kind: number;
  n: number;
  k: number;
  panels: number;
  x: number;
  xs: number;
  y: number;
  ys: number;
  act?: number;
  accum?: boolean;
}

export interface WkvTask {
  tm: number;
  region: number;
  C: number;
  N: number;
  H: number;
  /** Per slot of the call: [first token, token count, address of the slot's att_kv for this layer]. */
  segments: [number, number, number][];
}

/** The RWKV-5/6 WKV (kernels.ts `finchWkv`): p = [decay, u]; dynamic: RWKV-6's decay has a per-token part. */
export interface FinchWkvTask extends WkvTask {
  p: number;
  dynamic: boolean;
}

/** The RWKV-4 recurrence (kernels.ts `rwkv4Wkv`) into `out`; decay = [w, u]; segments' state: the layer's att_a. */
export interface Rwkv4WkvTask {
  tm: number;
  region: number;
  C: number;
  decay: number;
  out: number;
  segments: [number, number, number][];
}


/** The part [from, to) of `units` work items that thread `index` of `threads` takes: contiguous, sizes within one. */
function share(units: number, index: number, threads: number): [number, number] {
  return [Math.floor((units * index) / threads), Math.floor((units * (index + 1)) / threads)];
}

export function controlBlock(): SharedArrayBuffer {
  return new SharedArrayBuffer((ITEMS + MAX_ITEMS * MM_WORDS) * 4);
}

/** Computes share `index` of `threads` of the task in the control block. */
export function runShare(k: CpuKernels, ctl: Int32Array, index: number, threads: number): void {
  const op = ctl[OP];
  const count = ctl[COUNT];
  if (op === OP_MATMUL) {
    const T = ctl[HEAD + 1];
    // Each thread widens f16 and int8 panels into its own scratch.
    const scratch = ctl[HEAD + 2] + index * ctl[HEAD + 3];
    let total = 0;
    for (let i = 0; i < count; i++) total += ctl[ITEMS + i * MM_WORDS + 11];
    const [from, to] = share(total, index, threads);
    let base = 0;
    for (let i = 0; i < count && base < to; i++) {
      const o = ITEMS + i * MM_WORDS;
      const panels = ctl[o + 11];
      const p0 = Math.max(from - base, 0);
      const p1 = Math.min(to - base, panels);
      if (p0 < p1) k.matmul(ctl[o], ctl[o + 1], ctl[o + 2], ctl[o + 3], ctl[o + 4], ctl[o + 5], ctl[o + 6], ctl[o + 7], T, ctl[o + 9], ctl[o + 10], p0, p1, scratch);
      base += panels;
    }
  } else if (op === OP_PREP || op === OP_POST || op === OP_FINCH_MIX || op === OP_FINCH_POST) {
    // Per-token work, split by tokens: every region of the token range shifts by the same row offset.
    const [tm, region, T, C, N, p, io, first] = [ctl[HEAD], ctl[HEAD + 1], ctl[HEAD + 2], ctl[HEAD + 3], ctl[HEAD + 4], ctl[HEAD + 5], ctl[HEAD + 6], ctl[HEAD + 7]];
    const [from, to] = share(T, index, threads);
    if (from < to) {
      const off = from * C * 4;
      if (op === OP_PREP) k.prep(tm + off, region, to - from, C, N, p, io + off, first);
      else if (op === OP_POST) k.post(tm + off, region, to - from, C, N, p, io + off);
      else if (op === OP_FINCH_MIX) k.finchMix(tm + off, region, to - from, C, N, p, io + off, 0);
      else k.finchPost(tm + off, region, to - from, C, N, p, io + off, 0);
    }
  } else if (op === OP_LN_SHIFT) {
    // Words HEAD.. (past the 8 header words into the unused items): x T C ln xn prevAddr mix M out region scratch scratchBytes.
    const a = ctl.subarray(HEAD, HEAD + LN_SHIFT_WORDS);
    const [from, to] = share(a[1], index, threads);
    if (from < to) k.lnShiftTokens(a[0], from, to, a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10] + index * a[11]);
  } else if (op === OP_FINCH_WKV) {
    const [tm, region, C, N, H, p, dynamic] = [ctl[HEAD], ctl[HEAD + 1], ctl[HEAD + 2], ctl[HEAD + 3], ctl[HEAD + 4], ctl[HEAD + 5], ctl[HEAD + 6]];
    const units = count * H;
    const [from, to] = share(units, index, threads);
    for (let u = from; u < to; u++) {
      const o = ITEMS + Math.floor(u / H) * WKV_WORDS;
      const h = u % H;
      k.finchWkv(tm, region, C, N, h, ctl[o], ctl[o + 1], ctl[o + 2] + h * N * N * 4, p, dynamic);
    }
  } else if (op === OP_RWKV4_WKV) {
    const [tm, region, C, decay, out] = [ctl[HEAD], ctl[HEAD + 1], ctl[HEAD + 2], ctl[HEAD + 3], ctl[HEAD + 4]];
    const blocks = Math.ceil(C / RWKV4_BLOCK);
    const units = count * blocks;
    const [from, to] = share(units, index, threads);
    for (let u = from; u < to; u++) {
      const o = ITEMS + Math.floor(u / blocks) * WKV_WORDS;
      const c0 = (u % blocks) * RWKV4_BLOCK;
      k.rwkv4Wkv(tm, region, C, c0, Math.min(RWKV4_BLOCK, C - c0), ctl[o], ctl[o + 1], ctl[o + 2], decay, out);
    }
  } else if (op === OP_WKV) {
    const [tm, region, C, N, H] = [ctl[HEAD], ctl[HEAD + 1], ctl[HEAD + 2], ctl[HEAD + 3], ctl[HEAD + 4]];
    const units = count * H;
    const [from, to] = share(units, index, threads);
    for (let u = from; u < to; u++) {
      const o = ITEMS + Math.floor(u / H) * WKV_WORDS;
      const h = u % H;
      k.wkv(tm, region, C, N, h, ctl[o], ctl[o + 1], ctl[o + 2] + h * N * N * 4);
    }
  }
}

/** The leader's side: posts tasks, takes share 0, waits for the helpers. */
export class ThreadPool {
  private readonly ctl: Int32Array;
  private readonly helpers: Worker[] = [];
  private disposed = false;

  constructor(
    private readonly kernels: CpuKernels,
    memory: WebAssembly.Memory,
    module: WebAssembly.Module,
    readonly threads: number,
  ) {
    const sab = controlBlock();
    this.ctl = new Int32Array(sab);
    for (let i = 1; i < threads; i++) {
      const w = new Worker(path.join(__dirname, 'helper-worker.js'), { workerData: { memory, module, control: sab, index: i, threads } });
      w.unref();
      this.helpers.push(w);
    }
  }

  /** `scratch`: per-thread scratch of `scratchBytes` each (what the widest matrix of any kind needs, cpu-runtime.ts). */
  matmul(T: number, tasks: MatmulTask[], scratch: number, scratchBytes: number): void {
    if (tasks.length > MAX_ITEMS) throw new Error(`too many matrix products in one task: ${tasks.length}`);
    const c = this.ctl;
    c[OP] = OP_MATMUL;
    c[COUNT] = tasks.length;
    c[HEAD] = 0; // unused: each task carries its matrix's kind
    c[HEAD + 1] = T;
    c[HEAD + 2] = scratch;
    c[HEAD + 3] = scratchBytes;
    let macs = 0;
    tasks.forEach((t, i) => {
      macs += t.panels * 8 * t.k * T;
      const o = ITEMS + i * MM_WORDS;
      c[o] = t.w;
      c[o + 1] = t.n;
      c[o + 2] = t.k;
      c[o + 3] = t.kind;
      c[o + 4] = t.x;
      c[o + 5] = t.xs;
      c[o + 6] = t.y;
      c[o + 7] = t.ys;
      c[o + 9] = t.act ?? 0;
      c[o + 10] = t.accum ? 1 : 0;
      c[o + 11] = t.panels;
    });
    if (macs < MIN_PARALLEL_MACS) runShare(this.kernels, c, 0, 1);
    else this.dispatch();
  }

  /**
   * Layer norm and token shift (kernels.ts `lnShift`) over T tokens, split by tokens: a prefill's only per-token
   * work that ran on the leader alone. `scratch`: per-thread blocks of `scratchBytes` (at least C floats each),
   * where a thread recomputes the normalized token before its first.
   */
  lnShift(
    x: number, T: number, C: number, ln: number, xn: number, prevAddr: number, mix: number, M: number, out: number, region: number,
    scratch: number, scratchBytes: number,
  ): void {
    if (scratchBytes < C * 4) throw new Error(`internal: lnShift needs ${C * 4} bytes of scratch per thread, got ${scratchBytes}`);
    const c = this.ctl;
    c[OP] = OP_LN_SHIFT;
    c[COUNT] = 0;
    c.set([x, T, C, ln, xn, prevAddr, mix, M, out, region, scratch, scratchBytes], HEAD);
    if (T < 4 * (this.helpers.length + 1)) runShare(this.kernels, c, 0, 1);
    else this.dispatch();
  }

  /** RWKV-7 prep (kernels.ts `prep`) over T tokens, split by tokens; io = vfirst. */
  prep(tm: number, region: number, T: number, C: number, N: number, p: number, vfirst: number, first: number): void {
    this.tokenTask(OP_PREP, [tm, region, T, C, N, p, vfirst, first]);
  }

  /** RWKV-7 post (kernels.ts `post`) over T tokens, split by tokens; io = out. */
  post(tm: number, region: number, T: number, C: number, N: number, p: number, out: number): void {
    this.tokenTask(OP_POST, [tm, region, T, C, N, p, out, 0]);
  }

  /** RWKV-6's data-dependent token shift (kernels.ts `finchMix`) over T tokens, split by tokens. */
  finchMix(tm: number, region: number, T: number, C: number, N: number, maa: number, xn: number): void {
    this.tokenTask(OP_FINCH_MIX, [tm, region, T, C, N, maa, xn, 0]);
  }

  /** RWKV-5/6 group norm and gate (kernels.ts `finchPost`) over T tokens, split by tokens. */
  finchPost(tm: number, region: number, T: number, C: number, N: number, lnx: number, out: number): void {
    this.tokenTask(OP_FINCH_POST, [tm, region, T, C, N, lnx, out, 0]);
  }

  private tokenTask(op: number, args: number[]): void {
    const c = this.ctl;
    c[OP] = op;
    c[COUNT] = 0;
    c.set(args, HEAD);
    // A few tokens (decode) are not worth waking the helpers for.
    if (args[2] < 4 * (this.helpers.length + 1)) runShare(this.kernels, c, 0, 1);
    else this.dispatch();
  }

  /** The RWKV-7 WKV, split by (slot, head). */
  wkv(task: WkvTask): void {
    const tokens = this.postSegments(OP_WKV, [task.tm, task.region, task.C, task.N, task.H], task.segments);
    if (tokens * task.H * task.N * task.N * 4 < MIN_PARALLEL_MACS) runShare(this.kernels, this.ctl, 0, 1);
    else this.dispatch();
  }

  /** The RWKV-5/6 WKV, split by (slot, head). */
  finchWkv(task: FinchWkvTask): void {
    const tokens = this.postSegments(OP_FINCH_WKV, [task.tm, task.region, task.C, task.N, task.H, task.p, task.dynamic ? 1 : 0], task.segments);
    if (tokens * task.H * task.N * task.N * 3 < MIN_PARALLEL_MACS) runShare(this.kernels, this.ctl, 0, 1);
    else this.dispatch();
  }

  /** The RWKV-4 recurrence, split by (slot, block of 64 channels). */
  rwkv4Wkv(task: Rwkv4WkvTask): void {
    const tokens = this.postSegments(OP_RWKV4_WKV, [task.tm, task.region, task.C, task.decay, task.out], task.segments);
    // About 30 operations a channel and token, four of them exps.
    if (tokens * task.C * 32 < MIN_PARALLEL_MACS) runShare(this.kernels, this.ctl, 0, 1);
    else this.dispatch();
  }

  /** Posts a recurrence's header words and segments; returns the segments' token count. */
  private postSegments(op: number, head: number[], segments: [number, number, number][]): number {
    if (segments.length * WKV_WORDS > MAX_ITEMS * MM_WORDS) throw new Error(`too many slots in one task: ${segments.length}`);
    const c = this.ctl;
    c[OP] = op;
    c[COUNT] = segments.length;
    c.set(head, HEAD);
    segments.forEach((s, i) => c.set(s, ITEMS + i * WKV_WORDS));
    return segments.reduce((n, s) => n + s[1], 0);
  }

  private dispatch(): void {
    const c = this.ctl;
    const n = this.helpers.length;
    if (n > 0) {
      Atomics.store(c, PENDING, n);
      Atomics.add(c, GEN, 1);
      Atomics.notify(c, GEN);
    }
    runShare(this.kernels, c, 0, n + 1);
    if (n === 0) return;
    let spins = 0;
    for (;;) {
      const left = Atomics.load(c, PENDING);
      if (left === 0) return;
      if (++spins > SPINS) Atomics.wait(c, PENDING, left, 50);
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    if (this.helpers.length) {
      this.ctl[OP] = OP_EXIT;
      Atomics.add(this.ctl, GEN, 1);
      Atomics.notify(this.ctl, GEN);
    }
  }
}

/** The helper's loop (helper-worker.ts): wait for a generation, compute the share, count down. */
export function helperLoop(kernels: CpuKernels, control: SharedArrayBuffer, index: number, threads: number): void {
  const c = new Int32Array(control);
  // Generation 0 is the fresh block's: the first task is generation 1, even if posted before this thread runs.
  let gen = 0;
  for (;;) {
    let spins = 0;
    while (Atomics.load(c, GEN) === gen) {
      if (++spins > SPINS) Atomics.wait(c, GEN, gen);
    }
    gen = Atomics.load(c, GEN);
    if (c[OP] === OP_EXIT) return;
    runShare(kernels, c, index, threads);
    if (Atomics.sub(c, PENDING, 1) === 1) Atomics.notify(c, PENDING);
  }
}
