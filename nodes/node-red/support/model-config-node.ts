// The rwkv-model config node: parses the model configuration and holds a lease on the shared engine
// from deploy until the node is closed (redeploy, removal, shutdown), so the model is loaded once
// and every worker node using this config shares it.

import type { Engine, EngineLease } from '../../../engine/api';
import { acquireLease } from '../../shared/engine-provider';
import { parseModelConfig } from '../../shared/model-config';
import type { NodeRedApi, RuntimeNode } from './node-red-types';

export interface ModelConfigNode extends RuntimeNode {
  /** The engine once the model is loaded; rejects with the configuration or load error. */
  getEngine(): Promise<Engine>;
}

export function registerModelConfigNode(RED: NodeRedApi): void {
  RED.nodes.registerType('rwkv-model', function (this: RuntimeNode, config: Record<string, unknown>) {
    RED.nodes.createNode(this, config);
    const node = this as ModelConfigNode;
    let lease: Promise<EngineLease> | undefined;
    try {
      // The server's API key is a credential: Node-RED keeps it out of the flow file.
      lease = acquireLease(parseModelConfig({ ...config, apiKey: node.credentials?.apiKey }));
    } catch (err) {
      lease = Promise.reject(err);
    }
    // Logged once here; each worker node reports it again against the message that needed it.
    lease.catch((err: unknown) => node.error(`rwkv-model: ${(err as Error).message}`));

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
  }, MODEL_CREDENTIALS);
}

/** Secrets of the config node, which Node-RED stores apart from the flow. */
const MODEL_CREDENTIALS = { credentials: { apiKey: { type: 'password' as const } } };
