// OpenAI request bodies → the engine's GenerateRequest. Every field is type-checked here with an error naming
// it; fields this server cannot honour (n > 1, tools, logprobs, echo...) are refused rather than ignored, so a
// client never silently gets something other than what it asked for. Fields that change nothing here (user,
// metadata, store...) are accepted. The engine then checks the values (ranges, sampler, schema).

import type { GenerateRequest, SamplerOptions } from '../api';
import { RequestError } from '../errors';
import { chatStopSequences, formatChatPrompt, parseChatMessages, type ChatMessage } from '../../nodes/shared/chat-prompt';

type Body = Record<string, unknown>;

const present = (v: unknown) => v !== undefined && v !== null;

function optionalNumber(body: Body, field: string): number | undefined {
  const v = body[field];
  if (!present(v)) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new RequestError(`${field} must be a number, got ${JSON.stringify(v)}`);
  return v;
}

function optionalInteger(body: Body, field: string): number | undefined {
  const v = optionalNumber(body, field);
  if (v !== undefined && !Number.isInteger(v)) throw new RequestError(`${field} must be an integer, got ${v}`);
  return v;
}

function refuse(body: Body, field: string, ok: (v: unknown) => boolean, why: string): void {
  if (present(body[field]) && !ok(body[field])) throw new RequestError(`${field}: ${why}`);
}

function stopList(body: Body): string[] | undefined {
  const v = body.stop;
  if (!present(v)) return undefined;
  if (typeof v === 'string') return [v];
  if (Array.isArray(v) && v.every((s) => typeof s === 'string')) return v as string[];
  throw new RequestError('stop must be a string or an array of strings');
}

function logitBias(body: Body): Record<number, number> | undefined {
  const v = body.logit_bias;
  if (!present(v)) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw new RequestError('logit_bias must be an object {token id: bias}');
  const out: Record<number, number> = {};
  for (const [k, bias] of Object.entries(v as Record<string, unknown>)) {
    const id = Number(k);
    if (!/^\d+$/.test(k) || !Number.isSafeInteger(id)) throw new RequestError(`logit_bias: key ${JSON.stringify(k)} is not a token id`);
    if (typeof bias !== 'number' || !Number.isFinite(bias)) throw new RequestError(`logit_bias[${k}] must be a number`);
    out[id] = bias;
  }
  return out;
}

/** What completions and chat share: length, sampler, stop strings, and the refusals. */
function common(body: Body): { maxTokens?: number; sampler?: SamplerOptions; stop?: string[] } {
  refuse(body, 'n', (v) => v === 1, 'only n = 1 is supported');
  refuse(body, 'best_of', (v) => v === 1, 'only best_of = 1 is supported');
  refuse(body, 'logprobs', (v) => v === false || v === 0, 'logprobs are not supported by this server');
  refuse(body, 'top_logprobs', (v) => v === 0, 'logprobs are not supported by this server');
  refuse(body, 'echo', (v) => v === false, 'echo is not supported by this server');
  refuse(body, 'suffix', (v) => v === '', 'suffix (insertion) is not supported by this server');
  refuse(body, 'stream', (v) => typeof v === 'boolean', 'must be true or false');
  const maxTokens = optionalInteger(body, 'max_completion_tokens') ?? optionalInteger(body, 'max_tokens');
  const sampler: SamplerOptions = {};
  const temperature = optionalNumber(body, 'temperature');
  if (temperature !== undefined) sampler.temperature = temperature;
  const topP = optionalNumber(body, 'top_p');
  if (topP !== undefined) sampler.topP = topP;
  const presence = optionalNumber(body, 'presence_penalty');
  if (presence !== undefined) sampler.presencePenalty = presence;
  const frequency = optionalNumber(body, 'frequency_penalty');
  if (frequency !== undefined) sampler.frequencyPenalty = frequency;
  const seed = optionalInteger(body, 'seed');
  if (seed !== undefined) sampler.seed = seed;
  const bias = logitBias(body);
  if (bias) sampler.logitBias = bias;
  return {
    ...(maxTokens !== undefined ? { maxTokens } : {}),
    ...(Object.keys(sampler).length ? { sampler } : {}),
    ...(stopList(body) ? { stop: stopList(body) } : {}),
  };
}

export function completionRequest(body: Body): GenerateRequest {
  let prompt = body.prompt;
  if (Array.isArray(prompt) && prompt.length === 1) prompt = prompt[0];
  if (typeof prompt !== 'string') throw new RequestError('prompt must be a string (or an array of one string); token arrays and batches are not supported');
  return { prompt, ...common(body) };
}

/** Text content: a string or an array of {type: 'text', text} parts. */
function messageText(content: unknown, i: number): unknown {
  if (!Array.isArray(content)) return content;
  return content
    .map((part, j) => {
      const p = part as { type?: unknown; text?: unknown };
      if (!p || p.type !== 'text' || typeof p.text !== 'string') throw new RequestError(`messages[${i}].content[${j}]: only text parts are supported`);
      return p.text;
    })
    .join('\n');
}

export function chatRequest(body: Body): GenerateRequest {
  refuse(body, 'tools', (v) => Array.isArray(v) && v.length === 0, 'tools are not supported by this server yet');
  refuse(body, 'functions', (v) => Array.isArray(v) && v.length === 0, 'functions are not supported by this server yet');
  if (!Array.isArray(body.messages)) throw new RequestError('messages must be a non-empty array of {role, content}');
  const raw = body.messages.map((m, i) => {
    if (!m || typeof m !== 'object') throw new RequestError(`messages[${i}] must be an object {role, content}`);
    const { role, content } = m as { role?: unknown; content?: unknown };
    if (role === 'tool' || role === 'function') throw new RequestError(`messages[${i}]: tool results are not supported by this server yet`);
    return { role, content: messageText(content, i) };
  });
  let messages: ChatMessage[];
  try {
    messages = parseChatMessages('messages', raw);
  } catch (err) {
    throw new RequestError((err as Error).message);
  }
  const base = common(body);
  const request: GenerateRequest = { prompt: formatChatPrompt(messages), ...base, stop: [...chatStopSequences(), ...(base.stop ?? [])] };
  const schema = responseFormatSchema(body.response_format);
  if (schema) request.jsonSchema = schema;
  return request;
}

/** response_format → the engine's jsonSchema: json_schema gives its schema, json_object any JSON object. */
function responseFormatSchema(format: unknown): object | undefined {
  if (!present(format)) return undefined;
  const f = format as { type?: unknown; json_schema?: { schema?: unknown } };
  if (typeof f !== 'object' || typeof f.type !== 'string') throw new RequestError('response_format must be {type: "text" | "json_object" | "json_schema"}');
  switch (f.type) {
    case 'text':
      return undefined;
    case 'json_object':
      return { type: 'object' };
    case 'json_schema': {
      const schema = f.json_schema?.schema;
      if (!schema || typeof schema !== 'object' || Array.isArray(schema)) throw new RequestError('response_format.json_schema.schema must be a JSON schema object');
      return schema;
    }
    default:
      throw new RequestError(`response_format.type must be "text", "json_object" or "json_schema", got ${JSON.stringify(f.type)}`);
  }
}

/** OpenAI's finish_reason for the engine's stop reason. */
export function finishReason(reason: string): 'stop' | 'length' {
  return reason === 'length' ? 'length' : 'stop';
}
