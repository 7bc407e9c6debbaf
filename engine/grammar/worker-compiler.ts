// Runs constraint compilations in worker threads, so a hostile grammar or schema never stalls
// the event loop: each job has a wall-time deadline (the worker is terminated when it passes)
// and runs in a worker whose heap is capped (resourceLimits). Workers are reused while they
// behave, at most MAX_WORKERS at once; further jobs wait in a short bounded queue.

import * as path from 'path';
import { Worker } from 'node:worker_threads';
import type { CompiledTables, ConstraintSource } from './compile-pipeline';
import type { CompileReply, CompileRequest } from './compile-worker';
import { LIMITS } from './compile-limits';
import { ConstraintError } from './constraint-error';

export interface CompileBounds {
  /** Wall time of the compilation, ms (default LIMITS.compileMs). */
  timeoutMs?: number;
  /** Heap of the worker, MiB (default LIMITS.compileMemoryMb). */
  memoryMb?: number;
}

/** The built worker script beside this file (dist/engine/grammar/compile-worker.js). */
const WORKER_FILE = path.join(__dirname, 'compile-worker.js');
const MAX_WORKERS = 2;
const MAX_WAITING = 64;
/** An idle worker is ended after this long. */
const IDLE_MS = 30_000;

interface IdleWorker {
  worker: Worker;
  memoryMb: number;
  timer: NodeJS.Timeout;
}

let nextId = 1;
let running = 0;
const waiting: (() => void)[] = [];
const idle: IdleWorker[] = [];

/** Compiles a constraint in a worker; rejects with a ConstraintError (also on deadline or memory). */
export async function compileInWorker(source: ConstraintSource, bounds: CompileBounds = {}): Promise<CompiledTables> {
  const timeoutMs = bounds.timeoutMs ?? LIMITS.compileMs;
  const memoryMb = bounds.memoryMb ?? LIMITS.compileMemoryMb;
  if (running >= MAX_WORKERS) {
    if (waiting.length >= MAX_WAITING)
      throw new ConstraintError(`too many constraints are being compiled (${running} running, ${waiting.length} waiting); try again later`);
    await new Promise<void>((resolve) => waiting.push(resolve));
  }
  running++;
  try {
    return await runJob(source, timeoutMs, memoryMb);
  } finally {
    running--;
    waiting.shift()?.();
  }
}

function takeWorker(memoryMb: number): Worker {
  const i = idle.findIndex((w) => w.memoryMb === memoryMb);
  if (i >= 0) {
    const [w] = idle.splice(i, 1);
    clearTimeout(w.timer);
    w.worker.ref();
    return w.worker;
  }
  return new Worker(WORKER_FILE, {
    resourceLimits: { maxOldGenerationSizeMb: memoryMb, maxYoungGenerationSizeMb: Math.max(4, Math.min(32, memoryMb >> 3)), stackSizeMb: 4 },
  });
}

function parkWorker(worker: Worker, memoryMb: number): void {
  worker.unref();
  const entry: IdleWorker = {
    worker,
    memoryMb,
    timer: setTimeout(() => {
      const i = idle.indexOf(entry);
      if (i >= 0) idle.splice(i, 1);
      void worker.terminate();
    }, IDLE_MS).unref(),
  };
  idle.push(entry);
}

function runJob(source: ConstraintSource, timeoutMs: number, memoryMb: number): Promise<CompiledTables> {
  const worker = takeWorker(memoryMb);
  const id = nextId++;
  return new Promise<CompiledTables>((resolve, reject) => {
    let settled = false;
    const settle = (reuse: boolean) => {
      settled = true;
      clearTimeout(timer);
      worker.off('message', onMessage);
      worker.off('error', onError);
      worker.off('exit', onExit);
      if (reuse) parkWorker(worker, memoryMb);
      else void worker.terminate();
    };
    const onMessage = (reply: CompileReply) => {
      if (settled || reply.id !== id) return;
      settle(true);
      if (reply.ok) resolve(reply.tables);
      else reject(new ConstraintError(reply.message, reply.place));
    };
    const onError = (e: Error & { code?: string }) => {
      if (settled) return;
      settle(false);
      if (e.code === 'ERR_WORKER_OUT_OF_MEMORY')
        reject(new ConstraintError(`compiling the constraint needed more than ${memoryMb} MB of memory; simplify it`));
      else reject(new ConstraintError(`compiling the constraint failed: ${e.message}`));
    };
    const onExit = (code: number) => {
      if (settled) return;
      settle(false);
      reject(new ConstraintError(`the constraint compiler stopped unexpectedly (exit code ${code})`));
    };
    const timer = setTimeout(() => {
      if (settled) return;
      settle(false);
      reject(new ConstraintError(`compiling the constraint took longer than ${timeoutMs} ms; simplify it`));
    }, timeoutMs);
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.on('exit', onExit);
    worker.postMessage({ id, source } satisfies CompileRequest);
  });
}
