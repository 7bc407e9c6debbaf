// Reading a conversation file's CBOR without a synchronous stretch that grows with its state. cbor-x decodes a typed
// array as a view only when its bytes happen to sit at a multiple of 4 in the file, and copies it in one go otherwise
// (a 192 MiB state: a quarter of a second with nothing else running). This reader walks the (small) structure itself,
// keeps each typed array as its raw bytes, and copies them into their arrays a piece at a time with event-loop turns
// between (yield-chunks.ts). It reads what cbor-x's encode writes for a conversation (definite-length maps, arrays and
// strings; integers; floats; true/false/null; the little-endian typed-array tags of RFC 8746) and names anything else.

import { inPieces, YIELD_FLOATS } from './yield-chunks';

/** RFC 8746 tags of the little-endian typed arrays a conversation holds. */
const TYPED_ARRAY_TAGS = new Map<number, Float32ArrayConstructor | Int32ArrayConstructor>([
  [85, Float32Array],
  [78, Int32Array],
]);
/** The file's values are little-endian; a host of the same order copies their bytes as they are. */
const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
/** Nesting a conversation never needs more of (its model signature is one map inside the file's). */
const MAX_DEPTH = 8;

/** A typed array found in the structure, its bytes still in the file. */
class PendingArray {
  constructor(
    readonly Type: Float32ArrayConstructor | Int32ArrayConstructor,
    readonly bytes: Uint8Array,
  ) {}
}

class Reader {
  private at = 0;
  private readonly view: DataView;
  readonly pending: { holder: Record<string, unknown> | unknown[]; key: string | number; array: PendingArray }[] = [];

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  private need(n: number): void {
    if (this.at + n > this.bytes.length) throw new Error(`truncated at byte ${this.at}`);
  }

  private argument(info: number): number {
    if (info < 24) return info;
    const width = info === 24 ? 1 : info === 25 ? 2 : info === 26 ? 4 : info === 27 ? 8 : 0;
    if (width === 0) throw new Error(`indefinite or reserved length (additional information ${info}) at byte ${this.at - 1}`);
    this.need(width);
    const at = this.at;
    this.at += width;
    if (width === 1) return this.view.getUint8(at);
    if (width === 2) return this.view.getUint16(at);
    if (width === 4) return this.view.getUint32(at);
    const big = this.view.getBigUint64(at);
    if (big > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`integer or length ${big} too large at byte ${at}`);
    return Number(big);
  }

  end(): void {
    if (this.at !== this.bytes.length) throw new Error(`${this.bytes.length - this.at} bytes after the value`);
  }

  value(depth = 0): unknown {
    if (depth > MAX_DEPTH) throw new Error(`nested deeper than ${MAX_DEPTH}`);
    this.need(1);
    const head = this.bytes[this.at++];
    const major = head >> 5;
    const info = head & 0x1f;
    if (major === 7) return this.simple(info);
    const n = this.argument(info);
    switch (major) {
      case 0:
        return n;
      case 1:
        return -1 - n;
      case 2:
        return this.take(n);
      case 3:
        return new TextDecoder('utf-8', { fatal: true }).decode(this.take(n));
      case 4: {
        const list: unknown[] = [];
        for (let i = 0; i < n; i++) this.place(list, i, this.value(depth + 1));
        return list;
      }
      case 5: {
        const map: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
        for (let i = 0; i < n; i++) {
          const key = this.value(depth + 1);
          if (typeof key !== 'string') throw new Error(`a map key that is not a text string (${typeof key})`);
          this.place(map, key, this.value(depth + 1));
        }
        return map;
      }
      default: {
        const Type = TYPED_ARRAY_TAGS.get(n);
        if (!Type) throw new Error(`unsupported tag ${n}`);
        const content = this.value(depth + 1);
        if (!(content instanceof Uint8Array) || content.length % 4 !== 0) throw new Error(`tag ${n} must hold a byte string of whole 4-byte values`);
        return new PendingArray(Type, content);
      }
    }
  }

  private place(holder: Record<string, unknown> | unknown[], key: string | number, v: unknown): void {
    if (v instanceof PendingArray) this.pending.push({ holder, key, array: v });
    (holder as Record<string | number, unknown>)[key] = v;
  }

  private take(n: number): Uint8Array {
    this.need(n);
    const out = this.bytes.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }

  private simple(info: number): unknown {
    if (info === 20) return false;
    if (info === 21) return true;
    if (info === 22) return null;
    if (info === 23) return undefined;
    const at = this.at;
    if (info === 25) return this.need(2), (this.at += 2), halfToNumber(this.view.getUint16(at));
    if (info === 26) return this.need(4), (this.at += 4), this.view.getFloat32(at);
    if (info === 27) return this.need(8), (this.at += 8), this.view.getFloat64(at);
    throw new Error(`unsupported simple value ${info} at byte ${at - 1}`);
  }
}

function halfToNumber(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

/**
 * Decodes CBOR bytes as cbor-x would for a conversation file, typed arrays copied YIELD_FLOATS values at a time.
 * Throws an Error saying what is not readable (the caller names the file).
 */
export async function decodeConversationCbor(bytes: Uint8Array): Promise<unknown> {
  const reader = new Reader(bytes);
  const value = reader.value();
  reader.end();
  for (const { holder, key, array } of reader.pending) {
    const out = new array.Type(array.bytes.length / 4);
    const target = new Uint8Array(out.buffer);
    const source = new DataView(array.bytes.buffer, array.bytes.byteOffset, array.bytes.byteLength);
    const float = array.Type === Float32Array;
    await inPieces(out.length, YIELD_FLOATS, (from, to) => {
      if (LITTLE_ENDIAN_HOST) target.set(array.bytes.subarray(4 * from, 4 * to), 4 * from);
      else for (let i = from; i < to; i++) out[i] = float ? source.getFloat32(4 * i, true) : source.getInt32(4 * i, true);
    });
    (holder as Record<string | number, unknown>)[key] = out;
  }
  return value;
}
