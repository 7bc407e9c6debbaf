// rwkv-generate: msg.payload (prompt text, chat messages, or an object of parameters) → completion.
// Output 1: the result (msg.payload = text, or the parsed JSON with a schema; msg.rwkv = details).
// Output 2: with streaming on, one message per decoded piece of text while it is generated, then one end
// marker (payload '', rwkv.end = true, rwkv.finishReason) so a flow knows the stream is complete.

import { prepareGenerate, type GenerateInput } from '../../shared/generate-request';
import { runGeneration } from '../../shared/generation-runner';
import { ProgressTracker } from '../../shared/progress-status';
import type { NodeMessage, NodeRedApi } from './node-red-types';
import { mergeParameters, registerWorkerNode } from './worker-node';

const GENERATE_KEYS = [
  'prompt', 'messages', 'system', 'maxTokens', 'stop', 'sampler', 'samplerKind', 'temperature', 'topP', 'topK',
  'presencePenalty', 'frequencyPenalty', 'penaltyDecay', 'tau', 'mirostatTau', 'mirostatEta', 'seed', 'state',
  'grammar', 'jsonSchema', 'logprobs', 'topLogprobs', 'minP', 'repetitionPenalty', 'repetitionWindow', 'logitBias',
] as const satisfies readonly (keyof GenerateInput)[];

export function register(RED: NodeRedApi): void {
  registerWorkerNode(RED, 'rwkv-generate', (config) => {
    const stream = config.stream === true || config.stream === 'true';
    // The editor offers either a grammar or a schema, chosen by a selector; drop the unused one.
    const constraint = String(config.constraint ?? 'none');
    const nodeConfig = { ...config };
    if (constraint !== 'grammar') delete nodeConfig.grammar;
    if (constraint !== 'jsonSchema') delete nodeConfig.jsonSchema;

    return async (msg, ctx) => {
      const input: GenerateInput = mergeParameters(GENERATE_KEYS, msg, nodeConfig);
      if (typeof msg.payload === 'string' && input.prompt === undefined) input.prompt = msg.payload;
      if (Array.isArray(msg.payload) && input.messages === undefined) input.messages = msg.payload;
      const prepared = prepareGenerate(input);

      const tracker = new ProgressTracker();
      let piece = 0;
      const result = await runGeneration(ctx.engine, prepared, {
        signal: ctx.signal,
        onEvent: (event) => {
          ctx.progress(tracker.update(event));
          if (stream && event.type === 'delta' && event.text !== '') {
            const rwkv = { stream: true, index: piece++, tokens: event.tokens, ...(event.logprobs && { logprobs: event.logprobs }) };
            const chunk: NodeMessage = { ...msg, payload: event.text, rwkv };
            ctx.send([null, chunk]);
          }
        },
      });
      if (stream) ctx.send([null, { ...msg, payload: '', rwkv: { stream: true, index: piece, end: true, finishReason: result.finishReason } }]);
      const out: NodeMessage = {
        ...msg,
        payload: prepared.request.jsonSchema !== undefined ? result.json : result.text,
        rwkv: { ...result, prompt: prepared.request.prompt },
      };
      return [out, null];
    };
  });
}
