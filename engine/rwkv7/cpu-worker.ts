// The compute thread of the CPU backend: runs the RWKV-7 forward pass (cpu-forward.ts) on the kernels over the
// shared memory, leading the helper threads, so the host's event loop never waits on a forward pass.
// Messages: {type:'run', passes, rows} → {type:'done', logits} (transferred) or {type:'error', message};
// {type:'dispose'} stops the helpers and ends the thread.

import { parentPort, workerData } from 'worker_threads';
import { ThreadPool } from '../cpu/thread-pool';
import { instantiateKernels } from '../cpu/wasm-kernels';
import { Rwkv7CpuForward, type CpuLayout, type CpuSubPass } from './cpu-forward';
import type { CpuWeights } from './cpu-weights';

// `module` would shadow CommonJS's own binding (a SyntaxError that Node then retries as ESM).
const { memory, module: kernelModule, layout, weights, threads } = workerData as {
  memory: WebAssembly.Memory;
  module: WebAssembly.Module;
  layout: CpuLayout;
  weights: CpuWeights;
  threads: number;
};
const kernels = instantiateKernels(memory, kernelModule);
const pool = new ThreadPool(kernels, memory, kernelModule, threads);
const forward = new Rwkv7CpuForward(memory, kernels, pool, layout, weights);

parentPort!.on('message', (msg: { type: 'run'; passes: CpuSubPass[]; rows: number } | { type: 'dispose' }) => {
  if (msg.type === 'dispose') {
    pool.dispose();
    parentPort!.close();
    return;
  }
  try {
    const logits = forward.run(msg.passes, msg.rows);
    parentPort!.postMessage({ type: 'done', logits }, [logits.buffer as ArrayBuffer]);
  } catch (e) {
    parentPort!.postMessage({ type: 'error', message: e instanceof Error ? e.message : String(e) });
  }
});
parentPort!.postMessage({ type: 'ready' });
