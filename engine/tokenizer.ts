// The RWKV "World" tokenizer: a fixed vocabulary of byte strings, encoded by greedy longest match
// over the UTF-8 bytes of the text (the same rule as TRIE_TOKENIZER in the `rwkv` Python package).
// Id 0 is end of text and is never produced by encode().

import * as fs from 'fs';
import * as path from 'path';
import { ByteTrie } from './byte-trie';
import { parsePythonLiteral, PythonLiteralError } from './python-literal';

export const BUNDLED_VOCAB_FILE = 'rwkv_vocab_v20230424.txt';

/** Models pad their embedding and head to a multiple of this many rows. */
const VOCAB_ROUNDING = 64;
/** Guards against a typo'd id making us allocate gigabytes. */
const MAX_TOKEN_ID = (1 << 24) - 1;

/** A line of a vocabulary file that does not follow `<id> <python literal> <byte length>`. */
export class VocabFormatError extends Error {
  constructor(
    readonly source: string,
    readonly line: number,
    detail: string,
  ) {
    super(`${source} line ${line}: ${detail}`);
    this.name = 'VocabFormatError';
  }
}

/** Token bytes of a whole vocabulary in one pool, shared by a tokenizer and its restrictions. */
interface TokenTable {
  pool: Uint8Array;
  start: Int32Array;
  /** Byte length of each id; 0 = unused id. */
  length: Int32Array;
}

const utf8Strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
// ignoreBOM keeps a leading U+FEFF as text instead of silently dropping it.
const utf8Lenient = new TextDecoder('utf-8', { ignoreBOM: true });
const utf8Encoder = new TextEncoder();

let bundledInstance: WorldTokenizer | undefined;

export class WorldTokenizer {
  /** Embedding rows the models use: max id + 1, rounded up to a multiple of 64 (65536 for World). */
  readonly vocabSize: number;
  private readonly trie: ByteTrie;

  /** @param vocabSize given for restrictions, which keep the id space of the full vocabulary. */
  private constructor(
    private readonly table: TokenTable,
    vocabSize?: number,
  ) {
    let maxId = 0;
    const entries: [number, Uint8Array][] = [];
    for (let id = 1; id < table.length.length; id++) {
      const len = table.length[id];
      if (len === 0) continue;
      maxId = id;
      entries.push([id, table.pool.subarray(table.start[id], table.start[id] + len)]);
    }
    if (entries.length === 0) throw new Error('vocabulary has no tokens');
    this.vocabSize = vocabSize ?? Math.ceil((maxId + 1) / VOCAB_ROUNDING) * VOCAB_ROUNDING;
    this.trie = new ByteTrie(entries);
  }

  /** Load a vocabulary file; without a path, the World vocabulary shipped with the package. */
  static fromFile(file?: string): WorldTokenizer {
    const resolved = file ?? bundledVocabPath();
    const raw = fs.readFileSync(resolved);
    let text: string;
    try {
      text = utf8Strict.decode(raw);
    } catch {
      throw new VocabFormatError(resolved, lineOfFirstInvalidUtf8(raw), 'file is not valid UTF-8');
    }
    return WorldTokenizer.fromText(text, resolved);
  }

  /** Parse vocabulary file contents; `source` names it in error messages. */
  static fromText(text: string, source = '<vocab text>'): WorldTokenizer {
    return new WorldTokenizer(parseVocab(text, source));
  }

  /** The bundled World vocabulary, loaded once per process. */
  static bundled(): WorldTokenizer {
    bundledInstance ??= WorldTokenizer.fromFile();
    return bundledInstance;
  }

  /** UTF-8 encode a string (or take raw bytes) and split it greedily into the longest tokens. */
  encode(text: string | Uint8Array): number[] {
    let bytes: Uint8Array;
    if (typeof text === 'string') bytes = utf8Encoder.encode(text);
    else if (text instanceof Uint8Array) bytes = text;
    else throw new TypeError(`encode expects a string or Uint8Array, got ${describe(text)}`);
    const out: number[] = [];
    const stuck = this.trie.greedyEncode(bytes, out);
    if (stuck >= 0) {
      const hex = bytes[stuck].toString(16).padStart(2, '0');
      throw new Error(`cannot encode byte 0x${hex} at byte offset ${stuck}: no allowed token starts with it`);
    }
    return out;
  }

