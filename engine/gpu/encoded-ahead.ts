// A step's commands encoded while the GPU runs the step before. Replaying a recorded sub-pass is one native call per
// setPipeline / setBindGroup / dispatch, 5–10 µs a dispatch with Dawn (bench/RESULTS.md "Where a step goes"): at
// batch 64 that is ~530 dispatches, milliseconds of host time in every step, most of it before the GPU has work. Its
// commands depend only on the batch shape (the tokens, slots and rows change through queue.writeBuffer, which the
// queue orders before any later submit), so once calls repeat one shape — a decode loop — the next call's command
// buffers are encoded while this call waits for its read-back, and the next call only submits them.

/** One dispatch of a recorded sub-pass, or a point where what is encoded so far goes to the GPU. */
export type ReplayOp = { pipeline: GPUComputePipeline; group: GPUBindGroup; x: number; y: number; z?: number } | 'submit';

/**
 * Encodes `ops` as one command buffer per stretch between 'submit' marks. Every buffer but the last goes to `early`
 * as soon as it is finished (the caller submits it, so the GPU starts while the rest is encoded); the last is returned.
 */
export function encodeStretches(device: GPUDevice, ops: readonly ReplayOp[], early: (cb: GPUCommandBuffer) => void): GPUCommandBuffer {
  let enc = device.createCommandEncoder();
  let pass = enc.beginComputePass();
  let pipeline: GPUComputePipeline | null = null;
  for (const op of ops) {
    if (op === 'submit') {
      pass.end();
      early(enc.finish());
      enc = device.createCommandEncoder();
      pass = enc.beginComputePass();
      pipeline = null;
      continue;
    }
    if (op.pipeline !== pipeline) pass.setPipeline((pipeline = op.pipeline));
    pass.setBindGroup(0, op.group);
    pass.dispatchWorkgroups(op.x, op.y, op.z ?? 1);
  }
  pass.end();
  return enc.finish();
}

/** Every stretch of `ops` as a command buffer, in order, none submitted. */
export function encodeAll(device: GPUDevice, ops: readonly ReplayOp[]): GPUCommandBuffer[] {
  const buffers: GPUCommandBuffer[] = [];
  buffers.push(encodeStretches(device, ops, (cb) => buffers.push(cb)));
  return buffers;
}

/**
 * Holds the command buffers of one recorded sub-pass encoded ahead of its call. They belong to the recorded ops they
 * were encoded from (compared by identity): a runtime that re-records (new buffers, new settings) makes new ops, and
 * what was held for the old ones is never submitted.
 */
export class EncodedAhead<O extends object> {
  private held: { ops: O; buffers: GPUCommandBuffer[] } | null = null;
  private last: O | null = null;
  /** Calls that submitted buffers encoded ahead (tests, benchmarks). */
  hits = 0;

  /**
   * Submits every stretch of `ops` but the last — the buffers held for them, else encoded now, each submitted as soon
   * as it is finished — and returns the last, for the caller to submit with the call's own commands after it.
   */
  submitAllButLast(device: GPUDevice, ops: O & readonly ReplayOp[]): GPUCommandBuffer {
    const q = device.queue;
    const held = this.take(ops);
    if (!held) return encodeStretches(device, ops, (cb) => q.submit([cb]));
    for (let i = 0; i < held.length - 1; i++) q.submit([held[i]]);
    return held[held.length - 1];
  }

  /** The buffers held for `ops`, handed out once; null when none are. Whatever else was held is dropped. */
  take(ops: O): GPUCommandBuffer[] | null {
    const held = this.held;
    this.held = null;
    if (!held || held.ops !== ops) return null;
    this.hits++;
    return held.buffers;
  }

  /**
   * After a call of one sub-pass, while its read-back is pending: encodes `ops` for the next call when the call
   * before ran the same ones (a steady loop; a shape seen once is not worth the host time).
   */
  afterCall(ops: O, encode: () => GPUCommandBuffer[]): void {
    const steady = this.last === ops;
    this.last = ops;
    if (!steady) return;
    try {
      this.held = { ops, buffers: encode() };
    } catch {
      // A device lost meanwhile: the next call encodes its own commands, and reports the loss.
      this.clear();
    }
  }

  /** Forget the held buffers and the last call (a call of several sub-passes, profiling, disposal). */
  clear(): void {
    this.held = null;
    this.last = null;
  }
}
