// An engine provider for the host-adapter tests that builds the real RwkvEngine on the fake CPU
// backend from the configuration the node passes: what the operator configured is then enforced by
// the engine itself, as in production (limits, queue bounds), without a GPU.

import type { EngineConfig, EngineLease } from '../engine/api';
import { RwkvEngine } from '../engine/engine';
import { byteTokenizer, FakeBackend, type FakeBackendOptions } from './fake-backend';

/** Token of 'a': the scripted backend makes it overwhelmingly likely, so a generation never ends early on end-of-text. */
const A = 'a'.charCodeAt(0) + 1;

export function fakeBackendEngineProvider(backend: Partial<FakeBackendOptions> = {}) {
  const engines: RwkvEngine[] = [];
  const options: FakeBackendOptions = { slots: 2, script: () => A, ...backend };
  const provide = async (config: EngineConfig): Promise<EngineLease> => {
    const engine = new RwkvEngine({ backend: new FakeBackend(options), tokenizer: byteTokenizer, config, compileConstraint: null });
    engines.push(engine);
    return { engine, release: () => engine.close() };
  };
  return { provide, engines };
}
