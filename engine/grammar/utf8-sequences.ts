// Turns a range of code points into UTF-8 byte-range sequences, each a list of [lo, hi] byte
// ranges such that every combination is a valid encoding and together they cover the range
// exactly. This is what lets a byte-level automaton accept partial characters (tokens that
// end in the middle of a UTF-8 sequence) while never accepting malformed UTF-8.

export type ByteRangeSeq = [number, number][];

const MAX_PER_LENGTH = [0x7f, 0x7ff, 0xffff, 0x10ffff];

function encode(cp: number): number[] {
  if (cp < 0x80) return [cp];
  if (cp < 0x800) return [0xc0 | (cp >> 6), 0x80 | (cp & 0x3f)];
  if (cp < 0x10000) return [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)];
  return [0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 0x3f), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)];
}

export function utf8Sequences(lo: number, hi: number, out: ByteRangeSeq[] = []): ByteRangeSeq[] {
  if (lo > hi) return out;
  // Split at encoding-length boundaries.
  for (const max of MAX_PER_LENGTH) {
    if (lo <= max && hi > max) {
      utf8Sequences(lo, max, out);
      utf8Sequences(max + 1, hi, out);
      return out;
    }
  }
  if (hi < 0x80) {
    out.push([[lo, hi]]);
    return out;
  }
  // Split until each continuation position spans a full or aligned range.
  for (let i = 1; i < 4; i++) {
    const m = (1 << (6 * i)) - 1;
    if ((lo & ~m) !== (hi & ~m)) {
      if ((lo & m) !== 0) {
        utf8Sequences(lo, lo | m, out);
        utf8Sequences((lo | m) + 1, hi, out);
        return out;
      }
      if ((hi & m) !== m) {
        utf8Sequences(lo, (hi & ~m) - 1, out);
        utf8Sequences(hi & ~m, hi, out);
        return out;
      }
    }
  }
  const a = encode(lo), b = encode(hi);
  out.push(a.map((x, k) => [x, b[k]] as [number, number]));
  return out;
}
