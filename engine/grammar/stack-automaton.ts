// The recognizer: a pushdown automaton over bytes, run as a lazily built deterministic
// automaton whose states are sets of parse stacks. Stacks are hash-consed linked lists
// (node = position + parent node), so a state is a sorted list of node ids and equal
// configurations share one id. Each state keeps a 256-entry transition row filled on demand,
// so after warm-up a byte step is one array read; this is what makes walking the vocabulary
// trie per decoding step affordable, and it is shared by every request using the grammar.

import { BYTES, END, GrammarTables } from './flat-grammar';
import { IntPairIndex, IntPairSet } from './int-pair-index';

/** Transition not computed yet. */
const UNKNOWN = -2;
/** No stack survives the byte. */
export const DEAD = -1;
/** Most groups groupsByParent splits a state into (more: not split). */
const MAX_GROUPS = 8;
/** The node standing for an unknown rest of the stack. */
const CONTEXT = 1;
/** Transition rows per page (see transPages): 64 rows of 256 bytes, 64 KiB a page. */
const TRANS_PAGE_BITS = 6;
const TRANS_PAGE_STATES = 1 << TRANS_PAGE_BITS;
const TRANS_PAGE_MASK = TRANS_PAGE_STATES - 1;

export class StackAutomaton {
  /**
   * Node 0 is the empty stack: the whole input so far is a complete sentence. Node 1 stands for
   * "the rest of the stack, unknown": stacks cut to their top frames (see topState) end in it, and a state
   * containing it means some run popped into that unknown context.
   */
  private nodePos: number[] = [-1, -1];
  private nodeParent: number[] = [-1, -1];
  /** Node id per (position, parent). */
  private nodeIndex = new IntPairIndex();

  /**
   * Every state's sorted stack node ids, one state after another in one array (state s holds
   * pool[stackStart[s] .. stackStart[s + 1])): a state is no object of its own, so the states
   * of every cached constraint cost a full collection nothing but a few large arrays.
   */
  private pool = new Int32Array(4096);
  private stackStart = new Int32Array(1025);
  private states = 0;
  /** Per state: the hash of its stacks; and the state ids by hash (open addressing, -1 empty). */
  private stateHash = new Int32Array(1024);
  private stateSlots = new Int32Array(2048).fill(-1);
  /**
   * Next state per (state, byte) (UNKNOWN until computed, DEAD when none), in pages of
   * TRANS_PAGE_STATES rows of 256: a page a few thousand states, not a small array per state for
   * the collector to track, and never copied. One buffer grown by doubling copied every row built
   * so far at 8,192, 16,384, 32,768 and 65,536 states: 16–64 MiB inside the one mask that
   * crossed it (the slowest masks of MaskBench, 20–80 ms in detekt's schema).
   */
  private transPages: Int32Array[] = [];
  /**
   * Bytes of one class are in the same byte sets of the whole grammar, so from any state they
   * lead to the same next state: one computed transition fills its whole class (the 64
   * continuation bytes of a UTF-8 character are usually one class).
   */
  private readonly byteClass: Uint8Array;
  /** Per state: 1 when it contains the context marker (node 1). */
  readonly reachesContext: number[] = [];
  readonly initial: number;

  constructor(readonly g: GrammarTables) {
    this.byteClass = byteClasses(g.byteSets);
    this.setStamp = new Int32Array(g.byteSets.length >>> 8);
    this.beginCollect();
    this.seen.clear();
    for (let k = g.ruleAltIndex[g.root]; k < g.ruleAltIndex[g.root + 1]; k++) this.closure(g.altStarts[k], 0);
    this.initial = this.internCollected();
  }

  get stateCount(): number {
    return this.states;
  }

  /** The state's sorted stack node ids (a view: valid as long as the caller keeps it). */
  stacksOf(state: number): Int32Array {
    return this.pool.subarray(this.stackStart[state], this.stackStart[state + 1]);
  }

