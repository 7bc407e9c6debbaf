// Grammar pieces for JSON text in the canonical form JSON.stringify writes: strings escape only
// '"', '\\' and control characters (as \b \f \n \r \t or \u00XX), everything else is raw UTF-8;
// numbers have no leading zeros. A canonical form means every decoded value has one spelling,
// which is what lets a grammar exclude values exactly (e.g. keys other than the declared ones)
// and count string length in code points like JSON Schema does.

import { CodePointSet, intersectSets, MAX_CODE_POINT, normalizeSet, subtractSet } from './code-point-set';
import { alt, chars, EMPTY, Expr, lit, opt, rep, seq } from './grammar-ir';

export const CONTROL: CodePointSet = [0, 0x1f];
export const ALL_CHARS: CodePointSet = normalizeSet([0, MAX_CODE_POINT]);
const NEEDS_ESCAPE: CodePointSet = normalizeSet([0, 0x1f, 0x22, 0x22, 0x5c, 0x5c]);
const SHORT_ESCAPES: Record<number, string> = { 0x22: '\\"', 0x5c: '\\\\', 8: '\\b', 12: '\\f', 10: '\\n', 13: '\\r', 9: '\\t' };

/** The JSON spelling of one character inside a string literal. */
export function escapeChar(cp: number): string {
  return SHORT_ESCAPES[cp] ?? (cp < 0x20 ? '\\u' + cp.toString(16).padStart(4, '0') : String.fromCodePoint(cp));
}

/** One string character from `set`, as it is spelled inside a JSON string. */
export function jsonChar(set: CodePointSet): Expr {
  const raw = subtractSet(set, NEEDS_ESCAPE);
  const escaped = intersectSets(set, NEEDS_ESCAPE);
  const spellings: string[] = [];
  for (let i = 0; i < escaped.length; i += 2) for (let c = escaped[i]; c <= escaped[i + 1]; c++) spellings.push(escapeChar(c));
  const alts: Expr[] = [];
  if (raw.length) alts.push(chars(raw));
  if (spellings.length) alts.push(asciiStringSet(spellings));
  return alt(...alts);
}

/**
 * A set of ASCII strings as a prefix tree, so the recognizer follows one branch per common
 * prefix (all escapes start with a backslash) instead of one per string.
 */
export function asciiStringSet(strings: string[]): Expr {
  const byFirst = new Map<number, string[]>();
  const alts: Expr[] = [];
  for (const s of strings) {
    if (s === '') {
      alts.push(EMPTY);
      continue;
    }
    const c = s.charCodeAt(0);
    if (!byFirst.has(c)) byFirst.set(c, []);
    byFirst.get(c)!.push(s.slice(1));
  }
  const lastChars: number[] = [];
  for (const [c, rests] of byFirst) {
    if (rests.length === 1 && rests[0] === '') lastChars.push(c, c);
    else alts.push(seq(chars([c, c]), asciiStringSet(rests)));
  }
  if (lastChars.length) alts.push(chars(normalizeSet(lastChars)));
  return alt(...alts);
}

/** Replaces every code-point class in an expression by its JSON string spelling. */
export function jsonEncodeChars(e: Expr): Expr {
  switch (e.t) {
    case 'chars':
      return jsonChar(e.set);
    case 'seq':
      return { t: 'seq', items: e.items.map(jsonEncodeChars) };
    case 'alt':
      return { t: 'alt', items: e.items.map(jsonEncodeChars) };
    case 'rep':
      return { ...e, item: jsonEncodeChars(e.item) };
    default:
      return e;
  }
}

const DIGIT = chars([0x30, 0x39]);
const NONZERO = chars([0x31, 0x39]);

// Numbers are finite: a numeral such as 1e400 parses to Infinity, which no schema accepts and
// JSON.stringify cannot write back. Integer parts have at most 21 digits (JSON.stringify writes
// magnitudes from 1e21 up with an exponent), and exponents keep the value below 1e308.

/** Integer digits JSON.stringify writes without an exponent (magnitudes below 1e21). */
export const MAX_PLAIN_DIGITS = 21;
const E = chars([0x45, 0x45, 0x65, 0x65]);

export const UINT: Expr = alt(lit('0'), seq(NONZERO, rep(DIGIT, 0, MAX_PLAIN_DIGITS - 1)));

/**
 * Magnitudes from 1e21 to below 1e308 in exponent form, as JSON.stringify writes them (at most
 * 17 significant digits, so every one is an integer).
 */
export const LARGE_MAGNITUDE: Expr = seq(NONZERO, opt(seq(lit('.'), rep(DIGIT, 0, 15), NONZERO)), E, opt(lit('+')), uintRange(21, 307));

export const INTEGER: Expr = seq(opt(lit('-')), alt(UINT, LARGE_MAGNITUDE));

