// Tool calling for RWKV, which has no native tool format: the agent's tools are listed in a System turn,
// and the reply is constrained by a JSON Schema to exactly one of
//   {"tool":"<name>","arguments":{...}}   arguments valid for that tool's parameter schema
//   {"answer":"<text>"}                     the final answer (or a value of the chat's output schema)
// Earlier calls and tool results go back into the dialogue in that same form ("Tool: <result>" turns),
// so the model reads its own past calls the way it is asked to write them.

import { ParameterError } from '../shared/parameter-error';

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

/**
 * 'auto': every reply is a call or the answer, as the model chooses. 'required': one tool step per user turn,
 * for small models that would rather chat or would call tools forever: the first reply to a user turn must
 * call a tool, and the reply after a tool result must answer.
 */
export type ToolUse = 'auto' | 'required';

/** Which branches a reply may take. */
export type ReplyKind = 'call' | 'answer' | 'either';

export type ToolReply = { kind: 'answer'; answer: unknown } | { kind: 'call'; name: string; arguments: unknown };

/** Bounds on what a workflow's tool list may cost to turn into a prompt and a constraint. */
const MAX_TOOLS = 64;
const MAX_SCHEMA_NODES = 20_000;

/** Keywords whose values are data, not schemas: a "$ref" inside them is left alone. */
const VALUE_KEYWORDS = new Set(['const', 'enum', 'default', 'examples']);

const TOOL_NAME = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Checks the tool list and normalises each parameter schema (draft-07 Zod output, nested refs) for the engine. */
export function toolSpecs(tools: { name: string; description?: string; parameters: unknown }[]): ToolSpec[] {
  if (tools.length > MAX_TOOLS) throw new ParameterError('tools', `at most ${MAX_TOOLS} tools can be bound, got ${tools.length}`);
  const seen = new Set<string>();
  return tools.map((tool, i) => {
    if (typeof tool.name !== 'string' || !TOOL_NAME.test(tool.name)) {
      throw new ParameterError(`tools[${i}].name`, `must be 1-128 letters, digits or _ . : -, got ${JSON.stringify(tool.name)}`);
    }
    if (seen.has(tool.name)) throw new ParameterError(`tools[${i}].name`, `"${tool.name}" is bound twice`);
    seen.add(tool.name);
    const parameters = tool.parameters ?? { type: 'object' };
    if (typeof parameters !== 'object' || parameters === null || Array.isArray(parameters)) {
      throw new ParameterError(`tools[${i}] (${tool.name})`, 'its parameters are not a JSON Schema object');
    }
    return { name: tool.name, description: (tool.description ?? '').trim(), parameters: parameters as Record<string, unknown> };
  });
}

/** The System turn that tells the model which tools exist and how to call them. */
export function toolInstructions(tools: ToolSpec[]): string {
  const lines = [
    'You can use tools. To call a tool, reply only with {"tool":"<tool name>","arguments":{...}}; the tool result comes back in a Tool turn. ' +
      'To answer the user, reply only with {"answer":"<your answer>"}.',
    'Tools:',
  ];
  for (const t of tools) {
    const description = t.description.replace(/\s+/g, ' ');
    lines.push(`- ${t.name}${description ? `: ${description}` : ''} Arguments: ${JSON.stringify(withoutSchemaUri(t.parameters))}`);
  }
  return lines.join('\n');
}

/**
 * The JSON Schema of one reply. Each tool's parameter schema moves to $defs.tool<i>, with its own local
 * references ("#/...", relative to the tool's schema) rewritten to point there.
 */
export function replySchema(tools: ToolSpec[], opts: { reply: ReplyKind; answerSchema?: Record<string, unknown> }): Record<string, unknown> {
  const $defs: Record<string, unknown> = {};
  const calls = (opts.reply === 'answer' ? [] : tools).map((t, i) => {
    $defs[`tool${i}`] = rebaseRefs(withoutSchemaUri(t.parameters), `#/$defs/tool${i}`);
    return {
      type: 'object',
      properties: { tool: { const: t.name }, arguments: { $ref: `#/$defs/tool${i}` } },
      required: ['tool', 'arguments'],
      additionalProperties: false,
    };
  });
  const branches: unknown[] = [...calls];
  if (opts.reply !== 'call') {
    const answer = opts.answerSchema ? rebaseRefs(withoutSchemaUri(opts.answerSchema), '#/$defs/answer') : { type: 'string' };
    if (opts.answerSchema) $defs.answer = answer;
    branches.unshift({
      type: 'object',
      properties: { answer: opts.answerSchema ? { $ref: '#/$defs/answer' } : answer },
      required: ['answer'],
      additionalProperties: false,
    });
  }
  return { $defs, anyOf: branches };
}

/** The parsed, schema-checked reply as a call or an answer. */
export function parseToolReply(json: unknown): ToolReply {
  const reply = json as { tool?: unknown; arguments?: unknown; answer?: unknown };
  if (reply && typeof reply.tool === 'string') return { kind: 'call', name: reply.tool, arguments: reply.arguments ?? {} };
  if (reply && 'answer' in reply) return { kind: 'answer', answer: reply.answer };
  throw new Error(`the model's reply is neither a tool call nor an answer: ${JSON.stringify(json).slice(0, 200)}`);
}

/** An earlier call as the model writes one (key order as the constraint emits it). */
export function toolCallText(name: string, argumentsJson: string | undefined): string {
  let args: unknown = {};
  try {
    args = argumentsJson ? JSON.parse(argumentsJson) : {};
  } catch {
    args = {};
  }
  return JSON.stringify({ tool: name, arguments: args });
}

/** An earlier answer as the model writes one while tools are bound. */
export function answerText(text: string): string {
  return JSON.stringify({ answer: text });
}

/** A tool's result as the text of a Tool turn: strings as they are, text blocks joined, other values as JSON. */
export function toolResultText(result: unknown): string {
  if (typeof result === 'string') return result;
  if (Array.isArray(result) && result.every((b) => b && typeof b === 'object' && typeof (b as { text?: unknown }).text === 'string')) {
    return result.map((b) => (b as { text: string }).text).join('\n');
  }
  return JSON.stringify(result) ?? String(result);
}

function withoutSchemaUri(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _uri, ...rest } = schema;
  return rest;
}

/**
 * A copy of a schema whose local references ("#", "#/...") point below `base` instead of the document root.
 * Iterative, and bounded in nodes, so a deep or huge tool schema fails with a message instead of the stack.
 */
function rebaseRefs(schema: Record<string, unknown>, base: string): Record<string, unknown> {
  const copy = (value: unknown): unknown => (Array.isArray(value) ? [...value] : value && typeof value === 'object' ? { ...value } : value);
  const root = copy(schema) as Record<string, unknown>;
  const stack: unknown[] = [root];
  let nodes = 0;
  while (stack.length) {
    const node = stack.pop() as Record<string, unknown> | unknown[];
    if (++nodes > MAX_SCHEMA_NODES) throw new ParameterError('tools', `a tool's parameter schema has more than ${MAX_SCHEMA_NODES} parts`);
    for (const key of Object.keys(node)) {
      const value = (node as Record<string, unknown>)[key];
      if (key === '$ref' && typeof value === 'string' && !Array.isArray(node) && (value === '#' || value.startsWith('#/'))) {
        (node as Record<string, unknown>)[key] = base + value.slice(1);
      } else if (value && typeof value === 'object' && !(!Array.isArray(node) && VALUE_KEYWORDS.has(key))) {
        const child = copy(value);
        (node as Record<string, unknown>)[key] = child;
        stack.push(child);
      }
    }
  }
  return root;
}
