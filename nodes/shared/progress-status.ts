// Short progress lines for host status displays (Node-RED node status, logs), one per engine event.

import type { GenerateEvent } from '../../engine/api';

export type ProgressPhase = 'ready' | 'queued' | 'prefill' | 'decode' | 'done' | 'error';

export interface ProgressStatus {
  phase: ProgressPhase;
  text: string;
}

/** Tracks one request's decoded-token count so delta events can show a running total. */
export class ProgressTracker {
  private tokens = 0;

  update(event: GenerateEvent): ProgressStatus {
    switch (event.type) {
      case 'queued':
        return { phase: 'queued', text: `queued (#${event.position})` };
      case 'start':
        return { phase: 'prefill', text: `prefill 0/${event.promptTokens - event.cachedTokens}` };
      case 'prefill':
        return { phase: 'prefill', text: `prefill ${event.done}/${event.total}` };
      case 'delta':
        this.tokens += event.tokens.length;
        return { phase: 'decode', text: count(this.tokens, 'token') };
      case 'stop':
        return { phase: 'done', text: `done: ${count(event.completionTokens, 'token')} (${event.reason})` };
    }
  }
}

/** "1 token", "2 tokens". */
export function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** What a node shows once its model has loaded: which model, on which adapter. */
export function readyStatus(info: { version: string; nLayer: number; nEmbd: number; adapter: string }): ProgressStatus {
  const text = `ready: RWKV ${info.version} ${info.nLayer}×${info.nEmbd} on ${info.adapter}`;
  return { phase: 'ready', text: text.length > 60 ? `${text.slice(0, 57)}...` : text };
}

export function errorStatus(err: unknown): ProgressStatus {
  const message = err instanceof Error ? err.message : String(err);
  return { phase: 'error', text: `error: ${message.length > 60 ? `${message.slice(0, 57)}...` : message}` };
}
