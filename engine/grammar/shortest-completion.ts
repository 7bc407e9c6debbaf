// The shortest byte string that completes the input from a recognizer state. A scheduler near
// its token budget follows it instead of sampling, so a constrained output is closed properly
// rather than cut off; its length, known per state in constant time, is what the scheduler
// reserves before every sampled token.

import { BYTES, END, GrammarTables, PackedGrammar } from './flat-grammar';
import { StackAutomaton } from './stack-automaton';

export type RuleLengths = Pick<GrammarTables, 'minLen' | 'bestAlt'>;

/**
 * Fewest bytes per rule, by Knuth's generalisation of Dijkstra's algorithm: a rule's length is
 * final when it is the smallest pending one, and an alternative becomes a candidate once all the
 * rules it references are final. O(size log rules), no fixpoint sweeps (a chain of 10,000 rules
 * listed backwards would need 10,000 sweeps). A best alternative only references rules that were
 * final before its own, so following best alternatives always terminates.
 */
export function ruleMinLengths(g: PackedGrammar): RuleLengths {
  const { kind, arg, altStarts, ruleAltIndex } = g;
  const nRules = ruleAltIndex.length - 1;
  const nAlts = altStarts.length;
  const minLen = new Float64Array(nRules).fill(Infinity);
  const bestAlt = new Int32Array(nRules).fill(-1);
  const owner = new Int32Array(nAlts);
  const pending = new Int32Array(nAlts);
  const sum = new Float64Array(nAlts);
  // References to each rule, as alternative indices (CSR).
  const useCount = new Int32Array(nRules + 1);
  for (let r = 0; r < nRules; r++) {
    for (let k = ruleAltIndex[r]; k < ruleAltIndex[r + 1]; k++) {
      owner[k] = r;
      for (let p = altStarts[k]; kind[p] !== END; p++) {
        if (kind[p] === BYTES) sum[k]++;
        else {
          pending[k]++;
          useCount[arg[p] + 1]++;
        }
      }
    }
  }
  for (let r = 0; r < nRules; r++) useCount[r + 1] += useCount[r];
  const uses = new Int32Array(useCount[nRules]);
  const fill = useCount.slice(0, nRules);
  for (let k = 0; k < nAlts; k++) for (let p = altStarts[k]; kind[p] !== END; p++) if (kind[p] !== BYTES) uses[fill[arg[p]]++] = k;

  const heap = new MinHeap();
  for (let k = 0; k < nAlts; k++) if (pending[k] === 0) heap.push(sum[k], k);
  while (heap.size) {
    const [len, k] = heap.pop();
    const r = owner[k];
    if (bestAlt[r] >= 0) continue;
    minLen[r] = len;
    bestAlt[r] = altStarts[k];
    for (let u = useCount[r]; u < useCount[r + 1]; u++) {
      const alt = uses[u];
      sum[alt] += len;
      if (--pending[alt] === 0) heap.push(sum[alt], alt);
    }
  }
  return { minLen, bestAlt };
}

/** A binary min-heap of (key, value) number pairs, ordered by key then value (ties go to the earlier alternative). */
class MinHeap {
  private keys: number[] = [];
  private vals: number[] = [];
  get size(): number {
    return this.keys.length;
  }
  push(key: number, val: number): void {
    const { keys, vals } = this;
    let i = keys.length;
    keys.push(key);
    vals.push(val);
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (keys[up] < key || (keys[up] === key && vals[up] <= val)) break;
      keys[i] = keys[up];
      vals[i] = vals[up];
      i = up;
    }
    keys[i] = key;
    vals[i] = val;
  }
  pop(): [number, number] {
    const { keys, vals } = this;
    const top: [number, number] = [keys[0], vals[0]];
    const key = keys.pop()!;
    const val = vals.pop()!;
    const n = keys.length;
    if (n > 0) {
      let i = 0;
      for (;;) {
        let c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && (keys[c + 1] < keys[c] || (keys[c + 1] === keys[c] && vals[c + 1] < vals[c]))) c++;
        if (keys[c] > key || (keys[c] === key && vals[c] >= val)) break;
        keys[i] = keys[c];
        vals[i] = vals[c];
        i = c;
      }
      keys[i] = key;
      vals[i] = val;
    }
    return top;
  }
}

