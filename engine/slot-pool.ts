// The backend's slots and what each still holds. A finished request leaves its state in the
// slot, so a follow-up whose prompt extends those tokens continues there for free. Choice for a
// new request, as in ai00: an idle slot whose retained tokens are a prefix of the prompt
// (continue), else an empty slot, else the least recently used idle slot (swap).

import type { InitialState } from './initial-states';

export interface SlotRecord {
  readonly index: number;
  busy: boolean;
  /** Initial state the retained tokens were fed from; null = nothing retained. */
  initial: InitialState | null;
  /** Model rows fed into the slot's state since `initial`. */
  retained: number[];
  /** Logits after the last retained token, when the last run returned them. */
  lastLogits: Float32Array | null;
  lastUsed: number;
}

export interface SlotChoice {
  slot: SlotRecord;
  /** Retained prompt tokens usable as is (0 = the slot's state must be replaced). */
  continueLength: number;
}

export class SlotPool {
  readonly slots: SlotRecord[];
  private clock = 0;

  constructor(count: number) {
    this.slots = Array.from({ length: count }, (_, index) => ({
      index,
      busy: false,
      initial: null,
      retained: [],
      lastLogits: null,
      lastUsed: 0,
    }));
  }

  get idleCount(): number {
    let n = 0;
    for (const s of this.slots) if (!s.busy) n++;
    return n;
  }

  /** Best idle slot for a prompt from `initial`, or null when all are busy. */
  choose(initial: InitialState, prompt: readonly number[]): SlotChoice | null {
    let best: SlotChoice | null = null;
    let empty: SlotRecord | null = null;
    let oldest: SlotRecord | null = null;
    for (const slot of this.slots) {
      if (slot.busy) continue;
      const usable = SlotPool.continuable(slot, initial, prompt);
      if (usable > 0 && (!best || usable > best.continueLength)) best = { slot, continueLength: usable };
      if (slot.initial === null && !empty) empty = slot;
      if (!oldest || slot.lastUsed < oldest.lastUsed) oldest = slot;
    }
    if (best) return best;
    const slot = empty ?? oldest;
    return slot ? { slot, continueLength: 0 } : null;
  }

  /** Mark a slot taken; retained tokens beyond `keep` are dropped by the caller resetting state. */
  take(slot: SlotRecord): void {
    slot.busy = true;
    slot.lastUsed = ++this.clock;
  }

  release(slot: SlotRecord): void {
    slot.busy = false;
    slot.lastUsed = ++this.clock;
  }

  /** Forget what a slot holds (after a failed run its state is unknown). */
  clear(slot: SlotRecord): void {
    slot.initial = null;
    slot.retained = [];
    slot.lastLogits = null;
  }

  /** Drop every slot's claim on an initial state that is being unloaded. */
  forget(initial: InitialState): void {
    for (const slot of this.slots) if (!slot.busy && slot.initial === initial) this.clear(slot);
  }

  private static continuable(slot: SlotRecord, initial: InitialState, prompt: readonly number[]): number {
    const n = slot.retained.length;
    if (slot.initial !== initial || n === 0 || n > prompt.length) return 0;
    for (let i = 0; i < n; i++) if (slot.retained[i] !== prompt[i]) return 0;
    // A prompt that is entirely retained needs the logits that followed it.
    if (n === prompt.length && !slot.lastLogits) return 0;
    return n;
  }
}
