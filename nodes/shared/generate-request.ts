// Host parameters (n8n node fields, Node-RED config + msg overrides) → the engine's GenerateRequest.
// Everything is validated here, before the request is queued, so a bad field fails one item with
// a message naming it.

import type { GenerateRequest, SamplerOptions } from '../../engine/api';
import { MAX_TOP_LOGPROBS } from '../../engine/request-validation';
import { chatStopSequences, DEFAULT_CHAT_NAMES, formatChatPrompt, parseChatMessages, type ChatMessage } from './chat-prompt';
import {
  isBlank,
  optionalBoolean,
  optionalInteger,
  optionalJsonObject,
  optionalName,
  optionalNumber,
  optionalStringList,
  optionalText,
} from './coerce';
import { checkJsonSchema } from './json-schema-check';
import { parseLogitBias } from './logit-bias';
import { ParameterError } from './parameter-error';

export interface GenerateInput {
  /** Plain completion prompt; exclusive with messages. */
  prompt?: unknown;
  /** Chat messages [{role, content}]; the prompt is built in RWKV's "User:/Assistant:" style. */
  messages?: unknown;
  /** System prompt put first in chat mode. */
  system?: unknown;
  maxTokens?: unknown;
  stop?: unknown;
  /** A SamplerOptions object (or its JSON); the single fields below override its entries. */
  sampler?: unknown;
  samplerKind?: unknown;
  temperature?: unknown;
  topP?: unknown;
  topK?: unknown;
  presencePenalty?: unknown;
  frequencyPenalty?: unknown;
  penaltyDecay?: unknown;
  tau?: unknown;
  mirostatTau?: unknown;
  mirostatEta?: unknown;
  minP?: unknown;
  repetitionPenalty?: unknown;
  repetitionWindow?: unknown;
  /** Token (text or id) → bias entries; see logit-bias.ts. */
  logitBias?: unknown;
  seed?: unknown;
  /** Initial state name. */
  state?: unknown;
  /** KBNF/GBNF grammar text; exclusive with jsonSchema. */
  grammar?: unknown;
  jsonSchema?: unknown;
  /** Report each token's log-probability and the mean (true/false). */
  logprobs?: unknown;
  /** Most probable alternatives per token (0-20; implies logprobs). */
  topLogprobs?: unknown;
}

export interface PreparedGenerate {
  request: GenerateRequest;
  /** True when built from chat messages; the reply is then trimmed. */
  chat: boolean;
}

const NUMERIC_SAMPLER_FIELDS = [
  'temperature', 'topP', 'presencePenalty', 'frequencyPenalty', 'penaltyDecay', 'tau', 'mirostatTau', 'mirostatEta',
  'minP', 'repetitionPenalty',
] as const;

const SAMPLER_KINDS = ['nucleus', 'typical', 'mirostat'] as const;

export function prepareGenerate(input: GenerateInput): PreparedGenerate {
  const hasPrompt = !isBlank(input.prompt);
  const hasMessages = !isBlank(input.messages);
  if (hasPrompt && hasMessages) throw new ParameterError('prompt', 'give either a prompt or chat messages, not both');
  if (!hasPrompt && !hasMessages) throw new ParameterError('prompt', 'is empty: give a prompt or chat messages');

  let prompt: string;
  let stop = optionalStringList('stop', input.stop);
  if (hasMessages) {
    const messages: ChatMessage[] = parseChatMessages('messages', input.messages);
    const system = optionalText('system', input.system);
    if (system !== undefined && !messages.some((m) => m.role === 'system')) {
      messages.unshift({ role: 'system', content: system });
    }
    prompt = formatChatPrompt(messages);
    stop = [...chatStopSequences(), ...(stop ?? [])];
  } else {
    prompt = optionalText('prompt', input.prompt)!;
  }

  const request: GenerateRequest = { prompt };
  // The system turn is what chats of one flow share: the engine keeps the state after it (turns never hold a
  // blank line, so the first one ends the system turn).
  if (hasMessages && prompt.startsWith(`${DEFAULT_CHAT_NAMES.system}:`)) {
    const end = prompt.indexOf('\n\n');
    if (end > 0) request.sharedPrefix = end + 2;
  }
  const maxTokens = optionalInteger('maxTokens', input.maxTokens, 1);
  if (maxTokens !== undefined) request.maxTokens = maxTokens;
  if (stop) request.stop = stop;
  const sampler = parseSampler(input);
  if (sampler) request.sampler = sampler;
  const state = optionalName('state', input.state);
  if (state !== undefined) request.state = state;

  const logprobs = optionalBoolean('logprobs', input.logprobs);
  if (logprobs !== undefined) request.logprobs = logprobs;
  const topLogprobs = optionalInteger('topLogprobs', input.topLogprobs, 0);
  if (topLogprobs !== undefined) {
    if (topLogprobs > MAX_TOP_LOGPROBS) throw new ParameterError('topLogprobs', `must be at most ${MAX_TOP_LOGPROBS}, got ${topLogprobs}`);
    request.topLogprobs = topLogprobs;
  }

  const grammar = optionalText('grammar', input.grammar);
  const jsonSchema = optionalJsonObject('jsonSchema', input.jsonSchema);
  if (grammar !== undefined && jsonSchema !== undefined) {
    throw new ParameterError('grammar', 'give either a grammar or a JSON schema, not both');
  }
  if (grammar !== undefined) request.grammar = grammar;
  if (jsonSchema !== undefined) {
    checkJsonSchema('jsonSchema', jsonSchema);
    request.jsonSchema = jsonSchema;
  }
  return { request, chat: hasMessages };
}

function parseSampler(input: GenerateInput): SamplerOptions | undefined {
  const base = optionalJsonObject('sampler', input.sampler) as SamplerOptions | undefined;
  const sampler: SamplerOptions = { ...(base ?? {}) };
  const kind = optionalName('samplerKind', input.samplerKind);
  if (kind !== undefined) {
    if (!(SAMPLER_KINDS as readonly string[]).includes(kind)) {
      throw new ParameterError('samplerKind', `must be one of ${SAMPLER_KINDS.join(', ')}, got ${JSON.stringify(kind)}`);
    }
    sampler.kind = kind as SamplerOptions['kind'];
  }
  for (const field of NUMERIC_SAMPLER_FIELDS) {
    const v = optionalNumber(field, input[field]);
    if (v !== undefined) sampler[field] = v;
  }
  const topK = optionalInteger('topK', input.topK, 0);
  if (topK !== undefined) sampler.topK = topK;
  const seed = optionalInteger('seed', input.seed, 0);
  if (seed !== undefined) sampler.seed = seed;
  const window = optionalInteger('repetitionWindow', input.repetitionWindow, 1);
  if (window !== undefined) sampler.repetitionWindow = window;
  const bias = parseLogitBias('logitBias', input.logitBias);
  if (bias.logitBias) sampler.logitBias = { ...(sampler.logitBias ?? {}), ...bias.logitBias };
  if (bias.logitBiasText) sampler.logitBiasText = { ...(sampler.logitBiasText ?? {}), ...bias.logitBiasText };
  return Object.keys(sampler).length ? sampler : undefined;
}
