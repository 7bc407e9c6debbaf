// The slice of n8n's AI node SDK (@n8n/ai-node-sdk, "preview") that the RWKV Chat Model uses. The
// SDK is provided by n8n itself (community packages resolve it from n8n's own node_modules, like
// n8n-workflow); it cannot be a dependency here because its n8n-workflow needs Node ≥ 24 to install.
// The types mirror @n8n/ai-utilities 0.33 (n8n 2.40).

import type { ISupplyDataFunctions, SupplyData } from 'n8n-workflow';

export type MessageRole = 'system' | 'user' | 'assistant' | 'tool';

export interface MessageContent {
  type: string;
  text?: string;
  /** 'tool-call': the call's id, the tool's name and its arguments as JSON text. */
  toolCallId?: string;
  toolName?: string;
  input?: string;
  /** 'tool-result': what the tool returned (text or any JSON value). */
  result?: unknown;
  isError?: boolean;
}

export interface Message {
  role: MessageRole;
  content: MessageContent[];
  name?: string;
}

/** ChatModelConfig, plus the LangChain call options n8n's adapter passes through unchanged. */
export interface ChatModelConfig {
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  stopSequences?: string[];
  seed?: number;
  abortSignal?: AbortSignal;
  /** LangChain call option names. */
  stop?: string[];
  signal?: AbortSignal;
}

export type FinishReason = 'stop' | 'length' | 'content-filter' | 'tool-calls' | 'error' | 'other';

export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export interface GenerateResult {
  finishReason?: FinishReason;
  usage?: TokenUsage;
  message: Message;
}

export type StreamChunk =
  | { type: 'text-delta'; delta: string }
  | { type: 'tool-call-delta'; id?: string; name?: string; argumentsDelta?: string }
  | { type: 'finish'; finishReason: FinishReason; usage?: TokenUsage };

/** A function tool; inputSchema is JSON Schema or a Zod schema (the SDK's getParametersJsonSchema converts it). */
export interface Tool {
  type?: 'function' | 'provider';
  name: string;
  description?: string;
  inputSchema?: unknown;
}

export interface ChatModel {
  provider: string;
  modelId: string;
  generate(messages: Message[], config?: ChatModelConfig): Promise<GenerateResult>;
  stream(messages: Message[], config?: ChatModelConfig): AsyncIterable<StreamChunk>;
  withTools(tools: Tool[]): ChatModel;
}

export interface AiNodeSdk {
  supplyModel(ctx: ISupplyDataFunctions, model: ChatModel): SupplyData;
  /** A tool's parameters as JSON Schema (converts Zod schemas). */
  getParametersJsonSchema?(tool: Tool): unknown;
}

/** The SDK of the n8n instance running this node; undefined when n8n is too old to have one. */
export function loadAiNodeSdk(): AiNodeSdk | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('@n8n/ai-node-sdk') as AiNodeSdk;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND') return undefined;
    throw err;
  }
}
