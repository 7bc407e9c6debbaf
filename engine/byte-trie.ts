// A read-only trie over byte strings, built once, for greedy longest-match tokenization.
//
// Nodes are plain integers. The 256 edges out of the root (walked once per emitted token) sit in a
// dense table; every other edge lives in one open-addressing hash table keyed by node*256+byte.
// That keeps the whole World vocabulary (~370k edges) in a few flat typed arrays: no per-node
// objects for the garbage collector and no 256-wide arrays per node.

const EMPTY = -1;

export class ByteTrie {
  private readonly rootEdges = new Int32Array(256).fill(EMPTY);
  private readonly edgeKeys: Int32Array;
  private readonly edgeChild: Int32Array;
  private readonly hashShift: number;
  private readonly hashMask: number;
  /** Token id ending at each node, 0 where no token ends (id 0 is end of text, never a token). */
  private readonly nodeToken: Int32Array;
  private nodeCount = 1; // node 0 is the root

  /**
   * @param entries token id (≥ 1) and its bytes (non-empty). When two ids share the same bytes the
   *   lower id wins, matching the set iteration order of the reference tokenizer for small ints.
   */
  constructor(entries: Iterable<[number, Uint8Array]>) {
    const list = [...entries];
    let totalBytes = 0;
    for (const [, bytes] of list) totalBytes += bytes.length;
    // Edge keys node*256+byte must fit an Int32.
    if (totalBytes >= 1 << 23) throw new RangeError(`vocabulary too large for the trie: ${totalBytes} bytes of tokens`);
    // Every byte adds at most one node and one edge; keep the edge table at most half full.
    let capacity = 1024;
    while (capacity < totalBytes * 2) capacity *= 2;
    this.edgeKeys = new Int32Array(capacity).fill(EMPTY);
    this.edgeChild = new Int32Array(capacity);
    this.hashMask = capacity - 1;
    this.hashShift = 32 - Math.log2(capacity);
    this.nodeToken = new Int32Array(totalBytes + 1);
    for (const [id, bytes] of list) this.insert(id, bytes);
  }

  private insert(id: number, bytes: Uint8Array): void {
    if (!(Number.isInteger(id) && id >= 1)) throw new RangeError(`trie token id must be a positive integer, got ${id}`);
    if (bytes.length === 0) throw new RangeError(`token ${id} has no bytes`);
    let node = 0;
    for (const b of bytes) {
      let next = this.child(node, b);
      if (next === EMPTY) {
        next = this.nodeCount++;
        this.addEdge(node, b, next);
      }
      node = next;
    }
    const existing = this.nodeToken[node];
    if (existing === 0 || id < existing) this.nodeToken[node] = id;
  }

  private slotOf(key: number): number {
    return Math.imul(key, 0x9e3779b1) >>> this.hashShift;
  }

  private addEdge(node: number, byte: number, child: number): void {
    if (node === 0) {
      this.rootEdges[byte] = child;
      return;
    }
    const key = node * 256 + byte;
    let slot = this.slotOf(key);
    while (this.edgeKeys[slot] !== EMPTY) slot = (slot + 1) & this.hashMask;
    this.edgeKeys[slot] = key;
    this.edgeChild[slot] = child;
  }

  /** The node reached from `node` over `byte`, or -1. */
  child(node: number, byte: number): number {
    if (node === 0) return this.rootEdges[byte];
    const key = node * 256 + byte;
    const keys = this.edgeKeys;
    let slot = this.slotOf(key);
    for (;;) {
      const k = keys[slot];
      if (k === key) return this.edgeChild[slot];
      if (k === EMPTY) return EMPTY;
      slot = (slot + 1) & this.hashMask;
    }
  }

  /**
   * Greedy longest-match tokenization: from each position take the longest token that matches,
   * then continue after it. Appends ids to `out`. Returns -1 on success, or the offset of a byte
   * where no token starts (possible only when some single-byte token is missing).
   */
  greedyEncode(input: Uint8Array, out: number[]): number {
    const { rootEdges, edgeKeys, edgeChild, nodeToken, hashMask, hashShift } = this;
    const n = input.length;
    let pos = 0;
    while (pos < n) {
      let node = rootEdges[input[pos]];
      let bestId = 0;
      let bestEnd = pos;
      let i = pos + 1;
      while (node !== EMPTY) {
        const id = nodeToken[node];
        if (id !== 0) {
          bestId = id;
          bestEnd = i;
        }
        if (i >= n) break;
        // Inlined child(): this loop is the tokenizer's hot path.
        const key = node * 256 + input[i];
        let slot = Math.imul(key, 0x9e3779b1) >>> hashShift;
        node = EMPTY;
        for (;;) {
          const k = edgeKeys[slot];
          if (k === key) {
            node = edgeChild[slot];
            break;
          }
          if (k === EMPTY) break;
          slot = (slot + 1) & hashMask;
        }
        i++;
      }
      if (bestId === 0) return pos;
      out.push(bestId);
      pos = bestEnd;
    }
    return -1;
  }
}
