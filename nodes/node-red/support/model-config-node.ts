// The rwkv-model config node: parses the model configuration and holds a lease on the shared engine
// from deploy until the node is closed (redeploy, removal, shutdown), so the model is loaded once
// and every worker node using this config shares it.

import type { Engine, EngineLease } from '../../../engine/api';
import { acquireLease } from '../../shared/engine-provider';
import { parseModelConfig } from '../../shared/model-config';
import { listModelFiles } from './model-files';
import type { NodeRedApi, RuntimeNode } from './node-red-types';

export interface ModelConfigNode extends RuntimeNode {
  /** The engine once the model is loaded; rejects with the configuration or load error. */
  getEngine(): Promise<Engine>;
}

export function registerModelConfigNode(RED: NodeRedApi): void {
  // The editor's model picker (rwkv-model.html) asks for the model files in the models folder.
  const canRead = RED.auth?.needsPermission('rwkv-model.read') ?? ((_req: unknown, _res: unknown, next: () => void) => next());
  RED.httpAdmin?.get('/rwkv-flow/models', canRead, (_req, res) => {
    void listModelFiles(RED.settings?.userDir).then((list) => res.json(list));
  });

  RED.nodes.registerType('rwkv-model', function (this: RuntimeNode, config: Record<string, unknown>) {
    RED.nodes.createNode(this, config);
    const node = this as ModelConfigNode;
    let lease: Promise<EngineLease> | undefined;
    try {
      lease = acquireLease(parseModelConfig(config, RED.settings?.userDir));
    } catch (err) {
      lease = Promise.reject(err);
    }
    // Logged once here; each worker node reports it again against the message that needed it.
    lease.then(
      ({ engine: { modelInfo: m } }) =>
        node.log(`loaded ${String(config.modelPath || 'the bundled default model')}: RWKV ${m.version}, ${m.nLayer} layers × ${m.nEmbd}, on ${m.adapter}`),
      (err: unknown) => node.error(`rwkv-model: ${(err as Error).message}`),
    );

    node.getEngine = async () => (await lease!).engine;

    node.on('close', (_removed, done) => {
      const held = lease;
      lease = undefined;
      node.getEngine = () => Promise.reject(new Error('rwkv-model configuration was closed'));
      held!
        .then((l) => l.release())
        .catch(() => undefined) // a failed load holds nothing to release
        .finally(done);
    });
  });
}
