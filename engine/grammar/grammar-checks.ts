// Static checks on the flat grammar before any decoding: the language must not be empty, every
// alternative that can never finish is dropped (so the recognizer never walks into a dead
// end), and left recursion that would grow the parse stack without consuming input is refused.
// Each pass is linear in the grammar's size (worklists, no fixpoint sweeps, no recursion): a
// grammar is request input and may have a million positions.

import { ConstraintError } from './constraint-error';
import { BYTES, END, FlatGrammar, REF } from './flat-grammar';

function byteSetEmpty(g: FlatGrammar, set: number): boolean {
  const base = set * 256;
  for (let b = 0; b < 256; b++) if (g.byteSets[base + b]) return false;
  return true;
}

/**
 * Rules that derive something, by a worklist over alternatives: an alternative is complete once
 * all its rule references are; `blocked` says which byte items may never be satisfied.
 */
function derivableRules(g: FlatGrammar, blocked: (pos: number) => boolean): Uint8Array {
  const nRules = g.ruleAlts.length;
  const done = new Uint8Array(nRules);
  const owner: number[] = [];
  const pending: number[] = [];
  const uses: number[][] = Array.from({ length: nRules }, () => []);
  const ready: number[] = [];
  for (let r = 0; r < nRules; r++) {
    for (const s of g.ruleAlts[r]) {
      const alt = owner.length;
      owner.push(r);
      let refs = 0;
      let dead = false;
      for (let p = s; g.kind[p] !== END; p++) {
        if (g.kind[p] === REF) {
          refs++;
          uses[g.arg[p]].push(alt);
        } else if (blocked(p)) dead = true;
      }
      pending.push(dead ? -1 : refs);
      if (!dead && refs === 0) ready.push(r);
    }
  }
  while (ready.length) {
    const r = ready.pop()!;
    if (done[r]) continue;
    done[r] = 1;
    for (const alt of uses[r]) {
      if (pending[alt] <= 0) continue;
      if (--pending[alt] === 0 && !done[owner[alt]]) ready.push(owner[alt]);
    }
  }
  return done;
}

/** Drops alternatives that cannot derive any finite string; throws if the root is among them. */
export function pruneUnproductive(g: FlatGrammar): void {
  const productive = derivableRules(g, (p) => byteSetEmpty(g, g.arg[p]));
  if (!productive[g.root])
    throw new ConstraintError(`the grammar matches no string at all (rule '${g.ruleNames[g.root]}' can never finish)`, g.rulePlaces[g.root]);
  const altOk = (s: number) => {
    for (let p = s; g.kind[p] !== END; p++) {
      if (g.kind[p] === BYTES ? byteSetEmpty(g, g.arg[p]) : !productive[g.arg[p]]) return false;
    }
    return true;
  };
  for (let r = 0; r < g.ruleAlts.length; r++) g.ruleAlts[r] = g.ruleAlts[r].filter(altOk);
}

export function nullableRules(g: FlatGrammar): Uint8Array {
  return derivableRules(g, () => true);
}

/**
 * Refuses left recursion that pushes stack frames: A reaches A again at the left (after only
 * nullable items) through a reference that has something after it. Left cycles made only of
 * tail references (e.g. a repetition of something that may be empty) are harmless: the
 * recognizer's per-step de-duplication ends them.
 */
export function checkLeftRecursion(g: FlatGrammar): void {
  const nullable = nullableRules(g);
  const n = g.ruleAlts.length;
  const edges: { to: number; grows: boolean }[][] = Array.from({ length: n }, () => []);
  for (let r = 0; r < n; r++) {
    for (const s of g.ruleAlts[r]) {
      for (let p = s; g.kind[p] !== END; p++) {
        if (g.kind[p] !== REF) break;
        edges[r].push({ to: g.arg[p], grows: g.kind[p + 1] !== END });
        if (!nullable[g.arg[p]]) break;
      }
    }
  }
  // Tarjan's strongly connected components, iterative.
  const index = new Int32Array(n).fill(-1);
  const low = new Int32Array(n);
  const onStack = new Uint8Array(n);
  const comp = new Int32Array(n).fill(-1);
  const stack: number[] = [];
  let counter = 0;
  let nComp = 0;
  for (let start = 0; start < n; start++) {
    if (index[start] >= 0) continue;
    const work: [number, number][] = [[start, 0]];
    while (work.length) {
      const top = work[work.length - 1];
      const [v, i] = top;
      if (i === 0) {
        index[v] = low[v] = counter++;
        stack.push(v);
        onStack[v] = 1;
      }
      if (i < edges[v].length) {
        top[1]++;
        const w = edges[v][i].to;
        if (index[w] < 0) work.push([w, 0]);
        else if (onStack[w]) low[v] = Math.min(low[v], index[w]);
        continue;
      }
      work.pop();
      if (work.length) {
        const u = work[work.length - 1][0];
        low[u] = Math.min(low[u], low[v]);
      }
      if (low[v] === index[v]) {
        for (;;) {
          const w = stack.pop()!;
          onStack[w] = 0;
          comp[w] = nComp;
          if (w === v) break;
        }
        nComp++;
      }
    }
  }
  for (let r = 0; r < n; r++) {
    for (const e of edges[r]) {
      if (e.grows && comp[e.to] === comp[r]) {
        const name = g.ruleNames[r].split('#')[0];
        throw new ConstraintError(
          `rule '${name}' is left-recursive, which is not supported; rewrite it with repetition or right recursion`,
          g.rulePlaces[r],
        );
      }
    }
  }
}
