// rwkv-embed: msg.payload text → msg.payload number[]; an array of texts → an array of vectors,
// all submitted at once so the engine batches them.

import { prepareEmbed, runEmbed, type EmbedInput } from '../../shared/embed-request';
import { ParameterError } from '../../shared/parameter-error';
import type { NodeRedApi } from './node-red-types';
import { mergeParameters, registerWorkerNode } from './worker-node';

const EMBED_KEYS = ['text', 'layer', 'state', 'pooling', 'normalize'] as const satisfies readonly (keyof EmbedInput)[];

export function register(RED: NodeRedApi): void {
  registerWorkerNode(RED, 'rwkv-embed', (config) => async (msg, ctx) => {
    const params = mergeParameters(EMBED_KEYS, msg, config);
    const texts = Array.isArray(msg.payload) ? msg.payload : [params.text ?? msg.payload];
    if (texts.length === 0) throw new ParameterError('payload', 'is an empty array');
    const prepared = texts.map((text, i) => {
      try {
        return prepareEmbed({ ...params, text });
      } catch (err) {
        if (err instanceof ParameterError && Array.isArray(msg.payload)) throw new ParameterError(`payload[${i}]`, err.message);
        throw err;
      }
    });
    ctx.progress({ phase: 'prefill', text: `embedding ${prepared.length} text${prepared.length > 1 ? 's' : ''}` });
    const results = await Promise.all(prepared.map((p) => runEmbed(ctx.engine, p, ctx.signal)));
    ctx.progress({ phase: 'done', text: `done: ${results.length} × ${results[0].dimensions}` });
    const payload = Array.isArray(msg.payload) ? results.map((r) => r.embedding) : results[0].embedding;
    return { ...msg, payload, dimensions: results[0].dimensions };
  });
}