  /** How many stacks (parses) the state holds. */
  stackCount(state: number): number {
    return this.stackStart[state + 1] - this.stackStart[state];
  }

  /** Stacks of every state built so far, together. */
  get parseCount(): number {
    return this.stackStart[this.states];
  }

  accepting(state: number): boolean {
    return this.stackCount(state) > 0 && this.pool[this.stackStart[state]] === 0;
  }

  /** True when the only way on is the end of text. */
  finished(state: number): boolean {
    return this.stackCount(state) === 1 && this.pool[this.stackStart[state]] === 0;
  }

  next(state: number, byte: number): number {
    const page = this.transPages[state >>> TRANS_PAGE_BITS];
    const base = (state & TRANS_PAGE_MASK) << 8;
    const t = page[base + byte];
    if (t !== UNKNOWN) return t;
    // computeNext may add pages, never replaces one: `page` stays this state's.
    const next = this.computeNext(state, byte);
    const cls = this.byteClass, c = cls[byte];
    for (let b = 0; b < 256; b++) if (cls[b] === c) page[base + b] = next;
    return next;
  }

  /** Bytes of transition rows allocated so far (pages; for tests). */
  get transitionBytes(): number {
    return this.transPages.length * TRANS_PAGE_STATES * 256 * 4;
  }

  /** Runs bytes from a state; DEAD if any byte is refused. */
  run(state: number, bytes: Uint8Array): number {
    for (let i = 0; i < bytes.length && state >= 0; i++) state = this.next(state, bytes[i]);
    return state;
  }

  /** Top position and parent of a stack node (for shortest-completion search). */
  nodeTop(node: number): number {
    return this.nodePos[node];
  }
  nodeRest(node: number): number {
    return this.nodeParent[node];
  }

  private topStates = new Map<number, number>();

  /**
   * The state of the one stack `node` with all but its top `frames` frames replaced by the
   * context marker (the stack itself when it is no deeper). A state's tokens are the union of
   * its stacks' tokens, and this is the part of one stack's that depends on its top alone: the
   * key under which masks are shared between every state holding such a stack.
   */
  topState(node: number, frames: number): number {
    if (frames > 15) throw new RangeError('topState keeps at most 15 frames');
    const key = node * 16 + frames;
    let s = this.topStates.get(key);
    if (s === undefined) {
      s = this.internOne(this.cutNode(node, frames));
      this.topStates.set(key, s);
    }
    return s;
  }

  /** Stack node cut to its top frames over the context marker, per node * 16 + frames. */
  private cutNodes = new Map<number, number>();

  /** The stack `node` with all but its top `frames` frames replaced by the context marker (itself when no deeper). */
  private cutNode(node: number, frames: number): number {
    const key = node * 16 + frames;
    let out = this.cutNodes.get(key);
    if (out === undefined) {
      const above: number[] = [];
      let n = node;
      for (; n > CONTEXT && above.length < frames; n = this.nodeParent[n]) above.push(this.nodePos[n]);
      out = n > CONTEXT ? CONTEXT : n;
      for (let i = above.length - 1; i >= 0; i--) out = this.intern(above[i], out);
      this.cutNodes.set(key, out);
    }
    return out;
  }

  /**
   * The stacks of `state` whose next byte may be one of `bytes` (a 256-entry 0/1 table), each cut
   * to its top `frames` frames over the context marker, as one state, when they all have one same
   * node under those frames (`below`); null otherwise. A run from `state` that pops into the marker
   * goes on from `below` (afterPop), so what those stacks do with such bytes is the same from
   * every state whose stacks agree that deep (safe-char-chains.ts: a counted string's chain).
   */
  cutTakers(state: number, bytes: Uint8Array, frames: number): { cut: number; below: number } | null {
    if (frames > 15) throw new RangeError('cutTakers keeps at most 15 frames');
    // Copied: interning may grow the pool that stacksOf views.
    const stacks = Int32Array.from(this.stacksOf(state));
    const cut: number[] = [];
    let below = -1;
    for (const node of stacks) {
      if (node <= CONTEXT || !this.takesAny(this.g.arg[this.nodePos[node]], bytes)) continue;
      let n = node;
      for (let k = 0; k < frames && n > CONTEXT; k++) n = this.nodeParent[n];
      if (n <= CONTEXT || (below >= 0 && n !== below)) return null;
      below = n;
      cut.push(this.cutNode(node, frames));
    }
    if (below < 0) return null;
    this.beginCollect();
    for (const n of cut) this.collect(n);
    return { cut: this.internCollected(), below };
  }

