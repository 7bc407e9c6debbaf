// RWKV as a chat model for n8n's AI nodes (AI Agent, Basic LLM Chain, ...): the SDK's ChatModel
// contract on top of the shared engine. Messages become RWKV's "User: ...\n\nAssistant:" dialogue.
// With tools bound (the AI Agent's Tools Agent), the reply is constrained to a tool call or an answer
// (chat-tools.ts); with an output schema or grammar, the answer is constrained to it.

import { randomUUID } from 'crypto';
import * as path from 'path';
import type { EngineConfig, GenerateEvent } from '../../engine/api';
import type { ChatMessage } from '../shared/chat-prompt';
import { prepareGenerate, type GenerateInput, type PreparedGenerate } from '../shared/generate-request';
import { runGeneration, type GenerationResult } from '../shared/generation-runner';
import { ParameterError } from '../shared/parameter-error';
import type { ChatModel, ChatModelConfig, FinishReason, GenerateResult, Message, MessageContent, StreamChunk, Tool } from './ai-node-sdk';
import { answerText, parseToolReply, replySchema, toolCallText, toolInstructions, toolResultText, toolSpecs, type ToolSpec, type ToolUse } from './chat-tools';
import { useEngine, withEngine } from './engine-keeper';

/** Sampling defaults set on the node; per-call config (from the AI node) overrides them. */
export type ChatDefaults = Omit<GenerateInput, 'prompt' | 'messages' | 'grammar' | 'jsonSchema'>;

export interface ChatModelOptions {
  /** 'required': one tool step per user turn, a call then the answer (small models; see ToolUse). */
  toolUse?: ToolUse;
  /** Constrains the answer: a JSON Schema (the answer is its JSON text) or a KBNF/GBNF grammar. */
  jsonSchema?: Record<string, unknown>;
  grammar?: string;
  /** A tool's parameters as JSON Schema (the SDK's converter, which also reads Zod schemas). */
  parametersJsonSchema?: (tool: Tool) => unknown;
}

/** What one call sends to the engine, and how to read its reply. */
interface PreparedChat {
  prepared: PreparedGenerate;
  withTools: boolean;
}

export class RwkvChatModel implements ChatModel {
  readonly provider = 'rwkv';
  readonly modelId: string;

  constructor(
    private readonly engineConfig: EngineConfig,
    private readonly defaults: ChatDefaults = {},
    private readonly options: ChatModelOptions = {},
    private readonly tools: ToolSpec[] = [],
  ) {
    this.modelId = engineConfig.modelPath ? path.basename(engineConfig.modelPath) : 'rwkv-bundled';
    if (options.grammar !== undefined && options.jsonSchema !== undefined) {
      throw new ParameterError('outputFormat', 'give either a grammar or a JSON schema, not both');
    }
  }

  async generate(messages: Message[], config: ChatModelConfig = {}): Promise<GenerateResult> {
    const chat = this.prepare(messages, config);
    const result = await withEngine(this.engineConfig, (engine) => runGeneration(engine, chat.prepared, { signal: signalOf(config) }));
    return this.reply(chat, result);
  }

