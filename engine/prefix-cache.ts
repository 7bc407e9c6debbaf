// Prefix-state cache: a trie over token ids (model rows) whose nodes may hold the recurrent state
// after exactly that prefix plus the logits that followed it. A request looks up the longest
// cached prefix of its prompt and only prefills the rest. One cache per initial state; all of them
// draw on one CacheBudget, which evicts the least recently used entry of any cache to stay under
// one byte bound (so loading more initial states never multiplies the memory the caches hold). Speculative
// entries (prefill chunk checkpoints no prompt has used yet) are evicted before all others.

export interface CachedPrefix {
  /** Number of prompt tokens the state covers. */
  length: number;
  state: Float32Array;
  /**
   * Logits after the last token of the prefix (read-only); null when they were never read back (a slot that
   * decoded from GPU-reduced logits). Such an entry serves only prompts that go on beyond it.
   */
  logits: Float32Array | null;
}

interface TrieNode {
  parent: TrieNode | null;
  token: number;
  children: Map<number, TrieNode>;
  entry: CachedPrefix | null;
}

/** One byte bound shared by several prefix caches, with one least-recently-used order across them. */
export class CacheBudget {
  /** Entries of every cache, least recently used first (Map keeps insertion order). */
  private readonly lru = new Map<TrieNode, { cache: PrefixCache; bytes: number }>();
  /** Speculative entries, oldest first: evicted before any of `lru`; a hit moves one there. */
  private readonly speculative = new Map<TrieNode, { cache: PrefixCache; bytes: number }>();
  private usedBytes = 0;

  constructor(readonly maxBytes: number) {
    if (!(maxBytes >= 0)) throw new RangeError(`cache byte bound must be >= 0, got ${maxBytes}`);
  }

  /** Bytes held by all caches together. */
  get bytes(): number {
    return this.usedBytes;
  }

  add(node: TrieNode, cache: PrefixCache, bytes: number, speculative = false): void {
    (speculative ? this.speculative : this.lru).set(node, { cache, bytes });
    this.usedBytes += bytes;
  }

  remove(node: TrieNode): void {
    const held = this.lru.get(node) ?? this.speculative.get(node);
    if (!held) return;
    this.lru.delete(node);
    this.speculative.delete(node);
    this.usedBytes -= held.bytes;
  }

  touch(node: TrieNode): void {
    const held = this.lru.get(node) ?? this.speculative.get(node);
    if (!held) return;
    this.lru.delete(node);
    this.speculative.delete(node);
    this.lru.set(node, held);
  }

  /** Evict speculative entries, then least recently used ones, of whichever cache, until the bound holds (`keep` stays). */
  evictOver(keep: TrieNode): void {
    for (const order of [this.speculative, this.lru]) {
      for (const [node, held] of order) {
        if (this.usedBytes <= this.maxBytes) return;
        if (node === keep) continue;
        held.cache.drop(node);
      }
    }
  }
}

export class PrefixCache {
  private readonly root: TrieNode = { parent: null, token: -1, children: new Map(), entry: null };
  readonly budget: CacheBudget;
  /** This cache's own entries and bytes (the budget bounds all caches together). */
  private entries = 0;
  private usedBytes = 0;
  /** Set once its initial state is unloaded: late inserts (a running request's) are refused. */
  private retired = false;
  hits = 0;
  misses = 0;

  /** A byte bound of its own, or a budget shared with other caches. */
  constructor(bound: number | CacheBudget) {
    this.budget = typeof bound === 'number' ? new CacheBudget(bound) : bound;
  }

  get maxBytes(): number {
    return this.budget.maxBytes;
  }

  get bytes(): number {
    return this.usedBytes;
  }

  get size(): number {
    return this.entries;
  }

  /** Longest cached prefix of `tokens` (at most maxLength tokens), or null. Marks it recently used. */
  lookup(tokens: ArrayLike<number>, maxLength = tokens.length): CachedPrefix | null {
    let node = this.root;
    let best: TrieNode | null = null;
    const limit = Math.min(maxLength, tokens.length);
    for (let i = 0; i < limit; i++) {
      const next = node.children.get(tokens[i]);
      if (!next) break;
      node = next;
      if (node.entry && (node.entry.logits || i + 1 < tokens.length)) best = node;
    }
    if (!best || !best.entry) {
      this.misses++;
      return null;
    }
    this.hits++;
    this.budget.touch(best);
    return best.entry;
  }

