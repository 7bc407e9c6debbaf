// Chat messages → the plain-text dialogue RWKV World models are trained on:
//   "System: ...\n\nUser: ...\n\nAssistant: ...\n\nUser: ...\n\nAssistant:"
// A blank line separates turns, so blank lines inside a message are folded to one newline (as the
// RWKV chat demos do); otherwise the model would read them as the end of the turn.

import { ParameterError } from './parameter-error';

/** 'tool' is a tool's result handed back to the model (the AI Agent's tool calls). */
export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

export interface ChatMessage {
  role: ChatRole;
  content: string;
}

export interface ChatNames {
  system: string;
  user: string;
  assistant: string;
  tool: string;
}

export const DEFAULT_CHAT_NAMES: ChatNames = { system: 'System', user: 'User', assistant: 'Assistant', tool: 'Tool' };

/** Accepts [{role, content}] (OpenAI style; 'human'/'ai' aliases too) or JSON text of it. */
export function parseChatMessages(name: string, value: unknown): ChatMessage[] {
  let list = value;
  if (typeof value === 'string') {
    try {
      list = JSON.parse(value);
    } catch (err) {
      throw new ParameterError(name, `is not valid JSON: ${(err as Error).message}`);
    }
  }
  if (!Array.isArray(list) || list.length === 0) {
    throw new ParameterError(name, 'must be a non-empty array of {role, content} messages');
  }
  return list.map((m, i) => {
    if (typeof m !== 'object' || m === null) throw new ParameterError(`${name}[${i}]`, 'must be an object {role, content}');
    const { role, content } = m as { role?: unknown; content?: unknown };
    const normalized = normalizeRole(role);
    if (!normalized) {
      throw new ParameterError(`${name}[${i}].role`, `must be "system", "user", "assistant" or "tool", got ${JSON.stringify(role)}`);
    }
    if (typeof content !== 'string') throw new ParameterError(`${name}[${i}].content`, 'must be a string');
    return { role: normalized, content };
  });
}

function normalizeRole(role: unknown): ChatRole | undefined {
  if (typeof role !== 'string') return undefined;
  const r = role.toLowerCase();
  if (r === 'system' || r === 'developer') return 'system';
  if (r === 'user' || r === 'human') return 'user';
  if (r === 'assistant' || r === 'ai' || r === 'model') return 'assistant';
  if (r === 'tool' || r === 'function') return 'tool';
  return undefined;
}

/** One message's text as it may appear inside a turn. */
export function foldTurnText(content: string): string {
  return content.trim().replace(/\r\n/g, '\n').replace(/\n{2,}/g, '\n');
}

/** The prompt ending in "Assistant:" so the model writes the next assistant turn. */
export function formatChatPrompt(messages: ChatMessage[], names: ChatNames = DEFAULT_CHAT_NAMES): string {
  const turns = messages.map((m) => `${names[m.role]}: ${foldTurnText(m.content)}`);
  return `${turns.join('\n\n')}\n\n${names.assistant}:`;
}

/** Where a chat reply ends: the model starting any next turn (the user's, its own again, a system or tool line). */
export function chatStopSequences(names: ChatNames = DEFAULT_CHAT_NAMES): string[] {
  return [names.user, names.assistant, names.system, names.tool].map((name) => `\n\n${name}:`);
}
