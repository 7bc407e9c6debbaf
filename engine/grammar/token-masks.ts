// Token masks per automaton state: which vocabulary tokens may come next.
//
// A state is a set of parse stacks, and a token is allowed when some stack takes its bytes, so a
// mask is the union of its stacks' masks. Each stack's part is computed from the stack cut to its
// top frames (StackAutomaton.topState) and shared by every state holding a stack with those top
// frames: "inside a JSON string" is one walk for all strings, a key position is one walk per key
// rather than one per set of keys still allowed. Where a shared walk pops into the cut-off part
// it records the trie node instead of deciding; those subtrees are then re-walked from the real
// state (tokens that close the string and go on). A shared walk itself looks up the subtree
// under each first byte by the state that byte leads to, so walks from states that agree after
// one byte (inside any key the schema does not declare) reuse each other's work. Final masks are
// cached per real state, so steady-state steps are a copy. Every cache is bounded in bytes.
//
// Walks go over two tries (string-slice.ts): the tokens of whole string-safe characters, where
// a state that loops on every such character takes the whole subtree below it at once, and the
// thousand other tokens, walked node by node.

import { DEAD, StackAutomaton } from './stack-automaton';
import { loopsOverSafeChars, StringSlice } from './string-slice';
import { TokenTrie } from './token-trie';

export interface StateMask {
  mask: Uint32Array;
  /** Number of allowed tokens, end of text included. */
  count: number;
  /** Some allowed token (the only one when count is 1); -1 if none. */
  some: number;
}

interface SharedMask {
  /** Tokens allowed whatever lies below the cut: a bitset, or their list when they are few. */
  mask: Uint32Array | null;
  tokens: Int32Array | null;
  /** Trie nodes below which the tokens depend on the context under the cut (see crossingOf). */
  crossings: number[];
}

const NO_CROSSINGS = new Int32Array(0);

/** Which of the two tries (string-slice.ts) a walk goes over. */
const SAFE = 0;
const REST = 1;

/** A crossing names its trie node and the trie. */
function crossingOf(trie: number, node: number): number {
  return node * 2 + trie;
}

/** Masks kept per compiled constraint and layer: 8 KiB each for the World vocabulary. */
const MAX_CACHED_MASKS = 2048;
/** Shared masks with at most this many tokens are kept as a list. */
const MASK_AS_LIST = 256;
/** Token ids kept in subtree results per compiled constraint (4 bytes each: 4 MiB). */
const MAX_CACHED_SUBTREE_TOKENS = 1 << 20;
/**
 * Stack frames a shared walk keeps (see compute): more frames, fewer tokens to re-walk from the
 * real state; fewer, more states share a walk. 3 did best on MaskBench (counted work per mask).
 */
const TOP_FRAMES = 3;

/** The tokens of one first-byte subtree of the trie that a state after that byte accepts. */
interface SubtreeResult {
  tokens: Int32Array;
  /** Trie nodes below which the tokens depend on the context under the cut (see crossingOf). */
  crossings: Int32Array;
}

/** Per automaton state: whether it loops on every string-safe character (LOOP_UNKNOWN until checked). */
const LOOP_UNKNOWN = 0;
const LOOPS = 1;
const NO_LOOP = 2;

export class TokenMasks {
  private finals = new Map<number, StateMask>();
  private shared = new Map<number, SharedMask>();
  /**
   * Per (state after the first byte, first byte): what that byte's trie subtree contributes to a
   * full walk. Many states lead to the same state after one byte (inside a string, any ordinary
   * character does), so a new state's full walk is mostly lookups.
   */
  private subtrees = new Map<number, SubtreeResult>();
  private subtreeTokens = 0;
  private depthState: Int32Array;
  private slice: StringSlice;
  /** The safe-token trie and the rest, indexed by SAFE and REST. */
  private tries: [TokenTrie, TokenTrie];
  private loopFlags = new Uint8Array(1024);
  readonly words: number;

  constructor(
    readonly automaton: StackAutomaton,
    readonly trie: TokenTrie,
  ) {
    this.depthState = new Int32Array(trie.maxDepth + 1);
    this.words = (trie.vocabSize + 31) >>> 5;
    this.slice = StringSlice.of(trie);
    this.tries = [this.slice.safe, this.slice.rest];
  }

