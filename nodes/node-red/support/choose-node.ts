// rwkv-choose: rank fixed choices as continuations of a prompt. msg.payload in: the prompt (or an
// object with prompt/choices); out: the best choice, with the full ranking in msg.ranking.

import { prepareChoose, runChoose, type ChooseInput } from '../../shared/choose-request';
import type { NodeRedApi } from './node-red-types';
import { mergeParameters, registerWorkerNode } from './worker-node';

const CHOOSE_KEYS = ['prompt', 'choices', 'calibrate', 'state'] as const satisfies readonly (keyof ChooseInput)[];

export function register(RED: NodeRedApi): void {
  registerWorkerNode(RED, 'rwkv-choose', (config) => async (msg, ctx) => {
    const input: ChooseInput = mergeParameters(CHOOSE_KEYS, msg, config);
    if (typeof msg.payload === 'string' && input.prompt === undefined) input.prompt = msg.payload;
    const prepared = prepareChoose(input);
    ctx.progress({ phase: 'prefill', text: `ranking ${prepared.choices.length} choices` });
    const result = await runChoose(ctx.engine, prepared, ctx.signal);
    ctx.progress({ phase: 'done', text: `done: ${JSON.stringify(result.choice).slice(0, 40)}` });
    return { ...msg, payload: result.choice, ranking: result.ranking, rwkv: { index: result.index } };
  });
}