  /** Concatenated bytes of the tokens. Throws on ids that are not in this vocabulary. */
  decodeBytes(ids: ArrayLike<number>): Uint8Array {
    const { pool, start, length } = this.table;
    let total = 0;
    for (let i = 0; i < ids.length; i++) total += this.checkedLength(ids[i], i);
    const out = new Uint8Array(total);
    let at = 0;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      out.set(pool.subarray(start[id], start[id] + length[id]), at);
      at += length[id];
    }
    return out;
  }

  /** Text of the tokens; byte sequences that are not valid UTF-8 become U+FFFD. */
  decode(ids: ArrayLike<number>): string {
    return utf8Lenient.decode(this.decodeBytes(ids));
  }

  /** A copy of one token's bytes; undefined for id 0, unused ids and ids outside the vocabulary. */
  tokenBytes(id: number): Uint8Array | undefined {
    const { pool, start, length } = this.table;
    if (!Number.isInteger(id) || id < 0 || id >= length.length || length[id] === 0) return undefined;
    return pool.slice(start[id], start[id] + length[id]);
  }

  /**
   * A tokenizer that only knows the given ids (for models trained on a reduced vocabulary): its
   * greedy match, tokenBytes and decode use only those. It can still encode any byte string when
   * all 256 single-byte tokens are allowed; otherwise encode throws on a byte it cannot start.
   */
  restrict(allowed: ArrayLike<number>): WorldTokenizer {
    if (allowed.length === 0) throw new RangeError('restrict: no token ids allowed');
    const length = new Int32Array(this.table.length.length);
    for (let i = 0; i < allowed.length; i++) {
      const id = allowed[i];
      length[id] = this.checkedLength(id, i, 'restrict: allowed');
    }
    return new WorldTokenizer({ pool: this.table.pool, start: this.table.start, length }, this.vocabSize);
  }

  private checkedLength(id: number, index: number, what = 'decode: token'): number {
    const len = Number.isInteger(id) && id >= 0 && id < this.table.length.length ? this.table.length[id] : 0;
    if (len > 0) return len;
    if (id === 0) throw new RangeError(`${what} id 0 (index ${index}) is end of text and has no bytes`);
    throw new RangeError(`${what} id ${id} (index ${index}) is not in this vocabulary`);
  }
}

/** The vocabulary file shipped with the package, found from either engine/ or dist/engine/. */
export function bundledVocabPath(): string {
  const candidates = [
    path.resolve(__dirname, '..', 'vocab', BUNDLED_VOCAB_FILE),
    path.resolve(__dirname, '..', '..', 'vocab', BUNDLED_VOCAB_FILE),
  ];
  const found = candidates.find((p) => fs.existsSync(p));
  if (!found) throw new Error(`bundled vocabulary not found; looked in ${candidates.join(', ')}`);
  return found;
}

const LINE_START = /^(\d+) /;
const LINE_END = /^ (\d+)$/;

function parseVocab(text: string, source: string): TokenTable {
  const lines = text.split('\n');
  const ids: number[] = [];
  const tokens: Uint8Array[] = [];
  const lineOfId = new Map<number, number>();
  let maxId = 0;
  let totalBytes = 0;
  for (let n = 0; n < lines.length; n++) {
    const lineNo = n + 1;
    const line = lines[n].endsWith('\r') ? lines[n].slice(0, -1) : lines[n];
    if (line.trim() === '') continue;
    const fail = (detail: string) => new VocabFormatError(source, lineNo, detail);

    const head = LINE_START.exec(line);
    if (!head) throw fail(`expected "<id> <python str or bytes literal> <byte length>", got ${clip(line)}`);
    const id = Number(head[1]);
    if (id === 0) throw fail('id 0 is reserved for end of text');
    if (id > MAX_TOKEN_ID) throw fail(`id ${head[1]} is larger than the supported maximum ${MAX_TOKEN_ID}`);
    const earlier = lineOfId.get(id);
    if (earlier !== undefined) throw fail(`id ${id} was already defined on line ${earlier}`);

    let literal;
    try {
      literal = parsePythonLiteral(line, head[0].length);
    } catch (e) {
      if (e instanceof PythonLiteralError) throw fail(`bad token literal: ${e.message}`);
      throw e;
    }
    const tail = LINE_END.exec(line.slice(literal.end));
    if (!tail) throw fail(`expected " <byte length>" after the literal, got ${clip(line.slice(literal.end))}`);
    const declared = Number(tail[1]);
    if (declared !== literal.bytes.length) {
      throw fail(`token ${id} is ${literal.bytes.length} bytes but the line says ${declared}`);
    }
    if (literal.bytes.length === 0) throw fail(`token ${id} is empty`);

    lineOfId.set(id, lineNo);
    ids.push(id);
    tokens.push(literal.bytes);
    maxId = Math.max(maxId, id);
    totalBytes += literal.bytes.length;
  }
  if (ids.length === 0) throw new VocabFormatError(source, lines.length, 'no tokens in the file');

  const pool = new Uint8Array(totalBytes);
  const start = new Int32Array(maxId + 1);
  const length = new Int32Array(maxId + 1);
  let at = 0;
  for (let k = 0; k < ids.length; k++) {
    pool.set(tokens[k], at);
    start[ids[k]] = at;
    length[ids[k]] = tokens[k].length;
    at += tokens[k].length;
  }
  return { pool, start, length };
}

/** 1-based line of the first byte that breaks UTF-8, for the error message. */
function lineOfFirstInvalidUtf8(raw: Uint8Array): number {
  let lo = 0;
  let hi = raw.length;
  // Largest prefix that still decodes (modulo a cut-off last character) brackets the bad byte.
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(raw.subarray(0, mid), { stream: true });
      lo = mid;
    } catch {
      hi = mid;
    }
  }
  let line = 1;
  for (let i = 0; i < lo; i++) if (raw[i] === 0x0a) line++;
  return line;
}

function clip(s: string): string {
  return JSON.stringify(s.length > 60 ? `${s.slice(0, 60)}…` : s);
}

function describe(v: unknown): string {
  return v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'object' ? (v.constructor?.name ?? 'object') : typeof v;
}
