// Token masks per automaton state: which vocabulary tokens may come next.
//
// A mask is built in two layers. The expensive layer walks the whole token trie, but from the
// state truncated to its top stack frames (StackAutomaton.truncate), so it is shared by every
// state with the same top frames: "inside a JSON string" costs one walk for all string
// properties. Where that walk pops into the cut-off context it records the trie node instead of
// deciding; the cheap layer then re-walks just those subtrees from the real state (tokens that
// close the string and go on). Final masks are cached per real state too, so steady-state steps
// are a copy.

import { DEAD, StackAutomaton } from './stack-automaton';
import { TokenTrie } from './token-trie';

export interface StateMask {
  mask: Uint32Array;
  /** Number of allowed tokens, end of text included. */
  count: number;
  /** Some allowed token (the only one when count is 1); -1 if none. */
  some: number;
}

interface SharedMask {
  /** Tokens allowed whatever lies below the cut. */
  mask: Uint32Array;
  /** Trie nodes below which the tokens depend on the context under the cut. */
  crossings: number[];
}

/** Masks kept per compiled constraint and layer: 8 KiB each for the World vocabulary. */
const MAX_CACHED_MASKS = 2048;

export class TokenMasks {
  private finals = new Map<number, StateMask>();
  private shared = new Map<number, SharedMask>();
  private depthState: Int32Array;
  readonly words: number;

  constructor(
    readonly automaton: StackAutomaton,
    readonly trie: TokenTrie,
  ) {
    this.depthState = new Int32Array(trie.maxDepth + 1);
    this.words = (trie.vocabSize + 31) >>> 5;
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
    const key = a.truncate(state);
    let sh = lruGet(this.shared, key);
    if (!sh) {
      sh = this.walkShared(key);
      lruSet(this.shared, key, sh);
    }
    const mask = sh.mask.slice();
    if (a.accepting(state)) mask[0] |= 1;
    for (const node of sh.crossings) {
      const from = a.run(state, this.trie.pathBytes(node));
      if (from !== DEAD) this.walk(from, node + 1, this.trie.skip[node], mask, null);
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
    this.walk(state, 0, this.trie.nodeCount, mask, crossings);
    return { mask, crossings };
  }

  /**
   * Walks trie nodes [from, to) (a run of whole subtrees whose parent is at `state`), setting
   * the bits of tokens the automaton accepts. With `crossings`, a node whose state popped into
   * the unknown context is recorded and its children left to the caller.
   */
  private walk(state: number, from: number, to: number, mask: Uint32Array, crossings: number[] | null): void {
    const { byte, depth, token, skip, duplicates } = this.trie;
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
      const tok = token[i];
      if (tok >= 0) {
        mask[tok >>> 5] |= 1 << (tok & 31);
        const dup = duplicates.get(i);
        if (dup) for (const x of dup) mask[x >>> 5] |= 1 << (x & 31);
      }
      if (crossings && ctx[t]) {
        // Some run popped into the unknown context: what may follow depends on it.
        if (skip[i] > i + 1) crossings.push(i);
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
