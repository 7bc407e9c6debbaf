// The vocabulary split in two, as llguidance's "slicer" does for JSON: tokens made only of whole
// characters that a JSON string holds unescaped (64,491 of the World vocabulary's 65,529), and
// the rest (quotes, backslashes, control characters, partial UTF-8: about a thousand). Inside a
// string the automaton state loops on every such character, so a mask walk that reaches a loop
// state at a character boundary takes the safe tokens below it as a block instead of visiting
// every node (116k for the World vocabulary): walking the remaining thousand tokens is what a
// string position costs. Whether a state loops is checked on the automaton itself, so this holds
// for any grammar (a state that does not loop is walked as before) and masks stay exact.

import { CodePointSet, MAX_CODE_POINT, normalizeSet, subtractSet } from './code-point-set';
import { TokenTrie } from './token-trie';
import { ByteRangeSeq, utf8Sequences } from './utf8-sequences';

/**
 * Characters a JSON string holds raw: all but '"', '\' and the control characters; and but the
 * line and paragraph separators U+2028 and U+2029, which a pattern's `.` does not match (no
 * World token holds one): without them, `.*` in a pattern loops on every safe character and
 * takes the safe tokens as a block, as a plain string does.
 */
const SAFE_CHARS = normalizeSet([0x20, 0x21, 0x23, 0x5b, 0x5d, 0x2027, 0x202a, MAX_CODE_POINT]);

/** The safe characters as UTF-8 byte-range sequences (ASCII first: most states fail there). */
const SAFE_SEQUENCES: ByteRangeSeq[] = [];
for (let i = 0; i < SAFE_CHARS.length; i += 2) utf8Sequences(SAFE_CHARS[i], SAFE_CHARS[i + 1], SAFE_SEQUENCES);

/** The set holds every safe character. */
export function holdsEverySafeChar(set: CodePointSet): boolean {
  return subtractSet(SAFE_CHARS, set).length === 0;
}

/** 1 at every byte that may start a safe character. */
export const SAFE_FIRST_BYTES = new Uint8Array(256);
for (const seq of SAFE_SEQUENCES) SAFE_FIRST_BYTES.fill(1, seq[0][0], seq[0][1] + 1);

/**
 * Distinct automaton states the loop check follows after one byte of a sequence: a state that
 * loops has one per UTF-8 position, so more means it does not (and bounds the check's work).
 */
const MAX_LOOP_CHECK_STATES = 8;

