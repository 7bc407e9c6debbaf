// A helper thread of the CPU backend: instantiates the kernels over the shared memory and computes its share
// of every task the leader posts (thread-pool.ts), until told to exit.

import { workerData } from 'worker_threads';
import { helperLoop } from './thread-pool';
import { instantiateKernels } from './wasm-kernels';

// `module` would shadow CommonJS's own binding (a SyntaxError that Node then retries as ESM).
const { memory, module: kernelModule, control, index, threads } = workerData as {
  memory: WebAssembly.Memory;
  module: WebAssembly.Module;
  control: SharedArrayBuffer;
  index: number;
  threads: number;
};
helperLoop(instantiateKernels(memory, kernelModule), control, index, threads);