  private afterPops = new Map<number, number>();

  /** The state a run is in when it pops every frame above stack node `node` (it goes on at `node`'s position). */
  afterPop(node: number): number {
    let s = this.afterPops.get(node);
    if (s === undefined) {
      this.beginCollect();
      this.seen.clear();
      this.closure(this.nodePos[node], this.nodeParent[node]);
      s = this.collectedCount ? this.internCollected() : DEAD;
      this.afterPops.set(node, s);
    }
    return s;
  }

  private wholeStates = new Map<number, number>();

  /** The state of the one stack `node`, all of it (topState without a cut). */
  wholeStack(node: number): number {
    let s = this.wholeStates.get(node);
    if (s === undefined) {
      s = this.internOne(node);
      this.wholeStates.set(node, s);
    }
    return s;
  }

  /** The state of the context marker alone: a cut-off run that has popped every frame it had. */
  get contextOnly(): number {
    return (this.contextState ??= this.internOne(CONTEXT));
  }
  private contextState: number | undefined;

  /** Per byte table given to topFrames: per byte set, 1 when it holds one of the table's bytes (filled on use). */
  private setTakes = new WeakMap<Uint8Array, Int8Array>();

  private takesAny(set: number, bytes: Uint8Array): boolean {
    let known = this.setTakes.get(bytes);
    if (!known) this.setTakes.set(bytes, (known = new Int8Array(this.g.byteSets.length >>> 8).fill(-1)));
    if (known[set] < 0) {
      known[set] = 0;
      for (let b = 0, at = set * 256; b < 256; b++) if (bytes[b] && this.g.byteSets[at + b]) known[set] = 1;
    }
    return known[set] === 1;
  }

  /**
   * The stacks of `state` whose next byte may be one of `bytes` (a 256-entry 0/1 table): when
   * they all have one parent under their top frame, the state of those top frames over the
   * context marker (shared by every state with the same tops) and that parent node; null when
   * there are none or the parents differ.
   */
  topFramesOverOneParent(state: number, bytes: Uint8Array): { tops: number; parent: number } | null {
    let parent = -1;
    this.beginCollect();
    for (const n of this.stacksOf(state)) {
      if (n <= CONTEXT || !this.takesAny(this.g.arg[this.nodePos[n]], bytes)) continue;
      const p = this.nodeParent[n];
      if (parent < 0) parent = p;
      else if (p !== parent) return null;
      this.collect(this.intern(this.nodePos[n], CONTEXT));
    }
    return parent < 0 ? null : { tops: this.internCollected(), parent };
  }

  /**
   * The state's stacks grouped by the node under their top frame, each group as a state (the
   * end-of-text and context markers go with the first group); null when there is one group. A
   * token is allowed from the state exactly when some group allows it.
   */
  groupsByParent(state: number): number[] | null {
    const stacks = this.stacksOf(state);
    const parents: number[] = [];
    for (let k = 0; k < stacks.length; k++) {
      const n = stacks[k];
      if (n <= CONTEXT) continue;
      const p = this.nodeParent[n];
      if (!parents.includes(p)) {
        if (parents.length >= MAX_GROUPS) return null;
        parents.push(p);
      }
    }
    if (parents.length < 2) return null;
    // Copied: interning may grow the pool that stacksOf views.
    const nodes = Int32Array.from(stacks);
    return parents.map((p, g) => {
      this.beginCollect();
      for (let k = 0; k < nodes.length; k++) {
        const n = nodes[k];
        if (n <= CONTEXT ? g === 0 : this.nodeParent[n] === p) this.collect(n);
      }
      return this.internCollected();
    });
  }

