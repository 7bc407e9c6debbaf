// The compute thread of the CPU backend: runs a version's forward pass (cpu-passes.ts) on the kernels over the
// shared memory, leading the helper threads, so the host's event loop never waits on a forward pass.
// Messages: {type:'run', passes, rows, tops} → {type:'done', logits (transferred), tops} or {type:'error', message};
// {type:'dispose'} stops the helpers and ends the thread. A pass whose state grows (RWKV-7b) keeps those rows here
// (GrowingRows): {type:'rows-read', slot, fixedAt, fixedFloats} → {type:'rows', rows: the whole snapshot, the slot's
// fixed part (read from the shared memory at byte fixedAt) then its rows} (transferred); 'rows-write' {slot, rows},
// 'rows-copy' {from, to}, 'rows-reset' {slot} answer nothing (the host orders them with the calls).

import { parentPort, workerData } from 'worker_threads';
import { ThreadPool } from './thread-pool';
import { instantiateKernels } from './wasm-kernels';
import type { CpuBaseLayout, CpuSubPass } from './cpu-forward-base';
import type { CpuCommonWeights } from './cpu-weight-writer';
import { CPU_PASSES, type CpuPassName } from './cpu-passes';
import type { GrowingRows } from './growing-rows';
import type { LogitAdjust, TopLogits } from '../types';

// `module` would shadow CommonJS's own binding (a SyntaxError that Node then retries as ESM).
const { memory, module: kernelModule, pass, layout, weights, threads } = workerData as {
  memory: WebAssembly.Memory;
  module: WebAssembly.Module;
  pass: CpuPassName;
  layout: CpuBaseLayout;
  weights: CpuCommonWeights;
  threads: number;
};
const kernels = instantiateKernels(memory, kernelModule);
const pool = new ThreadPool(kernels, memory, kernelModule, threads);
// Each pass reads its own layout and weights (its planner made both); the registry cannot say which goes with which.
const Pass = CPU_PASSES[pass] as new (...args: unknown[]) => {
  run(passes: CpuSubPass[], rows: number, tops: (LogitAdjust | undefined)[]): { logits: Float32Array; tops: TopLogits[] };
  readonly growing: GrowingRows | null;
};
const forward = new Pass(memory, kernels, pool, layout, weights);

type RowsMessage =
  | { type: 'rows-read'; slot: number; fixedAt: number; fixedFloats: number }
  | { type: 'rows-write'; slot: number; rows: Float32Array }
  | { type: 'rows-copy'; from: number; to: number }
  | { type: 'rows-reset'; slot: number };

/** A message about the growing rows; a pass without them never gets one (the host knows its stateRowFloats is 0). */
function onRows(msg: RowsMessage) {
  const g = forward.growing;
  if (!g) throw new Error(`internal: ${msg.type} for a state that does not grow`);
  if (msg.type === 'rows-read') {
    // The host's event loop copies none of a snapshot that grows with the context: it is put together here.
    const rows = g.read(msg.slot);
    const snapshot = new Float32Array(msg.fixedFloats + rows.length);
    snapshot.set(new Float32Array(memory.buffer, msg.fixedAt, msg.fixedFloats));
    snapshot.set(rows, msg.fixedFloats);
    parentPort!.postMessage({ type: 'rows', rows: snapshot }, [snapshot.buffer as ArrayBuffer]);
  } else if (msg.type === 'rows-write') g.write(msg.slot, msg.rows);
  else if (msg.type === 'rows-copy') g.copy(msg.from, msg.to);
  else g.reset(msg.slot);
}

parentPort!.on('message', (msg: { type: 'run'; passes: CpuSubPass[]; rows: number; tops: (LogitAdjust | undefined)[] } | { type: 'dispose' } | RowsMessage) => {
  if (msg.type === 'dispose') {
    pool.dispose();
    parentPort!.close();
    return;
  }
  if (msg.type !== 'run') {
    try {
      onRows(msg);
    } catch (e) {
      if (msg.type === 'rows-read') parentPort!.postMessage({ type: 'error', message: e instanceof Error ? e.message : String(e) });
      else throw e;
    }
    return;
  }
  try {
    const { logits, tops } = forward.run(msg.passes, msg.rows, msg.tops);
    parentPort!.postMessage({ type: 'done', logits, tops }, [logits.buffer as ArrayBuffer]);
  } catch (e) {
    parentPort!.postMessage({ type: 'error', message: e instanceof Error ? e.message : String(e) });
  }
});
parentPort!.postMessage({ type: 'ready' });