/** Stack nodes 0 (empty stack) and 1 (unknown context) carry no grammar position. */
const FIRST_REAL_NODE = 2;

export class ShortestCompletion {
  /** Fewest bytes from each position to the end of its alternative. */
  private suffix: Float64Array;
  /** Per stack node: fewest bytes that empty the stack. */
  private nodeLen: number[] = [0, 0];
  private stateLen: number[] = [];

  constructor(private g: GrammarTables, private a: StackAutomaton) {
    const { kind, arg, altStarts, minLen } = g;
    this.suffix = new Float64Array(kind.length);
    for (let k = 0; k < altStarts.length; k++) {
      let end = altStarts[k];
      while (kind[end] !== END) end++;
      for (let p = end - 1; p >= altStarts[k]; p--) this.suffix[p] = this.suffix[p + 1] + (kind[p] === BYTES ? 1 : minLen[arg[p]]);
    }
  }

  /** Bytes of the shortest completion from `state` (0 when accepting); constant time once seen. */
  length(state: number): number {
    let len = this.stateLen[state];
    if (len === undefined) {
      len = Infinity;
      for (const node of this.a.stacksOf(state)) len = Math.min(len, this.lengthOfNode(node));
      this.stateLen[state] = len;
    }
    return len;
  }

  private lengthOfNode(node: number): number {
    const known = this.nodeLen[node];
    if (known !== undefined) return known;
    // Up to the nearest node already measured, then back down (no recursion: stacks can be deep).
    const path: number[] = [];
    let n = node;
    while (this.nodeLen[n] === undefined) {
      path.push(n);
      n = this.a.nodeRest(n);
    }
    let len = this.nodeLen[n];
    for (let i = path.length - 1; i >= 0; i--) {
      len += this.suffix[this.a.nodeTop(path[i])];
      this.nodeLen[path[i]] = len;
    }
    return len;
  }

  /** Bytes that take `state` to acceptance, shortest first (at most maxBytes of them). */
  bytes(state: number, maxBytes = Infinity): Uint8Array {
    let best = -1;
    let bestLen = Infinity;
    for (const node of this.a.stacksOf(state)) {
      const len = this.lengthOfNode(node);
      if (len < bestLen) {
        bestLen = len;
        best = node;
      }
    }
    const { kind, arg, byteSets, bestAlt } = this.g;
    const out: number[] = [];
    // Positions still to complete, innermost last: the chosen stack's frames, then the
    // continuations pushed while descending into best alternatives.
    const todo: number[] = [];
    for (let n = best; n >= FIRST_REAL_NODE; n = this.a.nodeRest(n)) todo.push(this.a.nodeTop(n));
    todo.reverse();
    const limit = Math.min(maxBytes, bestLen);
    while (todo.length && out.length < limit) {
      for (let p = todo.pop()!; kind[p] !== END && out.length < limit; p++) {
        if (kind[p] === BYTES) out.push(pickByte(byteSets, arg[p]));
        else {
          if (kind[p + 1] !== END) todo.push(p + 1);
          todo.push(bestAlt[arg[p]]);
          break;
        }
      }
    }
    return Uint8Array.from(out);
  }
}

/** A readable member of a byte set: printable ASCII (letters and digits first) when there is one. */
function pickByte(sets: Uint8Array, set: number): number {
  const base = set * 256;
  for (const b of PREFERRED) if (sets[base + b]) return b;
  for (let b = 0; b < 256; b++) if (sets[base + b]) return b;
  return 0x20;
}

const PREFERRED: number[] = (() => {
  const order: number[] = [];
  for (let c = 0x61; c <= 0x7a; c++) order.push(c);
  for (let c = 0x30; c <= 0x39; c++) order.push(c);
  for (let c = 0x41; c <= 0x5a; c++) order.push(c);
  for (let c = 0x20; c < 0x7f; c++) if (!order.includes(c)) order.push(c);
  return order;
})();
