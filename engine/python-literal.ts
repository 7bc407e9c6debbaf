// Parser for Python string and bytes literals ('abc', "a'b", b'\xe4', r'\d', '''x''') as written by
// Python's repr(). The RWKV vocabulary files store each token this way, so the tokenizer needs the
// exact bytes Python would produce: a str literal means its UTF-8 encoding, a bytes literal its bytes.

export class PythonLiteralError extends Error {
  constructor(message: string, readonly column: number) {
    super(`${message} (at column ${column + 1})`);
    this.name = 'PythonLiteralError';
  }
}

export interface ParsedLiteral {
  /** The literal's value as bytes (UTF-8 for str literals). */
  bytes: Uint8Array;
  /** Whether it was a bytes literal (b'...'). */
  isBytes: boolean;
  /** Index in the source just past the closing quote. */
  end: number;
}

/** Escapes shared by str and bytes literals that stand for one fixed character. */
const SIMPLE_ESCAPES: Record<string, number> = {
  '\\': 0x5c,
  "'": 0x27,
  '"': 0x22,
  a: 0x07,
  b: 0x08,
  f: 0x0c,
  n: 0x0a,
  r: 0x0d,
  t: 0x09,
  v: 0x0b,
};

const HEX = /^[0-9a-fA-F]+$/;
const OCTAL_DIGIT = /[0-7]/;

/**
 * Parse one Python str or bytes literal starting at `start` (leading prefix letters included).
 * Supports the prefixes b, r, u, br, rb (any case), single, double and triple quotes, and every
 * escape form of Python 3 except \N{name} (which needs the Unicode name database and is rejected
 * with a clear error). A str literal containing a lone surrogate is rejected, as Python's
 * UTF-8 encoder would reject it.
 */
export function parsePythonLiteral(src: string, start = 0): ParsedLiteral {
  let i = start;
  while (i < src.length && isAsciiLetter(src.charCodeAt(i))) i++;
  const prefix = src.slice(start, i).toLowerCase();
  if (!['', 'b', 'r', 'u', 'br', 'rb'].includes(prefix)) {
    throw new PythonLiteralError(`unsupported string prefix '${src.slice(start, i)}'`, start);
  }
  const isBytes = prefix.includes('b');
  const isRaw = prefix.includes('r');
  const quoteChar = src[i];
  if (quoteChar !== "'" && quoteChar !== '"') {
    throw new PythonLiteralError(
      i >= src.length ? 'expected a quoted literal, found end of text' : `expected a quote, found '${src[i]}'`,
      i,
    );
  }
  const quote = src.startsWith(quoteChar.repeat(3), i) ? quoteChar.repeat(3) : quoteChar;
  const openAt = i;
  i += quote.length;

  const out = new ByteSink();
  for (;;) {
    if (i >= src.length) throw new PythonLiteralError('unterminated literal', openAt);
    if (src.startsWith(quote, i)) {
      i += quote.length;
      break;
    }
    const cp = src.codePointAt(i)!;
    const width = cp > 0xffff ? 2 : 1;
    if (cp === 0x0a && quote.length === 1) {
      throw new PythonLiteralError('line break inside a single-quoted literal', i);
    }
    if (cp !== 0x5c /* backslash */) {
      if (isBytes && cp > 0x7f) {
        throw new PythonLiteralError('bytes literal may only contain ASCII characters', i);
      }
      out.codePoint(cp, i, isBytes);
      i += width;
      continue;
    }
    // A backslash.
    const next = src[i + 1];
    if (next === undefined) throw new PythonLiteralError('unterminated literal', openAt);
    if (isRaw) {
      // Raw literals keep the backslash; it only stops a following quote, backslash or line break
      // from acting as one. Any other following character is handled by the loop as usual.
      out.codePoint(0x5c, i, isBytes);
      if (next === quoteChar || next === '\\' || next === '\n') {
        out.codePoint(next.charCodeAt(0), i + 1, isBytes);
        i += 2;
      } else {
        i += 1;
      }
      continue;
    }
    i = parseEscape(src, i, isBytes, out);
  }
  return { bytes: out.toBytes(), isBytes, end: i };
}

