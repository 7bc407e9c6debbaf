// RWKV as a chat model for n8n's AI nodes (AI Agent, Basic LLM Chain, ...): the SDK's ChatModel
// contract on top of the shared engine. Messages become RWKV's "User: ...\n\nAssistant:" dialogue.

import * as path from 'path';
import type { EngineConfig, GenerateEvent } from '../../engine/api';
import { prepareGenerate, type GenerateInput } from '../shared/generate-request';
import { runGeneration, type GenerationResult } from '../shared/generation-runner';
import { ParameterError } from '../shared/parameter-error';
import type { ChatModel, ChatModelConfig, FinishReason, GenerateResult, Message, StreamChunk, Tool } from './ai-node-sdk';
import { useEngine, withEngine } from './engine-keeper';

/** Sampling defaults set on the node; per-call config (from the AI node) overrides them. */
export type ChatDefaults = Omit<GenerateInput, 'prompt' | 'messages' | 'grammar' | 'jsonSchema'>;

export class RwkvChatModel implements ChatModel {
  readonly provider = 'rwkv';
  readonly modelId: string;

  constructor(
    private readonly engineConfig: EngineConfig,
    private readonly defaults: ChatDefaults = {},
  ) {
    this.modelId = engineConfig.modelPath ? path.basename(engineConfig.modelPath) : 'rwkv-bundled';
  }

  async generate(messages: Message[], config: ChatModelConfig = {}): Promise<GenerateResult> {
    const prepared = prepareGenerate(this.input(messages, config));
    const result = await withEngine(this.engineConfig, (engine) => runGeneration(engine, prepared, { signal: signalOf(config) }));
    return {
      finishReason: finishReason(result.finishReason),
      usage: result.usage,
      message: { role: 'assistant', content: [{ type: 'text', text: result.text }] },
    };
  }

  async *stream(messages: Message[], config: ChatModelConfig = {}): AsyncIterable<StreamChunk> {
    const prepared = prepareGenerate(this.input(messages, config));
    const use = await useEngine(this.engineConfig);
    try {
      // runGeneration reports events through a callback; a queue turns them into this iterator.
      const pending: GenerateEvent[] = [];
      let wake: (() => void) | undefined;
      let finished = false;
      const run = runGeneration(use.engine, prepared, {
        signal: signalOf(config),
        onEvent: (event) => {
          pending.push(event);
          wake?.();
        },
      }).finally(() => {
        finished = true;
        wake?.();
      });
      run.catch(() => undefined); // rethrown below, after the queued events
      let started = false;
      for (;;) {
        const event = pending.shift();
        if (!event) {
          if (finished) break;
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
          continue;
        }
        if (event.type !== 'delta') continue;
        // The reply follows "Assistant:", so the model's first token starts with a space.
        const delta = started ? event.text : event.text.trimStart();
        if (delta === '') continue;
        started = true;
        yield { type: 'text-delta', delta };
      }
      const result: GenerationResult = await run;
      yield { type: 'finish', finishReason: finishReason(result.finishReason), usage: result.usage };
    } finally {
      await use.done();
    }
  }

  withTools(tools: Tool[]): ChatModel {
    if (tools.length > 0) {
      throw new Error(
        `RWKV Chat Model cannot call tools (${tools.map((t) => t.name).join(', ')}): RWKV models have no tool-calling format. ` +
          'Use it in a Basic LLM Chain, or in an AI Agent without tools.',
      );
    }
    return this;
  }

  private input(messages: Message[], config: ChatModelConfig): GenerateInput {
    const stop = config.stopSequences ?? config.stop;
    return {
      ...this.defaults,
      messages: messages.map(toChatMessage),
      ...(config.maxTokens !== undefined && { maxTokens: config.maxTokens }),
      ...(config.temperature !== undefined && { temperature: config.temperature }),
      ...(config.topP !== undefined && { topP: config.topP }),
      ...(config.topK !== undefined && { topK: config.topK }),
      ...(config.presencePenalty !== undefined && { presencePenalty: config.presencePenalty }),
      ...(config.frequencyPenalty !== undefined && { frequencyPenalty: config.frequencyPenalty }),
      ...(config.seed !== undefined && { seed: config.seed }),
      ...(stop !== undefined && stop.length > 0 && { stop }),
    };
  }
}

function toChatMessage(message: Message, i: number): { role: string; content: string } {
  if (message.role === 'tool') throw new ParameterError(`messages[${i}]`, 'tool results cannot be given to an RWKV model');
  const text = message.content
    .filter((c) => c.type === 'text' || c.type === 'reasoning')
    .map((c) => c.text ?? '')
    .join('\n');
  const other = message.content.find((c) => c.type !== 'text' && c.type !== 'reasoning');
  if (other && text === '') throw new ParameterError(`messages[${i}]`, `content of type "${other.type}" is not supported; RWKV takes text`);
  return { role: message.role, content: text };
}

function signalOf(config: ChatModelConfig): AbortSignal | undefined {
  return config.abortSignal ?? config.signal;
}

function finishReason(reason: GenerationResult['finishReason']): FinishReason {
  return reason === 'length' ? 'length' : 'stop';
}
