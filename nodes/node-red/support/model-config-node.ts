// The rwkv-model config node: parses the model configuration and holds a lease on the shared engine
// from deploy until the node is closed (redeploy, removal, shutdown), so the model is loaded once
// and every worker node using this config shares it.

import type { Engine, EngineLease } from '../../../engine/api';
import { acquireLease } from '../../shared/engine-provider';
import { parseModelConfig, type ModelConfig } from '../../shared/model-config';
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
    let parsed: ModelConfig | undefined;
    try {
      // The server's API key is a credential: Node-RED keeps it out of the flow file.
      parsed = parseModelConfig({ ...config, apiKey: node.credentials?.apiKey }, RED.settings?.userDir);
      lease = acquireLease(parsed);
    } catch (err) {
      lease = Promise.reject(err);
    }
    // Logged once here; each worker node reports it again against the message that needed it.
    lease.then(
      ({ engine: { modelInfo: m } }) =>
        node.log(
          `${parsed?.server ? `using the rwkv-flow server at ${parsed.server.url}` : `loaded ${String(config.modelPath || 'the bundled default model')}`}: RWKV ${m.version}, ${m.nLayer} layers × ${m.nEmbd}, on ${m.adapter}`,
        ),
      (err: unknown) => node.error(`rwkv-model: ${(err as Error).message}`),
    );

    node.getEngine = async () => {
      const tried = lease!;
      try {
        return (await tried).engine;
      } catch (err) {
        // A server that was not reachable at deploy (started after Node-RED) is tried again by the next
        // message, once for all messages waiting; a model that failed to load here is not reloaded per message.
        if (!parsed?.server || !lease) throw err;
        if (lease === tried) {
          lease = acquireLease(parsed);
          lease.catch(() => undefined); // the message that needed it reports it
        }
        return (await lease).engine;
      }
    };

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