  /** Some stack of `state` may take one of `bytes` next (a context marker counts as may, unless `markerRefuses`). */
  mayTake(state: number, bytes: Uint8Array, markerRefuses = false): boolean {
    for (const n of this.stacksOf(state)) if ((n === CONTEXT && !markerRefuses) || (n > CONTEXT && this.takesAny(this.g.arg[this.nodePos[n]], bytes))) return true;
    return false;
  }

  private literalRuns = new Map<number, { bytes: Uint8Array; after: number } | null>();

  /**
   * When `state` is one stack whose top goes on through positions of one byte each (a key's
   * name, a keyword): those bytes (two or more) and the state after them, built without the
   * states in between (reading them can only go that one way).
   */
  literalRun(state: number): { bytes: Uint8Array; after: number } | null {
    let run = this.literalRuns.get(state);
    if (run === undefined) {
      run = null;
      const stacks = this.stacksOf(state);
      if (stacks.length === 1 && stacks[0] > CONTEXT) {
        const { kind, arg } = this.g;
        const node = stacks[0];
        const bytes: number[] = [];
        let p = this.nodePos[node];
        for (; kind[p] === BYTES; p++) {
          const m = this.setMembers(arg[p]);
          if (m.length !== 1) break;
          bytes.push(m[0]);
        }
        // Stops at the first position that is not one byte: the closure from there is the state after.
        if (bytes.length >= 2) {
          this.beginCollect();
          this.seen.clear();
          this.closure(p, this.nodeParent[node]);
          run = { bytes: Uint8Array.from(bytes), after: this.collectedCount ? this.internCollected() : DEAD };
        }
      }
      this.literalRuns.set(state, run);
    }
    return run;
  }

  private mappedNodes = new Map<number, number>();
  private mappedBy: Int32Array | null = null;

  /**
   * The state whose stacks are this state's with the position of every frame p replaced by
   * map[p] (the state itself when no frame changes). For one map at a time: the mapped stack
   * nodes are remembered, so stacks that share their lower frames are mapped once.
   */
  remapped(state: number, map: Int32Array): number {
    if (map !== this.mappedBy) {
      this.mappedBy = map;
      this.mappedNodes.clear();
    }
    let changed = false;
    const frames: number[] = [];
    const stacks = this.stacksOf(state);
    // Mapped nodes are collected only once one differs (most states map to themselves).
    for (let k = 0; k < stacks.length; k++) {
      const node = stacks[k];
      // The frames above the first node already mapped (or the bottom), then rebuilt upwards.
      let n = node;
      while (n > CONTEXT && !this.mappedNodes.has(n)) {
        frames.push(n);
        n = this.nodeParent[n];
      }
      let m = n > CONTEXT ? this.mappedNodes.get(n)! : n;
      while (frames.length) {
        const f = frames.pop()!;
        m = this.intern(map[this.nodePos[f]], m);
        this.mappedNodes.set(f, m);
      }
      if (m !== node && !changed) {
        changed = true;
        this.beginCollect();
        for (let j = 0; j < k; j++) this.collect(stacks[j]);
      }
      if (changed) this.collect(m);
    }
    return changed ? this.internCollected() : state;
  }

  /** (position, parent) pairs a closure has expanded (cleared, not reallocated, per transition). */
  private seen = new IntPairSet();

  private computeNext(state: number, byte: number): number {
    const { kind, arg, byteSets } = this.g;
    this.beginCollect();
    this.seen.clear();
    const stacks = this.stacksOf(state);
    for (let k = 0; k < stacks.length; k++) {
      const node = stacks[k];
      if (node <= CONTEXT) continue;
      const pos = this.nodePos[node];
      if (kind[pos] === BYTES && byteSets[arg[pos] * 256 + byte]) this.closure(pos + 1, this.nodeParent[node]);
    }
    return this.collectedCount === 0 ? DEAD : this.internCollected();
  }