/** The bytes are valid UTF-8 made only of safe characters. */
export function isStringSafe(bytes: Uint8Array): boolean {
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i];
    let cp: number, n: number;
    if (b < 0x80) (cp = b), (n = 1);
    else if (b >= 0xc2 && b <= 0xdf) (cp = b & 0x1f), (n = 2);
    else if (b >= 0xe0 && b <= 0xef) (cp = b & 0x0f), (n = 3);
    else if (b >= 0xf0 && b <= 0xf4) (cp = b & 0x07), (n = 4);
    else return false;
    if (i + n > bytes.length) return false;
    for (let k = 1; k < n; k++) {
      const c = bytes[i + k];
      if ((c & 0xc0) !== 0x80) return false;
      cp = (cp << 6) | (c & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are malformed.
    if ((n === 3 && cp < 0x800) || (n === 4 && (cp < 0x10000 || cp > MAX_CODE_POINT)) || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    if (cp < 0x20 || cp === 0x22 || cp === 0x5c) return false;
    i += n;
  }
  return true;
}

export interface ByteAutomaton {
  /** Next state, or a negative number when the byte is refused. */
  next(state: number, byte: number): number;
}

/**
 * The states the safe characters of one UTF-8 byte-range sequence lead to from `state`, one set of states per
 * byte position: null when a position has more than MAX_LOOP_CHECK_STATES of them, or, when `strict`, as soon as
 * a byte is refused (refused bytes are skipped otherwise).
 */
function sequenceEnds(a: ByteAutomaton, state: number, seq: ByteRangeSeq, strict: boolean): number[] | null {
  let states = [state];
  for (const [lo, hi] of seq) {
    const next = new Set<number>();
    for (const s of states)
      for (let b = lo; b <= hi; b++) {
        const t = a.next(s, b);
        if (t >= 0) next.add(t);
        else if (strict) return null;
      }
    if (next.size > MAX_LOOP_CHECK_STATES) return null;
    states = [...next];
  }
  return states;
}

/**
 * Every safe character, read from `state`, leads back to `state`: then any run of whole safe
 * characters is accepted from it.
 */
export function loopsOverSafeChars(a: ByteAutomaton, state: number): boolean {
  for (const seq of SAFE_SEQUENCES) {
    const ends = sequenceEnds(a, state, seq, true);
    if (!ends || ends.length !== 1 || ends[0] !== state) return false;
  }
  return true;
}

/**
 * The states one safe character leads to from `state` (characters refused are skipped), or null
 * when a byte position has more than MAX_LOOP_CHECK_STATES of them.
 */
export function safeCharSuccessors(a: ByteAutomaton, state: number): Set<number> | null {
  const out = new Set<number>();
  for (const seq of SAFE_SEQUENCES) {
    const ends = sequenceEnds(a, state, seq, false);
    if (!ends) return null;
    for (const s of ends) out.add(s);
  }
  return out;
}

/** The safe characters as UTF-8 byte-range sequences (ASCII first). */
export function safeCharSequences(): readonly ByteRangeSeq[] {
  return SAFE_SEQUENCES;
}

/** Code points in a token's bytes (its lead bytes: the bytes that are not UTF-8 continuation bytes). */
function charCount(bytes: Uint8Array): number {
  let n = 0;
  for (const b of bytes) if ((b & 0xc0) !== 0x80) n++;
  return n;
}

/** Blocks kept per vocabulary (8 KiB each for the World vocabulary). */
const MAX_BLOCKS = 64;

export class StringSlice {
  /** Tokens of whole safe characters. */
  readonly safe: TokenTrie;
  /** Every other token. */
  readonly rest: TokenTrie;
  /** The safe tokens as a bitset over the vocabulary. */
  readonly safeMask: Uint32Array;
  /** Per node of `safe`: its path ends between two characters (not inside one). */
  readonly boundary: Uint8Array;
  /**
   * The safe tokens (duplicates included) in trie preorder: node n's subtree holds
   * tokensInOrder[firstToken[n] .. firstToken[safe.skip[n]]).
   */
  readonly tokensInOrder: Int32Array;
  readonly firstToken: Int32Array;
  /** Most characters in a safe token (128 in the World vocabulary). */
  readonly maxChars: number;
  /** The safe tokens by character count: those of n characters are byChars[charStart[n] .. charStart[n + 1]). */
  private byChars: Int32Array;
  private charStart: Int32Array;

  private constructor(trie: TokenTrie) {
    const safe = (this.safe = TokenTrie.subset(trie, isStringSafe));
    this.rest = TokenTrie.subset(trie, (b) => !isStringSafe(b));
    const n = safe.nodeCount;
    this.safeMask = new Uint32Array((trie.vocabSize + 31) >>> 5);
    this.boundary = new Uint8Array(n);
    this.firstToken = new Int32Array(n + 1);
    const order: number[] = [];
    // Continuation bytes still owed after each node (preorder visits a parent before its children).
    const owed = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      const b = safe.byte[i];
      const p = safe.parent[i];
      owed[i] = p >= 0 && owed[p] > 0 ? owed[p] - 1 : b < 0x80 ? 0 : b >= 0xf0 ? 3 : b >= 0xe0 ? 2 : 1;
      this.boundary[i] = owed[i] === 0 ? 1 : 0;
      this.firstToken[i] = order.length;
      const tok = safe.token[i];
      if (tok >= 0) order.push(tok, ...(safe.duplicates.get(i) ?? []));
    }
    this.firstToken[n] = order.length;
    this.tokensInOrder = Int32Array.from(order);
    for (const t of order) this.safeMask[t >>> 5] |= 1 << (t & 31);
    const chars = order.map((t) => charCount(safe.tokenBytes(t)!));
    this.maxChars = chars.reduce((m, c) => Math.max(m, c), 0);
    this.charStart = new Int32Array(this.maxChars + 2);
    for (const c of chars) this.charStart[c + 1]++;
    for (let c = 0; c <= this.maxChars; c++) this.charStart[c + 1] += this.charStart[c];
    const fill = this.charStart.slice();
    this.byChars = new Int32Array(order.length);
    order.forEach((t, i) => (this.byChars[fill[chars[i]]++] = t));
    this.upToChars = new Array(this.maxChars + 1);
  }

  /** Bitsets of the safe tokens of at most n characters, built on first use (8 KiB each, World vocabulary). */
  private upToChars: (Uint32Array | undefined)[];

  /**
   * The safe tokens of at most `n` characters, as a bitset: what a state allows among them when
   * it takes any n safe characters but no (n + 1)th (the last n places of a counted string).
   */
  safeUpToChars(n: number): Uint32Array {
    if (n >= this.maxChars) return this.safeMask;
    let set = this.upToChars[n];
    if (!set) {
      set = n > 0 ? this.safeUpToChars(n - 1).slice() : new Uint32Array(this.safeMask.length);
      for (let k = this.charStart[n]; k < this.charStart[n + 1]; k++) set[this.byChars[k] >>> 5] |= 1 << (this.byChars[k] & 31);
      this.upToChars[n] = set;
    }
    return set;
  }

  private blocks = new Map<string, Uint32Array>();

  /**
   * The safe tokens whose first byte is in `firstBytes` (a 256-bit set of boundary first bytes:
   * ASCII), as a bitset: what a state whose every such byte leads to a loop state allows among
   * them. Kept per set of first bytes (few distinct ones occur: "any string character").
   */
  blockOf(firstBytes: Uint32Array): Uint32Array {
    const key = firstBytes.join(',');
    let block = this.blocks.get(key);
    if (!block) {
      const { byte, skip, nodeCount } = this.safe;
      const has = (i: number) => ((firstBytes[byte[i] >>> 5] >>> (byte[i] & 31)) & 1) === 1;
      let inSet = 0, outOfSet = 0;
      for (let i = 0; i < nodeCount && byte[i] < 0x80; i = skip[i]) {
        const n = this.firstToken[skip[i]] - this.firstToken[i];
        if (has(i)) inSet += n;
        else outOfSet += n;
      }
      // Sets of nearly every character (an undeclared key: all but a declared key's first
      // letters) are built by clearing the few subtrees left out of all ASCII-first tokens.
      const clear = outOfSet < inSet;
      block = clear ? this.asciiFirst().slice() : new Uint32Array(this.safeMask.length);
      for (let i = 0; i < nodeCount && byte[i] < 0x80; i = skip[i]) {
        if (has(i) === clear) continue;
        for (let k = this.firstToken[i]; k < this.firstToken[skip[i]]; k++) {
          const t = this.tokensInOrder[k];
          if (clear) block[t >>> 5] &= ~(1 << (t & 31));
          else block[t >>> 5] |= 1 << (t & 31);
        }
      }
      if (this.blocks.size >= MAX_BLOCKS) this.blocks.delete(this.blocks.keys().next().value!);
      this.blocks.set(key, block);
    }
    return block;
  }

  private asciiFirstTokens: Uint32Array | undefined;

  /** The safe tokens that start with an ASCII character, as a bitset. */
  private asciiFirst(): Uint32Array {
    if (!this.asciiFirstTokens) {
      const set = new Uint32Array(this.safeMask.length);
      const { byte, skip, nodeCount } = this.safe;
      for (let i = 0; i < nodeCount && byte[i] < 0x80; i = skip[i])
        for (let k = this.firstToken[i]; k < this.firstToken[skip[i]]; k++) set[this.tokensInOrder[k] >>> 5] |= 1 << (this.tokensInOrder[k] & 31);
      this.asciiFirstTokens = set;
    }
    return this.asciiFirstTokens;
  }

  private static cache = new WeakMap<TokenTrie, StringSlice>();

  /** One split per vocabulary trie. */
  static of(trie: TokenTrie): StringSlice {
    let s = StringSlice.cache.get(trie);
    if (!s) {
      s = new StringSlice(trie);
      StringSlice.cache.set(trie, s);
    }
    return s;
  }
}
