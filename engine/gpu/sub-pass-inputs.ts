// What a sub-pass's commands read, as both GPU runtimes write it before submitting them: each token's id, its slot
// (flagged where its segment starts), the segments, and which logits rows the pass leaves. queue.writeBuffer orders
// these writes before the submits that follow, so recorded commands replay unchanged from call to call.

import type { OutputMode, SlotJob } from '../types';
import type { TopRow } from '../rwkv7/top-logits';

/** One job's tokens (or a piece of them) within a sub-pass. */
export interface InputSegment {
  job: number;
  slot: number;
  tokens: ArrayLike<number>;
  from: number;
  to: number;
  /** For output 'all': the row of the segment's first token in the job's result. */
  outFrom: number;
  outMode: OutputMode;
  /** RWKV-7b: the rows the slot's cache holds before this segment's first token. */
  base?: number;
}

export interface InputSubPass {
  segments: InputSegment[];
  tokens: number;
  rows: number;
}

/** The buffers the inputs go to (shaders: `batch` uniform, `ids`, `tok`, `jobs`, `rows`). */
export interface SubPassBuffers {
  batch: GPUBuffer;
  ids: GPUBuffer;
  tok: GPUBuffer;
  jobs: GPUBuffer;
  rows: GPUBuffer;
}

/** Where a sub-pass's output rows go: full rows copied to staging ([logits row, staging row, count]), 'top' rows reduced. */
export interface SubPassOutputs {
  copies: [number, number, number][];
  topRows: TopRow[];
}

/**
 * Writes `sp`'s inputs. `jobRowBase[j]`: job j's first row in the staging buffer (full rows); `topIndex[j]`: its
 * result's index among the call's 'top' results. `withRowsBefore`: the segments' fourth word is their `base`
 * (RWKV-7b's shaders read it), else 0.
 */
export function writeSubPassInputs(
  queue: GPUQueue,
  buf: SubPassBuffers,
  sp: InputSubPass,
  jobs: readonly SlotJob[],
  jobRowBase: readonly number[],
  topIndex: readonly number[],
  withRowsBefore = false,
): SubPassOutputs {
  const ids = new Uint32Array(sp.tokens);
  const tok = new Uint32Array(sp.tokens);
  const jobBuf = new Uint32Array(sp.segments.length * 4);
  const rows = new Uint32Array(Math.max(1, sp.rows));
  const copies: [number, number, number][] = [];
  const topRows: TopRow[] = [];
  let t = 0;
  let r = 0;
  sp.segments.forEach((s, si) => {
    const start = t;
    for (let i = s.from; i < s.to; i++, t++) {
      ids[t] = s.tokens[i];
      tok[t] = s.slot | (i === s.from ? 0x80000000 : 0);
    }
    jobBuf.set([s.slot, start, s.to - s.from, withRowsBefore ? (s.base ?? 0) : 0], si * 4);
    if (s.outMode === 'last') {
      rows[r] = t - 1;
      copies.push([r, jobRowBase[s.job], 1]);
      r += 1;
    } else if (s.outMode === 'top') {
      rows[r] = t - 1;
      topRows.push({ logitsRow: r, adjust: jobs[s.job].adjust, out: topIndex[s.job] });
      r += 1;
    } else if (s.outMode === 'all') {
      for (let i = start; i < t; i++) rows[r + i - start] = i;
      copies.push([r, jobRowBase[s.job] + s.outFrom, t - start]);
      r += t - start;
    }
  });
  queue.writeBuffer(buf.batch, 0, new Uint32Array([sp.tokens, sp.segments.length, sp.rows, 0]));
  queue.writeBuffer(buf.ids, 0, ids);
  queue.writeBuffer(buf.tok, 0, tok);
  queue.writeBuffer(buf.jobs, 0, jobBuf);
  queue.writeBuffer(buf.rows, 0, rows);
  return { copies, topRows };
}