  /** The state loops on every string-safe character (checked once per state). */
  private loops(state: number): boolean {
    let f = state < this.loopFlags.length ? this.loopFlags[state] : LOOP_UNKNOWN;
    if (f === LOOP_UNKNOWN) {
      f = loopsOverSafeChars(this.automaton, state) ? LOOPS : NO_LOOP;
      // The check may have added states: grow to cover them all.
      if (state >= this.loopFlags.length) {
        const grown = new Uint8Array(Math.max(2 * this.loopFlags.length, this.automaton.stateCount + 1024));
        grown.set(this.loopFlags);
        this.loopFlags = grown;
      }
      this.loopFlags[state] = f;
    }
    return f === LOOPS;
  }

  get(state: number): StateMask {
    let m = lruGet(this.finals, state);
    if (!m) {
      m = this.compute(state);
      lruSet(this.finals, state, m);
    }
    return m;
  }

  private compute(state: number): StateMask {
    const a = this.automaton;
    const mask = new Uint32Array(this.words);
    const crossings = new Set<number>();
    for (const node of a.stateStacks[state]) {
      if (node === 0) continue;
      const key = a.topState(node, TOP_FRAMES);
      let sh = lruGet(this.shared, key);
      if (!sh) {
        sh = this.walkShared(key);
        lruSet(this.shared, key, sh);
      }
      const m = sh.mask;
      if (m) for (let w = 0; w < m.length; w++) mask[w] |= m[w];
      else for (const t of sh.tokens!) mask[t >>> 5] |= 1 << (t & 31);
      for (const c of sh.crossings) crossings.add(c);
    }
    if (a.accepting(state)) mask[0] |= 1;
    for (const c of crossings) {
      const which = c & 1, node = c >>> 1;
      const trie = this.tries[which];
      const from = a.run(state, trie.pathBytes(node));
      if (from !== DEAD) this.walk(which, from, node + 1, trie.skip[node], mask, null);
    }
    let count = 0;
    let some = -1;
    for (let w = 0; w < mask.length; w++) {
      let x = mask[w];
      if (x === 0) continue;
      some = w * 32 + 31 - Math.clz32(x);
      x = x - ((x >>> 1) & 0x55555555);
      x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
      count += (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
    }
    return { mask, count, some };
  }

  private walkShared(state: number): SharedMask {
    const mask = new Uint32Array(this.words);
    const crossings: number[] = [];
    const a = this.automaton;
    // A state inside a string takes every safe token: only the rest is walked.
    const allSafe = this.loops(state);
    if (allSafe) mask.set(this.slice.safeMask);
    for (let which = allSafe ? REST : SAFE; which <= REST; which++) {
      const { byte, skip, nodeCount } = this.tries[which];
      for (let i = 0; i < nodeCount; i = skip[i]) {
        const t = a.next(state, byte[i]);
        if (t === DEAD) continue;
        const key = (t * 256 + byte[i]) * 2 + which;
        let sub = lruGet(this.subtrees, key);
        if (!sub) {
          sub = this.collectSubtree(which, t, i);
          this.rememberSubtree(key, sub);
        }
        const toks = sub.tokens;
        for (let k = 0; k < toks.length; k++) mask[toks[k] >>> 5] |= 1 << (toks[k] & 31);
        for (let k = 0; k < sub.crossings.length; k++) crossings.push(sub.crossings[k]);
      }
    }
    // Narrow walks (a key, a keyword) allow few tokens: a list ORs faster than 2,048 words.
    const few: number[] = [];
    for (let w = 0; w < mask.length && few.length <= MASK_AS_LIST; w++)
      for (let x = mask[w]; x !== 0 && few.length <= MASK_AS_LIST; x &= x - 1) few.push(w * 32 + 31 - Math.clz32(x & -x));
    if (few.length <= MASK_AS_LIST) return { mask: null, tokens: Int32Array.from(few), crossings };
    return { mask, tokens: null, crossings };
  }

  /** The tokens (and crossings) of the subtree of first-byte node `root` of a trie, reached in state `t`. */
  private collectSubtree(which: number, t: number, root: number): SubtreeResult {
    const { token, skip, duplicates } = this.tries[which];
    if (which === SAFE && this.slice.boundary[root] && this.loops(t)) {
      const { tokensInOrder, firstToken } = this.slice;
      // A view into the slice's own array: costs no memory (see rememberSubtree).
      return { tokens: tokensInOrder.subarray(firstToken[root], firstToken[skip[root]]), crossings: NO_CROSSINGS };
    }
    const tokens: number[] = [];
    const crossings: number[] = [];
    const tok = token[root];
    if (tok >= 0) {
      tokens.push(tok);
      const dup = duplicates.get(root);
      if (dup) tokens.push(...dup);
    }
    if (this.automaton.reachesContext[t]) {
      if (skip[root] > root + 1) crossings.push(crossingOf(which, root));
    } else if (skip[root] > root + 1) this.walk(which, t, root + 1, skip[root], null, crossings, tokens);
    return { tokens: Int32Array.from(tokens), crossings: Int32Array.from(crossings) };
  }

  private rememberSubtree(key: number, sub: SubtreeResult): void {
    const own = (a: Int32Array) => (a.buffer === this.slice.tokensInOrder.buffer ? 0 : a.length);
    const size = (r: SubtreeResult) => own(r.tokens) + r.crossings.length + 8;
    while (this.subtrees.size && this.subtreeTokens + size(sub) > MAX_CACHED_SUBTREE_TOKENS) {
      const [k, old] = this.subtrees.entries().next().value!;
      this.subtrees.delete(k);
      this.subtreeTokens -= size(old);
    }
    this.subtrees.set(key, sub);
    this.subtreeTokens += size(sub);
  }

  /**
   * Walks nodes [from, to) of a trie (a run of whole subtrees whose parent is at `state`),
   * setting the bits of tokens the automaton accepts in `mask`, or listing them in `list`. With
   * `crossings`, a node whose state popped into the unknown context is recorded and its
   * children left to the caller.
   */
  private walk(which: number, state: number, from: number, to: number, mask: Uint32Array | null, crossings: number[] | null, list: number[] | null = null): void {
    const { byte, depth, token, skip, duplicates, hasDuplicates } = this.tries[which];
    const { boundary, tokensInOrder, firstToken } = this.slice;
    const safe = which === SAFE;
    const a = this.automaton;
    const ctx = a.reachesContext;
    const ds = this.depthState;
    const base = depth[from] - 1;
    ds[base] = state;
    for (let i = from; i < to; ) {
      const d = depth[i];
      const t = a.next(ds[d - 1], byte[i]);
      if (t === DEAD) {
        i = skip[i];
        continue;
      }
      if (safe && boundary[i] && this.loops(t)) {
        // Every token below is whole safe characters, which lead back to t: all are allowed.
        const end = firstToken[skip[i]];
        for (let k = firstToken[i]; k < end; k++) {
          const x = tokensInOrder[k];
          if (list) list.push(x);
          else mask![x >>> 5] |= 1 << (x & 31);
        }
        i = skip[i];
        continue;
      }
      const tok = token[i];
      if (tok >= 0) {
        if (list) list.push(tok);
        else mask![tok >>> 5] |= 1 << (tok & 31);
        if (hasDuplicates[i])
          for (const x of duplicates.get(i)!) {
            if (list) list.push(x);
            else mask![x >>> 5] |= 1 << (x & 31);
          }
      }
      if (crossings && ctx[t]) {
        // Some run popped into the unknown context: what may follow depends on it.
        if (skip[i] > i + 1) crossings.push(crossingOf(which, i));
        i = skip[i];
        continue;
      }
      ds[d] = t;
      i++;
    }
  }
}

function lruGet<V>(m: Map<number, V>, k: number): V | undefined {
  const v = m.get(k);
  if (v !== undefined) {
    m.delete(k);
    m.set(k, v);
  }
  return v;
}

function lruSet<V>(m: Map<number, V>, k: number, v: V): void {
  if (m.size >= MAX_CACHED_MASKS) m.delete(m.keys().next().value!);
  m.set(k, v);
}
