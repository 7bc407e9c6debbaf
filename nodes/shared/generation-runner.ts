// Drives one engine.generate() stream to its end and turns it into the output both hosts emit.
// Progress events are passed to the caller (status text, token streaming) as they arrive.

import type { Engine, GenerateEvent, TokenLogprob } from '../../engine/api';
import type { PreparedGenerate } from './generate-request';

type StopEvent = Extract<GenerateEvent, { type: 'stop' }>;

export interface GenerationResult {
  text: string;
  /** Parsed output when a JSON schema constrained the generation. */
  json?: unknown;
  finishReason: StopEvent['reason'];
  usage: { promptTokens: number; completionTokens: number; totalTokens: number };
  timing: StopEvent['timing'];
  /** With logprobs requested: each reported token's log-probability (and alternatives), and their mean. */
  logprobs?: TokenLogprob[];
  meanLogprob?: number;
}

/** The generation was cancelled (execution cancelled, node closed, flow redeployed). */
export class GenerationAbortedError extends Error {
  constructor() {
    super('generation cancelled');
    this.name = 'AbortError';
  }
}

/** A JSON-schema generation ended before the JSON was complete (usually maxTokens too small). */
export class IncompleteJsonError extends Error {
  constructor(readonly reason: string, readonly text: string) {
    super(`generation stopped (${reason}) before the JSON output was complete; raise maxTokens. Output so far: ${text.slice(0, 200)}`);
    this.name = 'IncompleteJsonError';
  }
}

export interface RunOptions {
  signal?: AbortSignal;
  onEvent?: (event: GenerateEvent) => void;
}

export async function runGeneration(engine: Engine, prepared: PreparedGenerate, opts: RunOptions = {}): Promise<GenerationResult> {
  const { request, chat } = prepared;
  if (opts.signal?.aborted) throw new GenerationAbortedError();
  let stop: StopEvent | undefined;
  const logprobs: TokenLogprob[] = [];
  for await (const event of engine.generate(request, { signal: opts.signal })) {
    opts.onEvent?.(event);
    if (event.type === 'stop') stop = event;
    if (event.type === 'delta' && event.logprobs) logprobs.push(...event.logprobs);
  }
  if (!stop) throw new Error('engine ended the generation without a stop event');
  if (stop.reason === 'abort') throw new GenerationAbortedError();

  const result: GenerationResult = {
    text: chat ? stop.text.trim() : stop.text,
    finishReason: stop.reason,
    usage: {
      promptTokens: stop.promptTokens,
      completionTokens: stop.completionTokens,
      totalTokens: stop.promptTokens + stop.completionTokens,
    },
    timing: stop.timing,
  };
  if (stop.meanLogprob !== undefined) {
    result.logprobs = logprobs;
    result.meanLogprob = stop.meanLogprob;
  }
  if (request.jsonSchema !== undefined) result.json = stop.json !== undefined ? stop.json : parseJsonOutput(stop);
  return result;
}

function parseJsonOutput(stop: StopEvent): unknown {
  try {
    return JSON.parse(stop.text);
  } catch {
    throw new IncompleteJsonError(stop.reason, stop.text);
  }
}
