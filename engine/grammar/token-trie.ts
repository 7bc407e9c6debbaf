// The vocabulary as a byte trie in flat preorder arrays. A mask is computed by walking it once
// from the parser state: each node costs one automaton transition, a refused byte skips the
// whole subtree, and tokens sharing a prefix share the work. Built once per vocabulary object
// and shared by every constraint and request.

export interface VocabLike {
  vocabSize: number;
  tokenBytes(id: number): Uint8Array | undefined;
}

export class TokenTrie {
  /** Byte on the edge into each node. */
  readonly byte: Uint8Array;
  /** Depth of each node (1 = first byte of a token). */
  readonly depth: Uint16Array;
  /** Token ending at the node, or -1. */
  readonly token: Int32Array;
  /** Index just past the node's subtree. */
  readonly skip: Int32Array;
  /** Parent node index, -1 at depth 1. */
  readonly parent: Int32Array;
  readonly maxDepth: number;
  /** Tokens whose bytes equal another token's: node → further ids. */
  readonly duplicates = new Map<number, number[]>();
  /** 1 at the nodes `duplicates` has (a typed-array test in the mask walk's inner loop). */
  readonly hasDuplicates: Uint8Array;
  readonly vocabSize: number;
  /**
   * Every token's bytes in one pool (token id's at bytePool[byteStart[id] .. byteStart[id + 1])):
   * a Uint8Array per token was 65,000 typed arrays and their buffers, 130,000 of the heap's
   * objects, marked by every full collection of the process (pauses inside masks).
   */
  private bytePool: Uint8Array;
  private byteStart: Int32Array;
  /** Single-byte token id per byte value, or -1. */
  readonly byteToken: Int32Array;
  /** Every byte value is a token of its own (true of the full World vocabulary). */
  readonly hasAllBytes: boolean;

  /** `keep` picks the tokens of a partial trie (see string-slice.ts); ids stay the vocabulary's. */
  private constructor(vocab: VocabLike, keep?: (bytes: Uint8Array) => boolean) {
    this.vocabSize = vocab.vocabSize;
    this.byteToken = new Int32Array(256).fill(-1);
    const ids: number[] = [];
    // Only while building: the kept tokens' bytes by id.
    const bytesOf: Uint8Array[] = new Array(vocab.vocabSize);
    let total = 0;
    // Id 0 is the end of text, never a byte string.
    for (let id = 1; id < vocab.vocabSize; id++) {
      const b = vocab.tokenBytes(id);
      if (b && b.length > 0 && (!keep || keep(b))) {
        bytesOf[id] = b;
        total += b.length;
        ids.push(id);
        if (b.length === 1 && this.byteToken[b[0]] < 0) this.byteToken[b[0]] = id;
      }
    }
    this.bytePool = new Uint8Array(total);
    this.byteStart = new Int32Array(vocab.vocabSize + 1);
    for (let id = 1, at = 0; id < vocab.vocabSize; id++) {
      this.byteStart[id] = at;
      if (bytesOf[id]) this.bytePool.set(bytesOf[id], at);
      at += bytesOf[id]?.length ?? 0;
      this.byteStart[id + 1] = at;
    }
    this.hasAllBytes = this.byteToken.every((id) => id >= 0);
    ids.sort((x, y) => compareBytes(bytesOf[x], bytesOf[y]));
    const byte: number[] = [], depth: number[] = [], token: number[] = [], skip: number[] = [], parent: number[] = [];
    const path: number[] = []; // node index per depth-1
    let prev: Uint8Array = new Uint8Array(0);
    let maxDepth = 0;
    for (const id of ids) {
      const b = bytesOf[id];
      let common = 0;
      while (common < prev.length && common < b.length && prev[common] === b[common]) common++;
      // Close the nodes of the previous token below the shared prefix.
      while (path.length > common) skip[path.pop()!] = byte.length;
      if (common === b.length) {
        // Same bytes as an existing node (the previous token): a duplicate.
        const node = path[path.length - 1];
        if (token[node] < 0) token[node] = id;
        else this.duplicates.set(node, [...(this.duplicates.get(node) ?? []), id]);
      }
      for (let d = common; d < b.length; d++) {
        parent.push(path.length ? path[path.length - 1] : -1);
        path.push(byte.length);
        byte.push(b[d]);
        depth.push(d + 1);
        token.push(d === b.length - 1 ? id : -1);
        skip.push(0);
      }
      maxDepth = Math.max(maxDepth, b.length);
      prev = b;
    }
    while (path.length) skip[path.pop()!] = byte.length;
    this.byte = Uint8Array.from(byte);
    this.depth = Uint16Array.from(depth);
    this.token = Int32Array.from(token);
    this.skip = Int32Array.from(skip);
    this.parent = Int32Array.from(parent);
    this.maxDepth = maxDepth;
    this.hasDuplicates = new Uint8Array(this.byte.length);
    for (const node of this.duplicates.keys()) this.hasDuplicates[node] = 1;
  }

  /**
   * A token's bytes (a view of the pool: read, never written), undefined for ids that are not
   * in the trie. The trie is a VocabLike itself, so partial tries can be built from it.
   */
  tokenBytes(id: number): Uint8Array | undefined {
    if (!(id >= 1 && id < this.vocabSize)) return undefined;
    const from = this.byteStart[id], to = this.byteStart[id + 1];
    return to > from ? this.bytePool.subarray(from, to) : undefined;
  }

  /** The bytes on the path from the root to a node, the node's own byte included. */
  pathBytes(node: number): Uint8Array {
    const out = new Uint8Array(this.depth[node]);
    for (let n = node, d = out.length - 1; n >= 0; n = this.parent[n], d--) out[d] = this.byte[n];
    return out;
  }

  get nodeCount(): number {
    return this.byte.length;
  }

  /** A trie of the vocabulary's tokens that `keep` accepts (not cached: its owner keeps it). */
  static subset(vocab: VocabLike, keep: (bytes: Uint8Array) => boolean): TokenTrie {
    return new TokenTrie(vocab, keep);
  }

  private static cache = new WeakMap<object, TokenTrie>();

  /** One trie per vocabulary object. */
  static of(vocab: VocabLike): TokenTrie {
    let t = TokenTrie.cache.get(vocab);
    if (!t) {
      t = new TokenTrie(vocab);
      TokenTrie.cache.set(vocab, t);
    }
    return t;
  }
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}
