// An engine provider for the host-adapter tests that builds the real RwkvEngine on the fake CPU
// backend from the configuration the node passes: what the operator configured is then enforced by
// the engine itself, as in production (limits, queue bounds), without a GPU.

import type { EngineConfig, EngineLease } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import { byteTokenizer, FakeBackend, type FakeBackendOptions } from './fake-backend';

export function fakeBackendEngineProvider(backend: FakeBackendOptions = { slots: 2 }) {
  const engines: RwkvEngine[] = [];
  const provide = async (config: EngineConfig): Promise<EngineLease> => {
    const engine = new RwkvEngine({ backend: new FakeBackend(backend), tokenizer: byteTokenizer, config, compileConstraint: null });
    engines.push(engine);
    return { engine, release: () => engine.close() };
  };
  return { provide, engines };
}
