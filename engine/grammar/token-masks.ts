// Token masks per automaton state: which vocabulary tokens may come next.
//
// A state is a set of parse stacks, and a token is allowed when some stack takes its bytes, so a
// mask is the union of its stacks' masks. Each stack's part is computed from the stack cut to its
// top frame, or its top two where many tokens pop out of one (StackAutomaton.topState), and shared
// by every state holding a stack with those top frames: "inside a JSON string" is one walk for all strings, a key position is one walk per key
// rather than one per set of keys still allowed. Where a shared walk pops into the cut-off part
// it records the trie node instead of deciding; those subtrees are then re-walked from the
// stack with more of its frames (6, 12, then all: tokens that close the string and go on), so even
// those walks are shared by every stack that agrees that deep, and a mask never builds automaton
// states with a whole real stack under them. A shared walk itself looks up the subtree
// under each first byte by the state that byte leads to, so walks from states that agree after
// one byte (inside any key the schema does not declare) reuse each other's work. Final masks are
// cached per real state, so steady-state steps are a copy. Every cache is bounded in bytes.
//
// Walks go over two tries (string-slice.ts): the tokens of whole string-safe characters, where
// a state that loops on every such character (or is inside a pattern's automaton that accepts
// every run of them: safe-run-rules.ts) takes the whole subtree below it at once, and the
// thousand other tokens, walked node by node.
//
// Counted strings (maxLength, minLength) never loop: there a state whose safe characters lead
// along a chain of states (safe-char-chains.ts) allows the safe tokens that fit the chain's
// length, as one precomputed set per length, and walks only the other tokens; and a state
// deeper in a repetition than a token can reach has the mask of the place a token's length
// from its end (counted-repetition.ts), so a long string's places share one mask.

import { DEAD, StackAutomaton } from './stack-automaton';
import { collapsedPositions } from './counted-repetition';
import { SafeCharChains } from './safe-char-chains';
import { SafeRunRules } from './safe-run-rules';
import { loopsOverSafeChars, StringSlice } from './string-slice';
import { TokenTrie } from './token-trie';
import { WalkStore } from './walk-store';

