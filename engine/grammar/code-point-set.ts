// Sets of Unicode scalar values as sorted, disjoint, inclusive ranges [lo0, hi0, lo1, hi1, ...].
// Grammar character classes and regex classes are code-point sets; they become UTF-8 byte
// sequences only when the grammar is lowered to bytes.

export const MAX_CODE_POINT = 0x10ffff;
/** UTF-16 surrogates are not scalar values and have no UTF-8 encoding. */
export const SURROGATE_LO = 0xd800;
export const SURROGATE_HI = 0xdfff;

export type CodePointSet = number[];

/** Sort and merge arbitrary ranges, dropping surrogates. */
export function normalizeSet(ranges: number[]): CodePointSet {
  const pairs: [number, number][] = [];
  for (let i = 0; i < ranges.length; i += 2) {
    let lo = ranges[i], hi = ranges[i + 1];
    if (lo > hi) continue;
    // Split out the surrogate gap.
    if (lo <= SURROGATE_HI && hi >= SURROGATE_LO) {
      if (lo < SURROGATE_LO) pairs.push([lo, SURROGATE_LO - 1]);
      if (hi > SURROGATE_HI) pairs.push([SURROGATE_HI + 1, hi]);
      continue;
    }
    pairs.push([lo, hi]);
  }
  pairs.sort((a, b) => a[0] - b[0]);
  const out: number[] = [];
  for (const [lo, hi] of pairs) {
    const n = out.length;
    if (n > 0 && lo <= out[n - 1] + 1) out[n - 1] = Math.max(out[n - 1], hi);
    else out.push(lo, hi);
  }
  return out;
}

export function complementSet(set: CodePointSet): CodePointSet {
  const out: number[] = [];
  let next = 0;
  for (let i = 0; i < set.length; i += 2) {
    if (set[i] > next) out.push(next, set[i] - 1);
    next = set[i + 1] + 1;
  }
  if (next <= MAX_CODE_POINT) out.push(next, MAX_CODE_POINT);
  return normalizeSet(out);
}

export function unionSets(...sets: CodePointSet[]): CodePointSet {
  return normalizeSet(sets.flat());
}

export function subtractSet(a: CodePointSet, b: CodePointSet): CodePointSet {
  return intersectSets(a, complementSet(b));
}

export function intersectSets(a: CodePointSet, b: CodePointSet): CodePointSet {
  const out: number[] = [];
  let i = 0, j = 0;
  while (i < a.length && j < b.length) {
    const lo = Math.max(a[i], b[j]);
    const hi = Math.min(a[i + 1], b[j + 1]);
    if (lo <= hi) out.push(lo, hi);
    if (a[i + 1] < b[j + 1]) i += 2;
    else j += 2;
  }
  return out;
}

export function setHas(set: CodePointSet, cp: number): boolean {
  for (let i = 0; i < set.length; i += 2) if (cp >= set[i] && cp <= set[i + 1]) return true;
  return false;
}

export function singleton(cp: number): CodePointSet {
  return [cp, cp];
}

/** Adds the other ASCII case of every ASCII letter (regex `i` flag, ASCII-only like ajv's formats). */
export function asciiCaseFold(set: CodePointSet): CodePointSet {
  const extra: number[] = [];
  const upper = intersectSets(set, [0x41, 0x5a]);
  const lower = intersectSets(set, [0x61, 0x7a]);
  for (let i = 0; i < upper.length; i += 2) extra.push(upper[i] + 32, upper[i + 1] + 32);
  for (let i = 0; i < lower.length; i += 2) extra.push(lower[i] - 32, lower[i + 1] - 32);
  return normalizeSet([...set, ...extra]);
}
