// One engine per model and settings per process, shared by every flow node. The registry hangs off a global
// symbol so two copies of this package (n8n and Node-RED can each bundle one) share engines.
//
// Engines are keyed by the model file AND every other setting (engine-config.ts's engineConfigKey, generic over
// the fields): two config nodes or credentials naming one model with different settings (state folder, batch,
// cache...) get two engines, each with exactly the settings its users configured, instead of the last one to
// acquire silently reconfiguring the other's engine. The alternative, refusing the second config with a
// conflict error, would break redeploys: Node-RED closes the old config node and n8n's engine keeper releases
// its idle lease in their own time, so the edited config often acquires while the old one still holds its
// lease. With the key, that overlap costs a second engine for a moment and nothing else; an unchanged config
// redeployed shares the engine it already has. A config is checked fully before the registry is touched, so a
// bad one fails alone and never closes an engine someone else is serving from.
//
// Engines are created on first acquire, reference counted, and closed (after their running requests) when the
// last lease is released. An engine whose GPU failed (device lost, uncaptured WebGPU error) reports `broken`; the
// next use of any of its leases builds a new one in its place, and the leases follow it.

import type { ChooseResult, EmbedPooling, Engine, EngineConfig, EngineLease, GenerateEvent, GenerateRequest, StateInfo } from './api';
import { EngineClosedError } from './errors';
import type { EngineMetrics } from './engine';
import type { InitialState } from './initial-states';
import { checkEngineConfig, engineConfigKey } from './engine-config';
import { createEngine, resolveModelPath } from './engine-factory';

export interface ClosableEngine extends Engine {
  close(opts?: { drain?: boolean }): Promise<void>;
  /** Non-null once the engine can no longer serve (GPU device lost or in error); it is then rebuilt on next use. */
  readonly broken?: string | null;
  /** Loaded named states, carried from a broken engine to the one rebuilt in its place. */
  loadedStates?(): InitialState[];
  adoptStates?(states: readonly InitialState[]): void;
  /** Counters and load for a server's /metrics (RwkvEngine has them). */
  metrics?(): EngineMetrics;
}

export type EngineFactory = (config: EngineConfig) => Promise<ClosableEngine>;

interface Entry {
  config: EngineConfig;
  factory: EngineFactory;
  engine: Promise<ClosableEngine>;
  /** Set once the engine has loaded. */
  resolved?: ClosableEngine;
  refs: number;
}

interface Registry {
  entries: Map<string, Entry>;
}

const REGISTRY_KEY = Symbol.for('rwkv-flow.shared-engines.v1');

function registry(): Registry {
  const g = globalThis as unknown as Record<symbol, Registry | undefined>;
  return (g[REGISTRY_KEY] ??= { entries: new Map() });
}

function modelKey(config: EngineConfig, factory: EngineFactory): string {
  // Custom factories (tests) get their own namespace so they never share with real engines.
  return factory === createEngine ? resolveModelPath(config) : `custom:${config.modelPath ?? ''}`;
}

/** The registry key: the model file and every setting that changes how its engine behaves. */
function entryKey(config: EngineConfig, factory: EngineFactory): string {
  checkEngineConfig(config);
  return `${modelKey(config, factory)}\n${engineConfigKey(config)}`;
}

/** Take a lease on the engine for `config` (model and settings), creating or rebuilding it as needed. */
export async function acquireEngine(config: EngineConfig = {}, factory: EngineFactory = createEngine): Promise<EngineLease> {
  // Checked before the registry is looked at: a bad config throws here and disturbs no engine.
  const key = entryKey(config, factory);
  const reg = registry();
  let entry = reg.entries.get(key);
  if (!entry) entry = replaceEntry(key, config, factory);
  else entry = rebuildIfBroken(key) ?? entry;
  entry.refs++;
  const mine = entry;
  let engine: ClosableEngine;
  try {
    engine = await mine.engine;
  } catch (e) {
    mine.refs--;
    if (reg.entries.get(key) === mine) reg.entries.delete(key);
    throw e;
  }
  const handle = new EngineHandle(key, engine);
  let released = false;
  return {
    engine: handle,
    release: async () => {
      if (released) return;
      released = true;
      handle.release();
      const current = reg.entries.get(key);
      if (!current) return;
      current.refs--;
      if (current.refs <= 0) {
        reg.entries.delete(key);
        await (await current.engine).close({ drain: true });
      }
    },
  };
}