export interface StateMask {
  /** The allowed tokens as a bitset over the vocabulary, or null when `tokens` lists them (few). */
  mask: Uint32Array | null;
  tokens: Int32Array | null;
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

/** A shared walk given up because more than a few tokens pop out of its cut (see FEW_CROSSINGS). */
const MANY_CROSSINGS: SharedMask = { mask: null, tokens: new Int32Array(0), crossings: [] };

/** Which of the two tries (string-slice.ts) a walk goes over. */
const SAFE = 0;
const REST = 1;

/** A crossing names its trie node and the trie. */
function crossingOf(trie: number, node: number): number {
  return node * 2 + trie;
}

/** Masks kept per compiled constraint and layer: narrow ones as lists, wide ones 8 KiB each (World vocabulary). */
const MAX_CACHED_MASKS = 2048;
/** Masks with at most this many tokens are kept as a list. */
const MASK_AS_LIST = 256;
/**
 * Token ids kept in subtree and re-walk results per compiled constraint (4 bytes each: 4 MiB): two
 * stores of two generations of a quarter each (walk-store.ts), plus a word per result.
 */
const MAX_CACHED_SUBTREE_TOKENS = 1 << 20;
/**
 * Stack frames a shared walk keeps (see compute): more frames, fewer tokens to re-walk deeper;
 * fewer, more states share a walk. 2 (a string's character and its loop, the same in every
 * string of a schema) did best on MaskBench, with re-walks at 4, 8, then the whole stack
 * (3 with re-walks from the real state before: masks over 1 ms 1.75% -> 1.21% on 100 schemas).
 */
const TOP_FRAMES = 2;
/**
 * A stack's walk is first taken from its top frame alone, and kept where few tokens pop out of
 * it (at most this many crossings, re-walked deeper): inside an object, what a key or a value's
 * characters allow does not depend on where the object is (an array's 100 counted copies put a
 * different frame under each element: a key's walk was 33,000 trie nodes and 83 states again
 * at every element). Where many do (a string's character pops after one byte), two frames.
 */
const FEW_CROSSINGS = 16;
/** Frames kept when a crossing is re-walked, deeper each time it crosses again; WHOLE: all of them. */
const WHOLE = 0;
const DEEPER_FRAMES = [TOP_FRAMES, 4, 8, WHOLE];
/** Crossing nodes are below 2^18 (two tries of at most 2^17 nodes), for crossing-walk keys. */
const CROSSING_KEYS = 1 << 18;

/**
 * A walk's result as WalkStore keeps it: the tokens of one trie subtree that a state accepts
 * (ids, all >= 1), then the trie nodes below which the tokens depend on the context under the
 * cut (crossingOf(...), stored as -1 - crossing). `tokens` is extended in place.
 */
function walkResult(tokens: number[], crossings: number[]): number[] {
  for (let k = 0; k < crossings.length; k++) tokens.push(-1 - crossings[k]);
  return tokens;
}

/** Per automaton state: whether every run of safe characters is accepted from it (see takesSafeRuns). */
const UNKNOWN = 0;
const TAKES_ALL = 1;
const NOT_ALL = 2;

export class TokenMasks {
  private finals = new Map<number, StateMask>();
  private shared = new Map<number, SharedMask>();
  /**
   * Per (state after the first byte, first byte): what that byte's trie subtree contributes to a
   * full walk. Many states lead to the same state after one byte (inside a string, any ordinary
   * character does), so a new state's full walk is mostly lookups.
   */
  private subtrees = new WalkStore(MAX_CACHED_SUBTREE_TOKENS / 4);
  /** Per (state at a crossing node, crossing): what the node's subtree holds from there. */
  private crossingWalks = new WalkStore(MAX_CACHED_SUBTREE_TOKENS / 4);
  private depthState: Int32Array;
  private slice: StringSlice;
  /** The safe-token trie and the rest, indexed by SAFE and REST. */
  private tries: [TokenTrie, TokenTrie];
  /** Per state: whether every run of whole safe characters is accepted from it (UNKNOWN until checked). */
  private safeRunFlags = new Uint8Array(1024);
  /** The grammar's rules that are automata accepting every safe run (safe-run-rules.ts). */
  private safeRunRules: SafeRunRules;
  /** Per state: the state whose mask it has (counted-repetition.ts), -1 until known. */
  private canonicalOf: Int32Array = new Int32Array(1024).fill(-1);
  /** Frame positions mapped for masks; null when the grammar has no long counted repetition. */
  private collapsed: Int32Array | null;
  /** Counted strings: how many safe characters a state takes in a row, one state per character. */
  private chains: SafeCharChains;
  private scratch: Uint32Array;
  /** walkShared's bitset (compute's scratch holds the state's mask meanwhile). */
  private sharedScratch: Uint32Array;
  /** walkShared's set of first bytes whose subtrees are taken whole. */
  private loopFirst = new Uint32Array(8);
  readonly words: number;
  /** Trie nodes under the roots of every node-by-node walk so far: the work masks did (for tests). */
  walkedNodes = 0;

  constructor(
    readonly automaton: StackAutomaton,
    readonly trie: TokenTrie,
  ) {
    this.depthState = new Int32Array(trie.maxDepth + 1);
    this.words = (trie.vocabSize + 31) >>> 5;
    this.scratch = new Uint32Array(this.words);
    this.sharedScratch = new Uint32Array(this.words);
    this.slice = StringSlice.of(trie);
    this.safeRunRules = new SafeRunRules(automaton.g);
    this.tries = [this.slice.safe, this.slice.rest];
    this.collapsed = collapsedPositions(automaton.g, Math.max(2, trie.maxDepth));
    this.chains = new SafeCharChains(automaton, this.slice.maxChars, (s) => this.canonical(s));
  }

  /**
   * Every run of whole safe characters is accepted from the state, so every safe token below it
   * is allowed: it loops on each (inside a string), or it is inside a rule automaton that takes
   * every safe run (safe-run-rules.ts). Checked once per state.
   */
  private takesSafeRuns(state: number): boolean {
    let f = state < this.safeRunFlags.length ? this.safeRunFlags[state] : UNKNOWN;
    if (f === UNKNOWN) {
      const a = this.automaton;
      const takes = loopsOverSafeChars(a, state) || this.insideSafeRunRule(state);
      f = takes ? TAKES_ALL : NOT_ALL;
      // The check may have added states: grow to cover them all.
      if (state >= this.safeRunFlags.length) {
        const grown = new Uint8Array(Math.max(2 * this.safeRunFlags.length, this.automaton.stateCount + 1024));
        grown.set(this.safeRunFlags);
        this.safeRunFlags = grown;
      }
      this.safeRunFlags[state] = f;
    }
    return f === TAKES_ALL;
  }

