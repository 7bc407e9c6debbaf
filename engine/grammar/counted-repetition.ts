// Bounded repetitions collapsed for masks. `maxLength: 32767` lowers to 32,767 nested optional
// rules (O_k ::= X O_(k-1) | ε, lower-grammar.ts) and `minLength: 4096` to 4,096 copies of X in a
// row, so every character of such a string is a new automaton state and no mask is shared
// between them. But a token has at most `keep` bytes (128 in the World vocabulary) and X takes at
// least one byte, so a token cannot see whether more than `keep` copies are still ahead: from
// "X at most k more times, then Y" and "X at most keep more times, then Y" (k > keep) exactly the
// same byte strings of up to `keep` bytes can be read, and the same holds for exactly k copies.
// A stack frame inside such a repetition can thus stand for the frame with `keep` copies ahead,
// and every position of a long counted string shares one mask. (llguidance keeps the count
// beside a looping lexer state; here the automaton has no counters, so the frames are mapped.)

import { BYTES, END, GrammarTables, REF } from './flat-grammar';

/**
 * Per grammar position, the position a stack frame there may stand in for when masks are
 * computed (itself when none): frames with more than `keep` copies of a repeated item still
 * ahead map to the same place with exactly `keep` ahead. Null when the grammar has no such
 * repetition. `keep` must be at least the longest token in bytes, and at least 2.
 */
export function collapsedPositions(g: GrammarTables, keep: number): Int32Array | null {
  if (!(keep >= 2)) throw new RangeError(`collapsedPositions: keep must be at least 2, not ${keep}`);
  const map = new Int32Array(g.kind.length);
  for (let p = 0; p < map.length; p++) map[p] = p;
  const a = collapseRuns(g, keep, map);
  const b = collapseChains(g, keep, map);
  return a || b ? map : null;
}

/** Bytes an item takes at least: a byte set one, a rule its shortest derivation. */
function minBytes(g: GrammarTables, pos: number): number {
  return g.kind[pos] === BYTES ? 1 : g.minLen[g.arg[pos]];
}

/** Runs of one item repeated in an alternative (X X X … X): positions with over `keep` copies ahead. */
function collapseRuns(g: GrammarTables, keep: number, map: Int32Array): boolean {
  const { kind, arg, altStarts } = g;
  let changed = false;
  for (const start of altStarts) {
    let p = start;
    while (kind[p] !== END) {
      let q = p + 1;
      while (kind[q] === kind[p] && arg[q] === arg[p]) q++;
      // p .. q-1 hold the same item; a frame at p + j has q - p - j copies ahead.
      if (q - p > keep && minBytes(g, p) >= 1) {
        for (let j = p; j < q - keep; j++) map[j] = q - keep;
        changed = true;
      }
      p = q;
    }
  }
  return changed;
}

/**
 * Chains of optional copies, O_k ::= X O_(k-1) | ε down to O_1 ::= X | ε: each rule's depth k
 * (copies it may still take), and the positions of rules deeper than `keep` mapped to the same
 * offsets in the chain's rule of depth `keep`.
 */
function collapseChains(g: GrammarTables, keep: number, map: Int32Array): boolean {
  const { kind, arg, altStarts, ruleAltIndex } = g;
  const rules = ruleAltIndex.length - 1;
  // Per rule: start of its non-empty alternative when it is [X…] or [X…, REF r'] beside an empty one, else -1.
  const body = new Int32Array(rules).fill(-1);
  const bodyEnd = new Int32Array(rules);
  for (let r = 0; r < rules; r++) {
    if (ruleAltIndex[r + 1] - ruleAltIndex[r] !== 2) continue;
    const s0 = altStarts[ruleAltIndex[r]], s1 = altStarts[ruleAltIndex[r] + 1];
    const full = kind[s0] === END ? s1 : kind[s1] === END ? s0 : -1;
    if (full < 0) continue;
    let e = full;
    while (kind[e] !== END) e++;
    body[r] = full;
    bodyEnd[r] = e;
  }
  const sameItems = (p: number, q: number, n: number) => {
    for (let i = 0; i < n; i++) if (kind[p + i] !== kind[q + i] || arg[p + i] !== arg[q + i]) return false;
    return true;
  };
  // The rule a link refers to, when the link is X… REF next and next is X… (REF …): -1 otherwise.
  const nextOf = new Int32Array(rules).fill(-1);
  for (let r = 0; r < rules; r++) {
    const s = body[r];
    if (s < 0 || bodyEnd[r] - s < 2 || kind[bodyEnd[r] - 1] !== REF) continue;
    const n = arg[bodyEnd[r] - 1];
    const items = bodyEnd[r] - 1 - s;
    if (n === r || body[n] < 0) continue;
    const nItems = bodyEnd[n] - body[n];
    const nIsLink = nItems === items + 1 && kind[bodyEnd[n] - 1] === REF;
    if ((nItems === items || nIsLink) && sameItems(s, body[n], items)) {
      let least = 0;
      for (let p = s; p < bodyEnd[r] - 1; p++) least += minBytes(g, p);
      if (least >= 1) nextOf[r] = n;
    }
  }
  // Depth: 1 for a rule no link refers on from, 1 + the next rule's for a link (0: not known yet).
  const depth = new Float64Array(rules);
  const path: number[] = [];
  for (let r = 0; r < rules; r++) {
    if (nextOf[r] < 0 || depth[r]) continue;
    let x = r;
    while (nextOf[x] >= 0 && !depth[x] && path.length <= rules) {
      path.push(x);
      x = nextOf[x];
    }
    // A cycle (a link back into the path) is a loop, not a count: leave those rules alone.
    let d = depth[x] || (nextOf[x] < 0 ? 1 : Infinity);
    while (path.length) {
      const y = path.pop()!;
      d = d === Infinity ? Infinity : d + 1;
      depth[y] = d;
    }
  }
  // The rule of depth `keep` below each deeper one, found once per chain from the bottom up.
  const target = new Int32Array(rules).fill(-1);
  let changed = false;
  for (let r = 0; r < rules; r++) {
    if (!(depth[r] > keep) || depth[r] === Infinity || target[r] >= 0) continue;
    let x = r;
    while (depth[x] > keep && target[x] < 0) {
      path.push(x);
      x = nextOf[x];
    }
    const t = depth[x] > keep ? target[x] : x;
    while (path.length) target[path.pop()!] = t;
  }
  for (let r = 0; r < rules; r++) {
    const t = target[r];
    if (t < 0) continue;
    // Same shape (depth > 1: X… then the reference), so offsets correspond one to one.
    for (let o = 0; o <= bodyEnd[r] - body[r]; o++) map[body[r] + o] = body[t] + o;
    changed = true;
  }
  return changed;
}