  async *stream(messages: Message[], config: ChatModelConfig = {}): AsyncIterable<StreamChunk> {
    const chat = this.prepare(messages, config);
    const use = await useEngine(this.engineConfig);
    try {
      // runGeneration reports events through a callback; a queue turns them into this iterator.
      const pending: GenerateEvent[] = [];
      let wake: (() => void) | undefined;
      let finished = false;
      const run = runGeneration(use.engine, chat.prepared, {
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
        // A tool reply is JSON that is only a call or an answer once complete: it is sent whole below.
        if (event.type !== 'delta' || chat.withTools) continue;
        // The reply follows "Assistant:", so the model's first token starts with a space.
        const delta = started ? event.text : event.text.trimStart();
        if (delta === '') continue;
        started = true;
        yield { type: 'text-delta', delta };
      }
      const result: GenerationResult = await run;
      const reply = this.reply(chat, result);
      if (chat.withTools) {
        for (const part of reply.message.content) {
          if (part.type === 'tool-call') yield { type: 'tool-call-delta', id: part.toolCallId, name: part.toolName, argumentsDelta: part.input };
          else if (part.text) yield { type: 'text-delta', delta: part.text };
        }
      }
      yield { type: 'finish', finishReason: reply.finishReason ?? 'stop', usage: result.usage };
    } finally {
      await use.done();
    }
  }

  /** A model that offers these tools (added to any already bound), as LangChain's bindTools asks. */
  withTools(tools: Tool[]): ChatModel {
    if (tools.length === 0) return this;
    if (this.options.grammar !== undefined) {
      throw new ParameterError('outputFormat', 'a grammar cannot be combined with tools; use a JSON schema for the answer instead');
    }
    const specs = tools.map((tool) => {
      if (tool.type === 'provider') throw new ParameterError('tools', `"${tool.name}" is a provider tool, which an RWKV model cannot run`);
      return { name: tool.name, description: tool.description, parameters: this.parametersOf(tool) };
    });
    return new RwkvChatModel(this.engineConfig, this.defaults, this.options, toolSpecs([...this.tools, ...specs]));
  }

  private parametersOf(tool: Tool): unknown {
    const converted = this.options.parametersJsonSchema?.(tool);
    if (converted !== undefined && converted !== null) return converted;
    return tool.inputSchema;
  }

  private prepare(messages: Message[], config: ChatModelConfig): PreparedChat {
    const withTools = this.tools.length > 0;
    const chat = messages.map((m, i) => toChatMessage(m, i, withTools));
    const input = this.input(chat, config);
    if (withTools) {
      const firstTurn = chat.findIndex((m) => m.role !== 'system');
      chat.splice(firstTurn < 0 ? chat.length : firstTurn, 0, { role: 'system', content: toolInstructions(this.tools) });
      const lastUser = chat.map((m) => m.role).lastIndexOf('user');
      const resultSinceUser = chat.slice(lastUser + 1).some((m) => m.role === 'tool');
      const reply = this.options.toolUse !== 'required' ? 'either' : resultSinceUser ? 'answer' : 'call';
      input.jsonSchema = replySchema(this.tools, { reply, answerSchema: this.options.jsonSchema });
    } else if (this.options.jsonSchema !== undefined) {
      input.jsonSchema = this.options.jsonSchema;
    } else if (this.options.grammar !== undefined) {
      input.grammar = this.options.grammar;
    }
    return { prepared: prepareGenerate(input), withTools };
  }

  private reply(chat: PreparedChat, result: GenerationResult): GenerateResult {
    const usage = result.usage;
    if (!chat.withTools) {
      return { finishReason: finishReason(result.finishReason), usage, message: { role: 'assistant', content: [{ type: 'text', text: result.text }] } };
    }
    const reply = parseToolReply(result.json);
    if (reply.kind === 'call') {
      const call: MessageContent = { type: 'tool-call', toolCallId: `call_${randomUUID()}`, toolName: reply.name, input: JSON.stringify(reply.arguments) };
      return { finishReason: 'tool-calls', usage, message: { role: 'assistant', content: [call] } };
    }
    const text = typeof reply.answer === 'string' ? reply.answer : JSON.stringify(reply.answer);
    return { finishReason: 'stop', usage, message: { role: 'assistant', content: [{ type: 'text', text }] } };
  }

  private input(messages: ChatMessage[], config: ChatModelConfig): GenerateInput {
    const stop = config.stopSequences ?? config.stop;
    return {
      ...this.defaults,
      messages,
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

/** One SDK message as a dialogue turn; calls and results in the form the tool constraint writes them. */
function toChatMessage(message: Message, i: number, withTools: boolean): ChatMessage {
  if (message.role === 'tool') {
    const results = message.content.filter((c) => c.type === 'tool-result');
    if (results.length === 0) throw new ParameterError(`messages[${i}]`, 'a tool message needs a tool-result');
    return { role: 'tool', content: results.map((r) => toolResultText(r.result)).join('\n') };
  }
  const text = message.content
    .filter((c) => c.type === 'text' || c.type === 'reasoning')
    .map((c) => c.text ?? '')
    .join('\n');
  const calls = message.content.filter((c) => c.type === 'tool-call');
  const other = message.content.find((c) => c.type !== 'text' && c.type !== 'reasoning' && c.type !== 'tool-call');
  if (other && text === '' && calls.length === 0) {
    throw new ParameterError(`messages[${i}]`, `content of type "${other.type}" is not supported; RWKV takes text`);
  }
  if (message.role !== 'assistant') return { role: message.role, content: text };
  if (calls.length > 0) return { role: 'assistant', content: calls.map((c) => toolCallText(c.toolName ?? '', c.input)).join('\n') };
  return { role: 'assistant', content: withTools ? answerText(text) : text };
}

function signalOf(config: ChatModelConfig): AbortSignal | undefined {
  return config.abortSignal ?? config.signal;
}

function finishReason(reason: GenerationResult['finishReason']): FinishReason {
  return reason === 'length' ? 'length' : 'stop';
}