  /** The state holds a whole rule automaton that takes every safe run (safe-run-rules.ts). */
  private insideSafeRunRule(state: number): boolean {
    const a = this.automaton;
    return this.safeRunRules.holdsWholeRule(a.stacksOf(state), (n) => a.nodeTop(n), (n) => a.nodeRest(n));
  }

  get(state: number): StateMask {
    const key = this.canonical(state);
    let m = lruGet(this.finals, key);
    if (!m) {
      m = this.compute(key);
      lruSet(this.finals, key, m);
    }
    return m;
  }

  /** The state whose mask `state` has: itself, or its frames past long counted repetitions mapped (counted-repetition.ts). */
  private canonical(state: number): number {
    if (!this.collapsed) return state;
    if (state >= this.canonicalOf.length) this.canonicalOf = grownInt32(this.canonicalOf, this.automaton.stateCount);
    let c = this.canonicalOf[state];
    if (c < 0) {
      c = this.automaton.remapped(state, this.collapsed);
      if (state >= this.canonicalOf.length) this.canonicalOf = grownInt32(this.canonicalOf, this.automaton.stateCount);
      this.canonicalOf[state] = c;
    }
    return c;
  }

  /** A counted string's place (not a loop: loops share their walks across every string already). */
  private counted(state: number): boolean {
    const run = this.chains.run(state);
    return run > 0 && this.chains.successor(state) !== state && (run >= this.chains.cap || this.chains.closed(state));
  }

  private compute(state: number): StateMask {
    if (this.counted(state)) return this.computeCounted(state, this.chains.run(state));
    const a = this.automaton;
    // A counted string beside other parses (a string with maxLength in one anyOf branch, any
    // value in another): the counted stacks alone are a chain, and walked with the rest their
    // every character crosses out of the shared walks' cut. Each group of stacks over one parent
    // has its own mask (cached as a state's), and the state's is their union.
    const groups = a.groupsByParent(state);
    if (groups && groups.some((g) => this.counted(this.canonical(g)))) {
      const parts = groups.map((g) => this.get(g));
      const mask = this.scratch.fill(0);
      for (const p of parts) {
        if (p.mask) for (let w = 0; w < p.mask.length; w++) mask[w] |= p.mask[w];
        else for (const t of p.tokens!) mask[t >>> 5] |= 1 << (t & 31);
      }
      return this.finish(state, mask);
    }
    // Built in a scratch bitset; kept as a list when narrow, so most cached masks are small.
    const mask = this.scratch.fill(0);
    // Inside a rule automaton that takes every safe run (a pattern before its match) the stacks
    // together allow every safe token, though each alone takes few (a stack per next letter):
    // only the rest is walked per stack. (Whether the state loops is left to its stacks' cuts:
    // checked on the state itself, it built states with whole stacks under them, 1% more.)
    const restOnly = this.insideSafeRunRule(state);
    if (restOnly) mask.set(this.slice.safeMask);
    for (const node of a.stacksOf(state)) {
      if (node === 0) continue;
      let sh = this.sharedWalk(a.topState(node, 1), FEW_CROSSINGS, restOnly);
      let level = 0;
      if (sh === MANY_CROSSINGS) {
        sh = this.sharedWalk(a.topState(node, TOP_FRAMES), Infinity, restOnly);
        level = 1;
      }
      const m = sh.mask;
      if (m) for (let w = 0; w < m.length; w++) mask[w] |= m[w];
      else for (const t of sh.tokens!) mask[t >>> 5] |= 1 << (t & 31);
      if (sh.crossings.length) this.resolveCrossings(node, sh.crossings, level, mask);
    }
    return this.finish(state, mask);
  }

  /**
   * The mask of a state `run` places into a counted string (llguidance's length slices): a safe
   * token is allowed exactly when its characters fit in the run, as each takes one step of the
   * chain whichever it is, and past the run nothing safe is taken (closed), or every safe
   * token fits. Only the thousand other tokens (quotes, escapes, partial characters) are walked,
   * from the state itself.
   */
  private computeCounted(state: number, run: number): StateMask {
    const mask = this.scratch;
    mask.set(this.slice.safeUpToChars(run));
    this.walk(REST, state, 0, this.slice.rest.nodeCount, mask, null);
    return this.finish(state, mask);
  }

  /** The state's mask from its bits in `mask` (scratch): end of text added, counted, narrow ones as a list. */
  private finish(state: number, mask: Uint32Array): StateMask {
    if (this.automaton.accepting(state)) mask[0] |= 1;
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
    if (count > MASK_AS_LIST) return { mask: mask.slice(), tokens: null, count, some };
    return { mask: null, tokens: listBits(mask, count), count, some };
  }