  private intern(pos: number, parent: number): number {
    let id = this.nodeIndex.get(pos, parent);
    if (id < 0) {
      id = this.nodePos.length;
      this.nodePos.push(pos);
      this.nodeParent.push(parent);
      this.nodeIndex.set(pos, parent, id);
    }
    return id;
  }

  /**
   * The stack nodes of the state being built (see internCollected), without repeats: a
   * scratch list and a per-node mark of the current collection, reused for every state.
   */
  private collected = new Int32Array(64);
  private collectedCount = 0;
  private collectMark = new Int32Array(1024);
  private collectGen = 0;

  private beginCollect(): void {
    this.collectGen++;
    this.collectedCount = 0;
  }

  private collect(node: number): void {
    if (node >= this.collectMark.length) {
      const grown = new Int32Array(Math.max(2 * this.collectMark.length, node + 1));
      grown.set(this.collectMark);
      this.collectMark = grown;
    }
    if (this.collectMark[node] === this.collectGen) return;
    this.collectMark[node] = this.collectGen;
    if (this.collectedCount === this.collected.length) {
      const grown = new Int32Array(2 * this.collected.length);
      grown.set(this.collected);
      this.collected = grown;
    }
    this.collected[this.collectedCount++] = node;
  }

  private internOne(node: number): number {
    this.beginCollect();
    this.collect(node);
    return this.internCollected();
  }

  /**
   * Expands "continue at pos, then parent" until every stack has a byte class on top (or is
   * empty), adding the stack nodes to out. `seen` de-duplicates (pos, parent) pairs, which also
   * ends cycles through rules that may match the empty string.
   */
  private work: number[] = [];

  private closure(pos0: number, parent0: number): void {
    const { kind, arg, altStarts, ruleAltIndex } = this.g;
    const work = this.work;
    const seen = this.seen;
    work.length = 0;
    work.push(pos0, parent0);
    while (work.length) {
      const parent = work.pop()!;
      const pos = work.pop()!;
      if (!seen.add(pos, parent)) continue;
      const k = kind[pos];
      if (k === END) {
        if (parent <= CONTEXT) this.collect(parent);
        else work.push(this.nodePos[parent], this.nodeParent[parent]);
      } else if (k === BYTES) {
        this.collect(this.intern(pos, parent));
      } else {
        // Tail references do not push a frame, so right recursion runs in constant stack.
        const cont = kind[pos + 1] === END ? parent : this.intern(pos + 1, parent);
        const r = arg[pos];
        for (let k = ruleAltIndex[r]; k < ruleAltIndex[r + 1]; k++) work.push(altStarts[k], cont);
      }
    }
  }

  /** The state of the collected stack nodes (an existing one when its stacks are equal). */
  private internCollected(): number {
    const n = this.collectedCount;
    const arr = this.collected;
    // Insertion sort: most states hold a few stacks.
    if (n > 32) arr.subarray(0, n).sort();
    else
      for (let i = 1; i < n; i++) {
        const x = arr[i];
        let j = i - 1;
        for (; j >= 0 && arr[j] > x; j--) arr[j + 1] = arr[j];
        arr[j + 1] = x;
      }
    let h = n | 0;
    for (let i = 0; i < n; i++) h = Math.imul(h ^ arr[i], 0x9e3779b1) ^ (h >>> 15);
    const slots = this.stateSlots;
    const mask = slots.length - 1;
    let i = h & mask;
    for (; slots[i] >= 0; i = (i + 1) & mask) {
      const id = slots[i];
      if (this.stateHash[id] === h && this.sameStacks(id, arr, n)) return id;
    }
    const id = this.states;
    const at = this.stackStart[id];
    if (at + n > this.pool.length) this.pool = grownTo(this.pool, at + n);
    if (id + 2 > this.stackStart.length) {
      this.stackStart = grownTo(this.stackStart, id + 2);
      this.stateHash = grownTo(this.stateHash, id + 2);
    }
    this.pool.set(arr.subarray(0, n), at);
    this.stackStart[id + 1] = at + n;
    this.stateHash[id] = h;
    this.states++;
    slots[i] = id;
    if (2 * this.states > slots.length) this.rehashStates();
    this.initRow(id, arr, n);
    this.reachesContext.push((n > 0 && arr[0] === CONTEXT) || (n > 1 && arr[1] === CONTEXT) ? 1 : 0);
    return id;
  }

