// rwkv-load-state: load / unload / list initial states, save / load conversation states.
// A Buffer in msg.payload is taken as the state's bytes for "load", a string as the prompt to save.
// File paths from msg or the editor are relative to the model's state folder only (checked in
// prepareStateOperation, and again by the engine after following symlinks).

import { prepareStateOperation, runStateOperation, type StateOperationInput } from '../../shared/state-operation';
import type { NodeRedApi } from './node-red-types';
import { mergeParameters, registerWorkerNode } from './worker-node';

const STATE_KEYS = ['operation', 'name', 'source', 'file', 'prompt', 'state'] as const satisfies readonly (keyof StateOperationInput)[];

export function register(RED: NodeRedApi): void {
  registerWorkerNode(RED, 'rwkv-load-state', (config) => {
    // The editor's "name" is the node's own label; the state's name is stored as stateName.
    const { name: _label, stateName, ...rest } = config;
    const nodeConfig = { ...rest, name: stateName };
    return async (msg, ctx) => {
      const input: StateOperationInput = mergeParameters(STATE_KEYS, msg, nodeConfig);
      if (msg.payload instanceof Uint8Array && msg.source === undefined) input.source = msg.payload;
      if (typeof msg.payload === 'string' && msg.prompt === undefined) input.prompt = msg.payload;
      const op = prepareStateOperation(input);
      ctx.progress({ phase: 'prefill', text: op.operation });
      const result = await runStateOperation(ctx.engine, op);
      ctx.progress({ phase: 'done', text: `done: ${op.operation}` });
      return { ...msg, payload: result };
    };
  });
}