  /** Copies the state's mask into `out` (which has at least `words` words). */
  fill(state: number, out: Uint32Array): StateMask {
    const m = this.get(state);
    if (m.mask) out.set(m.mask);
    else {
      out.fill(0, 0, this.words);
      for (const t of m.tokens!) out[t >>> 5] |= 1 << (t & 31);
    }
    return m;
  }

  /**
   * Sets the tokens of the crossings' subtrees that stack `node` accepts: each re-walked from
   * the stack cut to DEEPER_FRAMES[level] frames, and what crosses that cut again one level
   * deeper. The walks are cached by the state at the crossing node, so stacks that agree that
   * deep share them.
   */
  private resolveCrossings(node: number, crossings: ArrayLike<number>, level: number, mask: Uint32Array): void {
    const a = this.automaton;
    const frames = DEEPER_FRAMES[level];
    const cut = frames === WHOLE ? a.wholeStack(node) : a.topState(node, frames);
    let again: number[] | null = null;
    for (let k = 0; k < crossings.length; k++) {
      const c = crossings[k];
      const which = c & 1, at = c >>> 1;
      const trie = this.tries[which];
      const from = a.run(cut, trie.pathBytes(at));
      if (from === DEAD) continue;
      if (a.reachesContext[from]) {
        // This cut is still too shallow for the node itself: its whole subtree goes one deeper.
        (again ??= []).push(c);
        continue;
      }
      const key = from * CROSSING_KEYS + c;
      let rec = this.crossingWalks.get(key);
      if (rec < 0) {
        const tokens: number[] = [];
        const deeper: number[] = [];
        this.walk(which, from, at + 1, trie.skip[at], null, deeper, tokens);
        rec = this.crossingWalks.add(key, walkResult(tokens, deeper));
      }
      const d = this.crossingWalks.data;
      for (let i = rec + 1, end = rec + 1 + d[rec]; i < end; i++) {
        const x = d[i];
        if (x > 0) mask[x >>> 5] |= 1 << (x & 31);
        else (again ??= []).push(-1 - x);
      }
    }
    // The whole stack has no unknown context to cross into.
    if (again) this.resolveCrossings(node, again, level + 1, mask);
  }

  /**
   * The shared walk of a cut state (see compute), cached; MANY_CROSSINGS when it has more than
   * `most` (a cut is always walked with the same `most`). With `restOnly`, of the tokens outside
   * the safe slice alone.
   */
  private sharedWalk(cut: number, most: number, restOnly: boolean): SharedMask {
    const key = cut * 2 + (restOnly ? 1 : 0);
    let sh = lruGet(this.shared, key);
    if (!sh) {
      sh = this.walkShared(cut, most, restOnly);
      lruSet(this.shared, key, sh);
    }
    return sh;
  }

  private walkShared(state: number, most: number, restOnly: boolean): SharedMask {
    const literal = this.automaton.literalRun(state);
    if (literal) return this.walkLiteral(literal.bytes, literal.after, restOnly);
    // Built in a scratch bitset and copied only when wide: most shared walks are narrow, and an
    // 8 KiB buffer each was external memory that made the collector run full collections.
    const mask = this.sharedScratch.fill(0);
    const crossings: number[] = [];
    const a = this.automaton;
    // A state inside a string takes every safe token: only the rest is walked.
    const allSafe = restOnly || this.takesSafeRuns(state);
    if (allSafe && !restOnly) mask.set(this.slice.safeMask);
    const { boundary } = this.slice;
    const loopFirst = this.loopFirst.fill(0);
    let anyLoopFirst = false;
    for (let which = allSafe ? REST : SAFE; which <= REST; which++) {
      const { byte, skip, nodeCount } = this.tries[which];
      for (let i = 0; i < nodeCount; i = skip[i]) {
        const t = a.next(state, byte[i]);
        if (t === DEAD) continue;
        if (which === SAFE && boundary[i] && this.takesSafeRuns(t)) {
          // The whole subtree is allowed; such first bytes are added together as one block below.
          loopFirst[byte[i] >>> 5] |= 1 << (byte[i] & 31);
          anyLoopFirst = true;
          continue;
        }
        const key = (t * 256 + byte[i]) * 2 + which;
        let rec = this.subtrees.get(key);
        if (rec < 0) rec = this.subtrees.add(key, this.collectSubtree(which, t, i));
        const d = this.subtrees.data;
        for (let k = rec + 1, end = rec + 1 + d[rec]; k < end; k++) {
          const x = d[k];
          if (x > 0) mask[x >>> 5] |= 1 << (x & 31);
          else crossings.push(-1 - x);
        }
        // Given up early: the caller walks a deeper cut instead.
        if (crossings.length > most) return MANY_CROSSINGS;
      }
    }
    if (anyLoopFirst) {
      const block = this.slice.blockOf(loopFirst);
      for (let w = 0; w < mask.length; w++) mask[w] |= block[w];
    }
    // Narrow walks (a key, a keyword) allow few tokens: a list ORs faster than 2,048 words.
    let count = 0;
    for (let w = 0; w < mask.length && count <= MASK_AS_LIST; w++) for (let x = mask[w]; x !== 0; x &= x - 1) count++;
    if (count <= MASK_AS_LIST) return { mask: null, tokens: listBits(mask, count), crossings };
    return { mask: mask.slice(), tokens: null, crossings };
  }

