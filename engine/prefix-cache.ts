// Prefix-state cache: a trie over token ids (model rows) whose nodes may hold the recurrent state
// after exactly that prefix plus the logits that followed it. A request looks up the longest
// cached prefix of its prompt and only prefills the rest. Entries are evicted least recently
// used first to stay under a byte bound. One cache per initial state.

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

export class PrefixCache {
  private readonly root: TrieNode = { parent: null, token: -1, children: new Map(), entry: null };
  /** Nodes with an entry, least recently used first (Map keeps insertion order). */
  private readonly lru = new Map<TrieNode, CachedPrefix>();
  private usedBytes = 0;
  hits = 0;
  misses = 0;

  constructor(readonly maxBytes: number) {
    if (!(maxBytes >= 0)) throw new RangeError(`cache byte bound must be >= 0, got ${maxBytes}`);
  }

  get bytes(): number {
    return this.usedBytes;
  }

  get size(): number {
    return this.lru.size;
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
    this.touch(best);
    return best.entry;
  }

  /** Whether `tokens` have an entry (with its logits, when asked). */
  has(tokens: ArrayLike<number>, withLogits = false): boolean {
    const node = this.find(tokens);
    return node !== null && node.entry !== null && (!withLogits || node.entry.logits !== null);
  }

  /** Store the state after `tokens`. The arrays are kept as given: don't modify them afterwards. */
  insert(tokens: ArrayLike<number>, state: Float32Array, logits: Float32Array | null): boolean {
    if (tokens.length === 0) return false;
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
    if (node.entry) {
      this.usedBytes -= PrefixCache.entryBytes(node.entry.state, node.entry.logits);
      this.lru.delete(node);
    }
    node.entry = { length: tokens.length, state, logits };
    this.lru.set(node, node.entry);
    this.usedBytes += cost;
    this.evictOver(this.maxBytes, node);
    return true;
  }

  clear(): void {
    this.root.children.clear();
    this.lru.clear();
    this.usedBytes = 0;
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

  private touch(node: TrieNode): void {
    const entry = this.lru.get(node);
    if (!entry) return;
    this.lru.delete(node);
    this.lru.set(node, entry);
  }

  private evictOver(bound: number, keep: TrieNode): void {
    for (const [node, entry] of this.lru) {
      if (this.usedBytes <= bound) return;
      if (node === keep) continue;
      this.lru.delete(node);
      this.usedBytes -= PrefixCache.entryBytes(entry.state, entry.logits);
      node.entry = null;
      this.prune(node);
    }
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
