// The compute thread of the CPU backend: runs a version's forward pass (cpu-passes.ts) on the kernels over the
// shared memory, leading the helper threads, so the host's event loop never waits on a forward pass.
// Messages: {type:'run', passes, rows} → {type:'done', logits} (transferred) or {type:'error', message};
// {type:'dispose'} stops the helpers and ends the thread.

import { parentPort, workerData } from 'worker_threads';
import { ThreadPool } from './thread-pool';
import { instantiateKernels } from './wasm-kernels';
import type { CpuBaseLayout, CpuSubPass } from './cpu-forward-base';
import type { CpuCommonWeights } from './cpu-weight-writer';
import { CPU_PASSES, type CpuPassName } from './cpu-passes';

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
const Pass = CPU_PASSES[pass] as new (...args: unknown[]) => { run(passes: CpuSubPass[], rows: number): Float32Array };
const forward = new Pass(memory, kernels, pool, layout, weights);

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
