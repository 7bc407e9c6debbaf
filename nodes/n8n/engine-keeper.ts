// n8n runs a node's execute() once per workflow execution, and the shared engine unloads its model
// when the last lease is released. To avoid reloading the model for every execution, the n8n nodes
// keep their lease for a while after the last use and release it once idle.

import type { Engine, EngineConfig, EngineLease } from '../../engine/api';
import { acquireLease } from '../shared/engine-provider';

/** How long an unused model stays loaded; RWKV_FLOW_IDLE_SECONDS overrides (0 = release at once). */
export function idleMilliseconds(): number {
  const env = process.env.RWKV_FLOW_IDLE_SECONDS;
  const seconds = env !== undefined && env.trim() !== '' ? Number(env) : 600;
  if (!Number.isFinite(seconds) || seconds < 0) throw new Error(`RWKV_FLOW_IDLE_SECONDS must be a number ≥ 0, got ${JSON.stringify(env)}`);
  return seconds * 1000;
}

interface Kept {
  lease: Promise<EngineLease>;
  users: number;
  timer?: NodeJS.Timeout;
}

const kept = new Map<string, Kept>();

function releaseKept(key: string, entry: Kept): Promise<void> {
  if (kept.get(key) === entry) kept.delete(key);
  clearTimeout(entry.timer);
  return entry.lease.then((l) => l.release(), () => undefined);
}

/** A use of a kept engine; call done() when finished so the idle countdown can start. */
export interface EngineUse {
  engine: Engine;
  done(): Promise<void>;
}

/** The engine for this configuration, loading it if needed and keeping it warm after the last use. */
export async function useEngine(config: EngineConfig): Promise<EngineUse> {
  const key = JSON.stringify(config);
  let entry = kept.get(key);
  if (!entry) {
    // An edited credential names the same model with other settings: the engine kept for the old settings
    // would hold a second copy of the model until its idle timer ran out, so an idle one goes now.
    await releaseIdleOfModel(config.modelPath, key);
    entry = kept.get(key);
  }
  if (!entry) {
    entry = { lease: acquireLease(config), users: 0 };
    kept.set(key, entry);
  }
  const mine = entry;
  mine.users++;
  clearTimeout(mine.timer);
  const done = async () => {
    mine.users--;
    if (mine.users > 0 || kept.get(key) !== mine) return;
    const idle = idleMilliseconds();
    if (idle === 0) return releaseKept(key, mine);
    mine.timer = setTimeout(() => void releaseKept(key, mine), idle);
    mine.timer.unref(); // a warm model must not keep the process alive
  };
  try {
    return { engine: (await mine.lease).engine, done: once(done) };
  } catch (err) {
    // A failed load is not kept: the next execution tries again (the file may have appeared).
    if (kept.get(key) === mine) kept.delete(key);
    await done();
    throw err;
  }
}

/** Releases the kept engines of this model (same modelPath) under other settings that no execution uses. */
async function releaseIdleOfModel(modelPath: string | undefined, except: string): Promise<void> {
  const stale = [...kept].filter(([key, e]) => key !== except && e.users === 0 && (JSON.parse(key) as EngineConfig).modelPath === modelPath);
  await Promise.all(stale.map(([key, e]) => releaseKept(key, e)));
}

/** Runs fn with the engine for this configuration (see useEngine). */
export async function withEngine<T>(config: EngineConfig, fn: (engine: Engine) => Promise<T>): Promise<T> {
  const use = await useEngine(config);
  try {
    return await fn(use.engine);
  } finally {
    await use.done();
  }
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let called: Promise<void> | undefined;
  return () => (called ??= fn());
}

/** Releases every kept lease that no execution is using (shutdown, tests). */
export async function releaseIdleEngines(): Promise<void> {
  await Promise.all([...kept].filter(([, e]) => e.users === 0).map(([key, e]) => releaseKept(key, e)));
}

/** Configurations currently kept loaded (diagnostics, tests). */
export function keptEngineCount(): number {
  return kept.size;
}