/** Installs a new engine for `key`, taking over the previous (broken) one's leases; the previous one closes. */
function replaceEntry(key: string, config: EngineConfig, factory: EngineFactory): Entry {
  const reg = registry();
  const previous = reg.entries.get(key);
  // A copy: a caller changing its config object later must not change what a rebuild loads.
  const own = { ...config };
  // States loaded into a broken engine live on in its replacement: flows that loaded them at deploy keep working.
  const carried = previous?.resolved?.loadedStates?.() ?? [];
  const engine = factory(own).then((e) => {
    if (carried.length) e.adoptStates?.(carried);
    return e;
  });
  const entry: Entry = { config: own, factory, engine, refs: previous?.refs ?? 0 };
  reg.entries.set(key, entry);
  entry.engine.then((e) => (entry.resolved = e), () => {});
  if (previous) void previous.engine.then((e) => e.close({ drain: true }), () => {});
  return entry;
}

/** A new engine in place of one whose GPU failed, so the flows recover without a restart. */
function rebuildIfBroken(key: string): Entry | null {
  const entry = registry().entries.get(key);
  if (!entry?.resolved?.broken) return null;
  return replaceEntry(key, entry.config, entry.factory);
}

/** Number of engines alive in this process (for tests and diagnostics). */
export function sharedEngineCount(): number {
  return registry().entries.size;
}

/** A lease's view of the engine: follows reloads, refuses use after release. */
class EngineHandle implements Engine {
  private released = false;

  constructor(
    private readonly key: string,
    private last: ClosableEngine,
  ) {}

  get modelInfo(): Engine['modelInfo'] {
    return this.last.modelInfo;
  }

  release(): void {
    this.released = true;
  }

  /** The current engine's counters (zero after a rebuild), or null when it has none. */
  metrics(): EngineMetrics | null {
    return this.loaded().metrics?.() ?? null;
  }

  private async current(): Promise<ClosableEngine> {
    if (this.released) throw new EngineClosedError('this engine lease was released');
    const entry = rebuildIfBroken(this.key) ?? registry().entries.get(this.key);
    if (!entry) throw new EngineClosedError();
    this.last = await entry.engine;
    return this.last;
  }

  generate(req: GenerateRequest, opts?: { signal?: AbortSignal }): AsyncIterable<GenerateEvent> {
    const entry = rebuildIfBroken(this.key) ?? registry().entries.get(this.key);
    // Fast path: the engine is loaded and current, so validation errors throw right here.
    if (!this.released && entry?.resolved) return (this.last = entry.resolved).generate(req, opts);
    const self = this;
    return (async function* () {
      yield* (await self.current()).generate(req, opts);
    })();
  }

  async choose(prompt: string, choices: string[], opts?: { calibrate?: boolean; state?: string; signal?: AbortSignal }): Promise<ChooseResult> {
    return (await this.current()).choose(prompt, choices, opts);
  }

  async embed(text: string, opts?: { layer?: number; state?: string; pooling?: EmbedPooling; signal?: AbortSignal }): Promise<Float32Array> {
    return (await this.current()).embed(text, opts);
  }

  async loadState(name: string, source: string | Uint8Array): Promise<StateInfo> {
    return (await this.current()).loadState(name, source);
  }

  unloadState(name: string): void {
    this.loaded().unloadState(name);
  }

  listStates(): StateInfo[] {
    return this.loaded().listStates();
  }

  /** The current engine when it has loaded, else the last one this lease used. */
  private loaded(): ClosableEngine {
    if (this.released) throw new EngineClosedError('this engine lease was released');
    const resolved = registry().entries.get(this.key)?.resolved;
    if (resolved) this.last = resolved;
    return this.last;
  }

  async saveConversation(prompt: string, file: string, opts?: { state?: string }): Promise<{ bytes: number; tokens: number }> {
    return (await this.current()).saveConversation(prompt, file, opts);
  }

  async loadConversation(file: string, name: string): Promise<StateInfo> {
    return (await this.current()).loadConversation(file, name);
  }
}
