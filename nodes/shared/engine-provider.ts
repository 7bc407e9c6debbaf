// The single way the host adapters obtain an engine. Production code goes through the process-wide
// shared engine (engine/shared-engine.ts, ref-counted); tests swap in a fake through setEngineProvider
// so the n8n and Node-RED adapters can be exercised without a GPU.

import type { EngineConfig, EngineLease } from '../../engine/api';
import type { ModelConfig } from './model-config';

export type EngineProvider = (config: EngineConfig) => Promise<EngineLease>;

let override: EngineProvider | undefined;

/** Replace the engine source (tests); pass undefined to go back to the shared engine. */
export function setEngineProvider(provider: EngineProvider | undefined): void {
  override = provider;
}

/** A lease on the engine for this configuration (in this process, or a server's); the caller must release() it. */
export function acquireLease(config: ModelConfig): Promise<EngineLease> {
  if (override) return override(config);
  if (config.server) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const remote = require('../../engine/remote-engine') as typeof import('../../engine/remote-engine');
    return remote.connectRemoteEngine(config.server);
  }
  // Loaded lazily: requiring the engine pulls in WebGPU, which the editors (and the n8n node
  // description loader) never need.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const shared = require('../../engine/shared-engine') as typeof import('../../engine/shared-engine');
  return shared.acquireEngine(config);
}
