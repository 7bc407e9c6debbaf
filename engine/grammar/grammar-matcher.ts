// One constrained request's position in its grammar. Cheap to create: everything heavy (the
// automaton, the masks) belongs to the compiled constraint and is shared.

import { ConstraintError } from './constraint-error';
import { DEAD, StackAutomaton } from './stack-automaton';
import { ShortestCompletion } from './shortest-completion';
import { TokenMasks } from './token-masks';

export interface ConstraintMatcher {
  /** Bitset of allowed token ids over vocabSize (bit 0 = end of text, set when accepting). */
  fillMask(mask: Uint32Array): void;
  /**
   * A token that may be emitted without sampling: the only allowed token, or, when the grammar
   * fixes the next bytes, the longest token lying wholly inside them. null when sampling is
   * needed.
   */
  forcedToken(): number | null;
  /** Advances by one token (0 = end of text); throws ConstraintError if it is not allowed. */
  accept(token: number): void;
  isAccepting(): boolean;
  /** Nothing but the end of text can follow. */
  isDone(): boolean;
  /** Shortest bytes that complete the output from here (empty when accepting). */
  shortestCompletion(): Uint8Array;
  /**
   * shortestCompletion() as tokens (longest vocabulary match first), for a scheduler that must
   * close the output within its token budget instead of sampling; null when that takes more than
   * `limit` tokens.
   */
  completionTokens(limit?: number): number[] | null;
  /** The output can still be closed within `budget` tokens from here. */
  fits(budget: number): boolean;
  /** After `token` the output could still be closed within `budget` tokens (the matcher does not move). */
  fitsAfter(token: number, budget: number): boolean;
  /** Tokens accepted so far (end of text excluded). */
  readonly tokensAccepted: number;
}

/** Longest forced byte run followed; no vocabulary token is longer. */
const MAX_FORCED_BYTES = 128;
/**
 * Most completion bytes tokenized to answer fits/fitsAfter; beyond it the answer is "no", which
 * only makes a scheduler close the output early. Keeps every decoding step's check cheap.
 */
const MAX_CHECKED_COMPLETION_BYTES = 1 << 16;

export class GrammarMatcher implements ConstraintMatcher {
  private state: number;
  private ended = false;
  tokensAccepted = 0;
  /**
   * A completion known to close the output from the current state (tokens from `at` on), kept
   * while accepted tokens follow it: forced and closing runs then check their budget in O(1)
   * instead of re-tokenizing the completion every step.
   */
  private plan: { tokens: number[]; at: number } | null = null;
  /** The completion computed by the last fitsAfter, adopted if that token is accepted. */
  private nextPlan: { token: number; tokens: number[] } | null = null;

  constructor(
    private masks: TokenMasks,
    private completion: () => ShortestCompletion,
    private forcedCache: Map<number, number>,
  ) {
    this.state = masks.automaton.initial;
  }

  private get automaton(): StackAutomaton {
    return this.masks.automaton;
  }

  fillMask(mask: Uint32Array): void {
    if (mask.length < this.masks.words)
      throw new ConstraintError(`mask has ${mask.length} words, the vocabulary needs ${this.masks.words}`);
    if (this.ended) {
      mask.fill(0);
      return;
    }
    const m = this.masks.fill(this.state, mask);
    // Possible with a reduced vocabulary that lacks the bytes the grammar needs here.
    if (m.count === 0)
      throw new ConstraintError('no token of this vocabulary can continue the output here', `token ${this.tokensAccepted}`);
    if (mask.length > this.masks.words) mask.fill(0, this.masks.words);
  }

  forcedToken(): number | null {
    if (this.ended) return null;
    let f = this.forcedCache.get(this.state);
    if (f === undefined) {
      f = this.computeForced();
      this.forcedCache.set(this.state, f);
    }
    return f < 0 ? null : f;
  }

  private computeForced(): number {
    const m = this.masks.get(this.state);
    if (m.count === 1 && m.some > 0) return m.some;
    if (m.count <= 1 || this.automaton.accepting(this.state)) return -1;
    // Follow the bytes the grammar fixes (one live byte at each step), then take the longest
    // token inside them: the text starts with those bytes whatever would be sampled.
    const a = this.automaton;
    const forced: number[] = [];
    let s = this.state;
    while (forced.length < MAX_FORCED_BYTES && !a.accepting(s)) {
      let only = -1;
      let next = DEAD;
      for (let b = 0; b < 256; b++) {
        const t = a.next(s, b);
        if (t === DEAD) continue;
        if (only >= 0) {
          only = -2;
          break;
        }
        only = b;
        next = t;
      }
      if (only < 0) break;
      forced.push(only);
      s = next;
    }
    return forced.length ? this.longestTokenWithin(forced) : -1;
  }