  /** Length of the prefix lookup() would give now (0: none), without counting a hit or touching it. */
  peek(tokens: ArrayLike<number>): number {
    let node = this.root;
    let best = 0;
    for (let i = 0; i < tokens.length; i++) {
      const next = node.children.get(tokens[i]);
      if (!next) break;
      node = next;
      if (node.entry && (node.entry.logits || i + 1 < tokens.length)) best = i + 1;
    }
    return best;
  }

  /** Whether `tokens` have an entry (with its logits, when asked). */
  has(tokens: ArrayLike<number>, withLogits = false): boolean {
    const node = this.find(tokens);
    return node !== null && node.entry !== null && (!withLogits || node.entry.logits !== null);
  }

  /**
   * Store the state after `tokens`. The arrays are kept as given: don't modify them afterwards. A speculative
   * entry (a checkpoint no prompt asked for yet) is evicted before every other entry until a lookup uses it.
   */
  insert(tokens: ArrayLike<number>, state: Float32Array, logits: Float32Array | null, opts: { speculative?: boolean } = {}): boolean {
    if (tokens.length === 0 || this.retired) return false;
    // A view into a larger buffer (a backend call's results) would pin all of that buffer.
    if (logits && logits.byteLength !== logits.buffer.byteLength) logits = logits.slice();
    if (state.byteLength !== state.buffer.byteLength) state = state.slice();
    const cost = PrefixCache.entryBytes(state, logits);
    if (cost > this.maxBytes) return false;
    let node = this.root;
    for (let i = 0; i < tokens.length; i++) {
      let next = node.children.get(tokens[i]);
      if (!next) {
        next = { parent: node, token: tokens[i], children: new Map(), entry: null };
        node.children.set(tokens[i], next);
      }
      node = next;
    }
    if (node.entry) this.release(node);
    node.entry = { length: tokens.length, state, logits };
    this.entries++;
    this.usedBytes += cost;
    this.budget.add(node, this, cost, opts.speculative === true);
    this.budget.evictOver(node);
    return true;
  }

  /** Drop the entry of exactly `tokens`, if any. */
  remove(tokens: ArrayLike<number>): boolean {
    const node = this.find(tokens);
    if (!node || !node.entry) return false;
    this.release(node);
    this.prune(node);
    return true;
  }

  /** Drop every entry, giving their bytes back to the budget. */
  clear(): void {
    const drop = (node: TrieNode) => {
      if (node.entry) this.release(node);
      for (const child of node.children.values()) drop(child);
    };
    drop(this.root);
    this.root.children.clear();
  }

  /** Clear and refuse further entries (its initial state was unloaded; running requests may still use it). */
  retire(): void {
    this.retired = true;
    this.clear();
  }

  /** Evict one entry (called by the budget). */
  drop(node: TrieNode): void {
    if (!node.entry) return;
    this.release(node);
    this.prune(node);
  }

  private static entryBytes(state: Float32Array, logits: Float32Array | null): number {
    return state.byteLength + (logits?.byteLength ?? 0);
  }

  private find(tokens: ArrayLike<number>): TrieNode | null {
    let node = this.root;
    for (let i = 0; i < tokens.length; i++) {
      const next = node.children.get(tokens[i]);
      if (!next) return null;
      node = next;
    }
    return node;
  }

  private release(node: TrieNode): void {
    const entry = node.entry!;
    this.usedBytes -= PrefixCache.entryBytes(entry.state, entry.logits);
    this.entries--;
    this.budget.remove(node);
    node.entry = null;
  }

  /** Drop trie nodes that no longer lead to any entry. */
  private prune(node: TrieNode): void {
    let at: TrieNode | null = node;
    while (at && at.parent && !at.entry && at.children.size === 0) {
      at.parent.children.delete(at.token);
      at = at.parent;
    }
  }
}