/** Handle the escape whose backslash is at `at`; returns the index after it. */
function parseEscape(src: string, at: number, isBytes: boolean, out: ByteSink): number {
  const c = src[at + 1];
  if (c === '\n') return at + 2; // line continuation: contributes nothing
  if (c in SIMPLE_ESCAPES) {
    out.codePoint(SIMPLE_ESCAPES[c], at, isBytes);
    return at + 2;
  }
  if (OCTAL_DIGIT.test(c)) {
    let j = at + 1;
    while (j < at + 4 && j < src.length && OCTAL_DIGIT.test(src[j])) j++;
    const value = parseInt(src.slice(at + 1, j), 8);
    if (isBytes && value > 0xff) {
      throw new PythonLiteralError(`octal escape \\${src.slice(at + 1, j)} is out of range for a byte`, at);
    }
    out.codePoint(value, at, isBytes);
    return j;
  }
  if (c === 'x') return fixedHexEscape(src, at, 2, isBytes, out);
  if (!isBytes && c === 'u') return fixedHexEscape(src, at, 4, isBytes, out);
  if (!isBytes && c === 'U') return fixedHexEscape(src, at, 8, isBytes, out);
  if (!isBytes && c === 'N') {
    throw new PythonLiteralError('\\N{name} escapes are not supported (no Unicode name database)', at);
  }
  // Python keeps an unrecognised escape as written, backslash included.
  out.codePoint(0x5c, at, isBytes);
  return at + 1;
}

function fixedHexEscape(src: string, at: number, digits: number, isBytes: boolean, out: ByteSink): number {
  const hex = src.slice(at + 2, at + 2 + digits);
  if (hex.length !== digits || !HEX.test(hex)) {
    throw new PythonLiteralError(`truncated \\${src[at + 1]} escape: needs ${digits} hex digits`, at);
  }
  const value = parseInt(hex, 16);
  if (value > 0x10ffff) {
    throw new PythonLiteralError(`\\${src[at + 1]}${hex} is beyond the last Unicode code point`, at);
  }
  out.codePoint(value, at, isBytes);
  return at + 2 + digits;
}

function isAsciiLetter(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

/** Growable byte buffer that writes code points as UTF-8 (str) or raw byte values (bytes). */
class ByteSink {
  private buf = new Uint8Array(32);
  private len = 0;

  codePoint(cp: number, column: number, asByte: boolean): void {
    this.reserve(4);
    const buf = this.buf;
    if (asByte || cp < 0x80) {
      buf[this.len++] = cp;
    } else if (cp < 0x800) {
      buf[this.len++] = 0xc0 | (cp >> 6);
      buf[this.len++] = 0x80 | (cp & 0x3f);
    } else if (cp < 0x10000) {
      if (cp >= 0xd800 && cp <= 0xdfff) {
        throw new PythonLiteralError(
          `lone surrogate U+${cp.toString(16).toUpperCase()} cannot be encoded as UTF-8`,
          column,
        );
      }
      buf[this.len++] = 0xe0 | (cp >> 12);
      buf[this.len++] = 0x80 | ((cp >> 6) & 0x3f);
      buf[this.len++] = 0x80 | (cp & 0x3f);
    } else {
      buf[this.len++] = 0xf0 | (cp >> 18);
      buf[this.len++] = 0x80 | ((cp >> 12) & 0x3f);
      buf[this.len++] = 0x80 | ((cp >> 6) & 0x3f);
      buf[this.len++] = 0x80 | (cp & 0x3f);
    }
  }

  private reserve(extra: number): void {
    if (this.len + extra <= this.buf.length) return;
    const grown = new Uint8Array(this.buf.length * 2 + extra);
    grown.set(this.buf.subarray(0, this.len));
    this.buf = grown;
  }

  toBytes(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}