  completionTokens(limit = Infinity): number[] | null {
    if (this.ended) return [];
    if (this.plan && this.plan.tokens.length - this.plan.at <= limit) return this.plan.tokens.slice(this.plan.at);
    const tokens = this.planFrom(this.state, limit, Infinity);
    if (tokens) this.plan = { tokens, at: 0 };
    return tokens ? tokens.slice() : null;
  }

  fits(budget: number): boolean {
    if (this.ended) return true;
    if (this.plan && this.plan.tokens.length - this.plan.at <= budget) return true;
    const tokens = this.fitsFrom(this.state, budget);
    if (Array.isArray(tokens)) this.plan = { tokens, at: 0 };
    return tokens !== false;
  }

  fitsAfter(token: number, budget: number): boolean {
    if (this.ended) return false;
    if (token === 0) return this.automaton.accepting(this.state);
    const p = this.plan;
    if (p && p.tokens[p.at] === token && p.tokens.length - p.at - 1 <= budget) return true;
    const bytes = this.masks.trie.tokenBytes(token);
    const next = bytes ? this.automaton.run(this.state, bytes) : DEAD;
    if (next === DEAD) return false;
    const tokens = this.fitsFrom(next, budget);
    this.nextPlan = Array.isArray(tokens) ? { token, tokens } : null;
    return tokens !== false;
  }

  /** false, or true, or the completion's tokens when they had to be counted. */
  private fitsFrom(state: number, budget: number): boolean | number[] {
    const len = this.completion().length(state);
    // Every byte is a token of its own in a full vocabulary, so the bytes bound the tokens.
    if (len <= budget && this.masks.trie.hasAllBytes) return true;
    return this.planFrom(state, budget, MAX_CHECKED_COMPLETION_BYTES) ?? false;
  }

  /** The completion's tokens from a state, or null when over `limit` tokens or `maxBytes` bytes. */
  private planFrom(state: number, limit: number, maxBytes: number): number[] | null {
    const completion = this.completion();
    const len = completion.length(state);
    if (len === 0) return [];
    // No token is longer than the trie is deep: a longer completion needs more tokens than that.
    if (len > maxBytes || len > limit * this.masks.trie.maxDepth) return null;
    const bytes = Array.from(completion.bytes(state));
    const out: number[] = [];
    for (let at = 0; at < bytes.length; ) {
      if (out.length >= limit) return null;
      const [tok, tokLen] = this.longestPrefixToken(bytes, at);
      if (tok < 0) throw new ConstraintError(`no vocabulary token starts with byte ${bytes[at]}`, 'completion');
      out.push(tok);
      at += tokLen;
    }
    return out;
  }

  private longestTokenWithin(bytes: number[]): number {
    return this.longestPrefixToken(bytes, 0)[0];
  }

  /** The longest token that is a prefix of bytes[at..], with its length; [-1, 0] if none. */
  private longestPrefixToken(bytes: number[], at: number): [number, number] {
    const { byte, depth, token, skip } = this.masks.trie;
    let best: [number, number] = [-1, 0];
    let i = 0;
    const n = byte.length;
    for (let d = 0; at + d < bytes.length; d++) {
      while (i < n && depth[i] === d + 1 && byte[i] !== bytes[at + d]) i = skip[i];
      if (i >= n || depth[i] !== d + 1) break;
      if (token[i] >= 0) best = [token[i], d + 1];
      i++;
    }
    return best;
  }

  accept(token: number): void {
    if (this.ended) throw new ConstraintError(`token ${token} after the end of text`);
    if (token === 0) {
      if (!this.automaton.accepting(this.state))
        throw new ConstraintError('end of text is not allowed here: the output is incomplete', `token ${this.tokensAccepted}`);
      this.ended = true;
      return;
    }
    const bytes = this.masks.trie.tokenBytes(token);
    if (!bytes) throw new ConstraintError(`token ${token} is not in the vocabulary`, `token ${this.tokensAccepted}`);
    const next = this.automaton.run(this.state, bytes);
    if (next === DEAD)
      throw new ConstraintError(
        `token ${token} (${JSON.stringify(Buffer.from(bytes).toString('latin1'))}) is not allowed by the grammar here`,
        `token ${this.tokensAccepted}`,
      );
    this.state = next;
    this.tokensAccepted++;
    const p = this.plan;
    if (p && p.tokens[p.at] === token) p.at++;
    else this.plan = this.nextPlan?.token === token ? { tokens: this.nextPlan.tokens, at: 0 } : null;
    this.nextPlan = null;
  }

  isAccepting(): boolean {
    return this.ended || this.automaton.accepting(this.state);
  }

  isDone(): boolean {
    return this.ended || this.automaton.finished(this.state);
  }

  shortestCompletion(): Uint8Array {
    return this.ended ? new Uint8Array(0) : this.completion().bytes(this.state);
  }
}