/** Any finite JSON number (a value below 1e308 in magnitude; exponents without leading zeros). */
export const NUMBER: Expr = seq(
  opt(lit('-')),
  alt(
    seq(UINT, opt(seq(lit('.'), rep(DIGIT, 1, Infinity))), opt(seq(E, alt(seq(lit('-'), rep(DIGIT, 1, Infinity)), seq(opt(lit('+')), uintRange(0, 307 - MAX_PLAIN_DIGITS)))))),
    seq(NONZERO, opt(seq(lit('.'), rep(DIGIT, 1, Infinity))), E, opt(lit('+')), uintRange(307 - MAX_PLAIN_DIGITS + 1, 307)),
  ),
);

/**
 * Decimal strings (no leading zeros) of the integers in [lo, hi]; lo >= 0. hi may be Infinity,
 * which stops at MAX_PLAIN_DIGITS digits (larger values are written with an exponent).
 */
export function uintRange(lo: number, hi: number): Expr {
  if (hi < lo) return { t: 'alt', items: [] };
  const alts: Expr[] = [];
  const loLen = String(lo).length;
  const hiLen = hi === Infinity ? loLen : String(hi).length;
  if (hi === Infinity && loLen >= MAX_PLAIN_DIGITS) return { t: 'alt', items: [] };
  for (let len = loLen; len <= hiLen; len++) {
    const a = len === loLen ? lo : 10 ** (len - 1);
    const b = len === hiLen && hi !== Infinity ? hi : 10 ** len - 1;
    alts.push(len === 1 ? chars([a + 0x30, b + 0x30]) : fixedWidth(String(a), String(b)));
  }
  // Unbounded above: every longer number.
  if (hi === Infinity && loLen < MAX_PLAIN_DIGITS) alts.push(seq(NONZERO, rep(DIGIT, loLen, MAX_PLAIN_DIGITS - 1)));
  return alts.length === 1 ? alts[0] : { t: 'alt', items: alts };
}

/** Digit strings of equal length n between a and b (both n digits), leading zeros allowed past the first. */
function fixedWidth(a: string, b: string): Expr {
  if (a.length === 0) return EMPTY;
  const da = a.charCodeAt(0), db = b.charCodeAt(0);
  const ra = a.slice(1), rb = b.slice(1);
  if (da === db) return seq(chars([da, da]), fixedWidth(ra, rb));
  const n = ra.length;
  const alts: Expr[] = [];
  const allZero = /^0*$/.test(ra), allNine = /^9*$/.test(rb);
  const firstFull = allZero ? da : da + 1;
  const lastFull = allNine ? db : db - 1;
  if (!allZero) alts.push(seq(chars([da, da]), fixedWidth(ra, '9'.repeat(n))));
  if (firstFull <= lastFull) alts.push(seq(chars([firstFull, lastFull]), rep(DIGIT, n, n)));
  if (!allNine) alts.push(seq(chars([db, db]), fixedWidth('0'.repeat(n), rb)));
  return alts.length === 1 ? alts[0] : { t: 'alt', items: alts };
}

/**
 * Integers in [lo, hi] (either end may be infinite; finite ends within 2^53), canonical
 * spelling. An infinite end includes the magnitudes written with an exponent unless `plain`.
 */
export function integerRange(lo: number, hi: number, plain = false): Expr {
  const alts: Expr[] = [];
  if (lo < 0) {
    // -n for n in [max(1, -hi), -lo]
    const nLo = Math.max(1, hi === Infinity ? 1 : -hi);
    const nHi = lo === -Infinity ? Infinity : -lo;
    if (nLo <= nHi) alts.push(seq(lit('-'), uintRange(nLo, nHi)));
    if (lo === -Infinity && !plain) alts.push(seq(lit('-'), LARGE_MAGNITUDE));
  }
  if (hi >= 0) alts.push(uintRange(Math.max(0, lo), hi));
  if (hi === Infinity && !plain) alts.push(LARGE_MAGNITUDE);
  return alts.length === 1 ? alts[0] : { t: 'alt', items: alts };
}

/**
 * JSON text of a value with object keys in a fixed order: keys listed in `keyOrder` first (in
 * that order), then the others as they come. The grammar writes objects in the same order.
 */
export function canonicalJson(value: unknown, keyRank: Map<string, number>): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return '[' + value.map((v) => canonicalJson(v, keyRank)).join(',') + ']';
  const keys = Object.keys(value as object);
  const ranked = keys.map((k, i) => [keyRank.get(k) ?? Infinity, i, k] as const);
  ranked.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  return (
    '{' +
    ranked.map(([, , k]) => JSON.stringify(k) + ':' + canonicalJson((value as Record<string, unknown>)[k], keyRank)).join(',') +
    '}'
  );
}