  /**
   * walkShared from a stack that reads `bytes` one way (a key's name and what follows it): the
   * tries are followed along the bytes without an automaton state per byte; tokens that stop
   * inside them are allowed, and those that go past are walked from `after`, the state after them.
   */
  private walkLiteral(bytes: Uint8Array, after: number, restOnly: boolean): SharedMask {
    const tokens: number[] = [];
    const crossings: number[] = [];
    const take = (trie: TokenTrie, n: number) => {
      if (trie.token[n] >= 0) tokens.push(trie.token[n]);
      if (trie.hasDuplicates[n]) tokens.push(...trie.duplicates.get(n)!);
    };
    for (let which = restOnly ? REST : SAFE; which <= REST; which++) {
      const trie = this.tries[which];
      const { byte, skip } = trie;
      // Siblings [from, to): first the trie's first bytes, then a node's children.
      let from = 0, to = trie.nodeCount;
      for (let d = 0; d < bytes.length; d++) {
        let n = from;
        while (n < to && byte[n] !== bytes[d]) n = skip[n];
        if (n >= to) break;
        if (d < bytes.length - 1) {
          take(trie, n);
          from = n + 1;
          to = skip[n];
          continue;
        }
        if (after === DEAD) break;
        if (which === SAFE && this.slice.boundary[n] && this.takesSafeRuns(after)) {
          // As walk(): every token below is whole safe characters, which `after` takes.
          const { tokensInOrder, firstToken } = this.slice;
          for (let k = firstToken[n]; k < firstToken[skip[n]]; k++) tokens.push(tokensInOrder[k]);
          break;
        }
        take(trie, n);
        if (skip[n] > n + 1) {
          if (this.automaton.reachesContext[after]) crossings.push(crossingOf(which, n));
          else this.walk(which, after, n + 1, skip[n], null, crossings, tokens);
        }
      }
    }
    if (tokens.length <= MASK_AS_LIST) return { mask: null, tokens: Int32Array.from(tokens), crossings };
    const mask = new Uint32Array(this.words);
    for (const t of tokens) mask[t >>> 5] |= 1 << (t & 31);
    return { mask, tokens: null, crossings };
  }

  /** The tokens (and crossings) of the subtree of first-byte node `root` of a trie, reached in state `t`. */
  private collectSubtree(which: number, t: number, root: number): number[] {
    // (A safe subtree whose state takes every safe run never comes here: walkShared takes it as a block.)
    const { token, skip, duplicates } = this.tries[which];
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
    return walkResult(tokens, crossings);
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
    this.walkedNodes += to - from;
    const base = depth[from] - 1;
    ds[base] = state;
    for (let i = from; i < to; ) {
      const d = depth[i];
      const t = a.next(ds[d - 1], byte[i]);
      if (t === DEAD) {
        i = skip[i];
        continue;
      }
      if (safe && boundary[i] && this.takesSafeRuns(t)) {
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

/** The set bits of a bitset that has `count` of them, as a list of ids. */
function listBits(mask: Uint32Array, count: number): Int32Array {
  const out = new Int32Array(count);
  let k = 0;
  for (let w = 0; w < mask.length && k < count; w++)
    for (let x = mask[w]; x !== 0; x &= x - 1) out[k++] = w * 32 + 31 - Math.clz32(x & -x);
  return out;
}

function grownInt32(a: Int32Array, atLeast: number): Int32Array {
  const out = new Int32Array(Math.max(2 * a.length, atLeast + 1024)).fill(-1);
  out.set(a);
  return out;
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