  private sameStacks(id: number, arr: Int32Array, n: number): boolean {
    const from = this.stackStart[id];
    if (this.stackStart[id + 1] - from !== n) return false;
    for (let i = 0; i < n; i++) if (this.pool[from + i] !== arr[i]) return false;
    return true;
  }

  private rehashStates(): void {
    const slots = new Int32Array(this.stateSlots.length * 2).fill(-1);
    const mask = slots.length - 1;
    for (let id = 0; id < this.states; id++) {
      let i = this.stateHash[id] & mask;
      while (slots[i] >= 0) i = (i + 1) & mask;
      slots[i] = id;
    }
    this.stateSlots = slots;
  }

  /**
   * A new state's transition row: DEAD for every byte no stack top takes (known at once from the
   * byte classes, so a mask walk never pays a transition computation for a refused byte),
   * UNKNOWN for the rest.
   */
  private initRow(state: number, stacks: Int32Array, n: number): void {
    // States are numbered in order: a new page starts at its first state.
    if (state >>> TRANS_PAGE_BITS === this.transPages.length) this.transPages.push(new Int32Array(TRANS_PAGE_STATES * 256));
    const base = (state & TRANS_PAGE_MASK) << 8;
    const row = this.transPages[state >>> TRANS_PAGE_BITS];
    row.fill(DEAD, base, base + 256);
    const { arg } = this.g;
    // Many stacks of a state read the same byte set (a character in each of its strings): once each.
    const stamp = ++this.setGen;
    for (let k = 0; k < n; k++) {
      const node = stacks[k];
      if (node <= CONTEXT) continue;
      const set = arg[this.nodePos[node]];
      if (this.setStamp[set] === stamp) continue;
      this.setStamp[set] = stamp;
      const bytes = this.setMembers(set);
      for (let i = 0; i < bytes.length; i++) row[base + bytes[i]] = UNKNOWN;
    }
  }

  /** Per byte set: the initRow call that last marked it. */
  private setStamp: Int32Array;
  private setGen = 0;

  /** The bytes of each byte set, listed on first use (most sets are a few bytes: cheaper than 256 tests per stack). */
  private members: (Uint8Array | undefined)[] = [];

  private setMembers(set: number): Uint8Array {
    let m = this.members[set];
    if (!m) {
      const list: number[] = [];
      for (let b = 0, at = set * 256; b < 256; b++) if (this.g.byteSets[at + b]) list.push(b);
      m = this.members[set] = Uint8Array.from(list);
    }
    return m;
  }

}

/** Class per byte value: bytes in exactly the same byte sets share one (refined set by set). */
function byteClasses(byteSets: Uint8Array): Uint8Array {
  const cls = new Uint8Array(256);
  const split = new Int16Array(512);
  let classes = 1;
  for (let from = 0; from < byteSets.length; from += 256) {
    split.fill(-1, 0, 2 * classes);
    let next = 0;
    for (let b = 0; b < 256; b++) {
      const key = cls[b] * 2 + (byteSets[from + b] ? 1 : 0);
      if (split[key] < 0) split[key] = next++;
      cls[b] = split[key];
    }
    classes = next;
  }
  return cls;
}

function grownTo(a: Int32Array, atLeast: number): Int32Array<ArrayBuffer> {
  const out = new Int32Array(Math.max(2 * a.length, atLeast));
  out.set(a);
  return out;
}
