// Counted strings as chains of states. Inside a string with maxLength (or minLength), every safe
// character (string-slice.ts) leads to one and the same next state whichever character it is, and
// so on for a number of characters: a safe token of n characters is then allowed exactly when
// the chain is n states long, as llguidance's slicer allows a length slice while the remaining
// length budget holds it. The chain's length from a state (its run) is what a mask needs.
//
// A step is shown without following every character (which would build a dozen automaton
// states per step, one per partial UTF-8 character): the stacks that may take a safe character
// must all sit on one parent frame, and their top frames alone (over the context marker) must
// read any one safe character and pop back to that parent, and nothing else. Then every safe
// character continues from the parent the same way, so one character (a space) finds the next
// state. That check depends only on the top frames, so one string rule needs it once.
//
// A state's chain is followed on its string's frames alone (the stacks that take safe
// characters cut to their top frames over the context marker), not on the state: the states
// of every string of a schema with the same count then share one chain, where each would build
// its own (a cap's worth of states, every frame under the string in each: 10-50 ms at each
// string's first character). The marker stands for what follows the string (its closing
// quote), which must refuse every safe character for the cut chain to be the state's.

import { DEAD, StackAutomaton } from './stack-automaton';
import { SAFE_FIRST_BYTES, safeCharSequences } from './string-slice';

/** Most distinct states the pop check follows after one byte of a character (as the loop check). */
const MAX_CHECK_STATES = 8;
/** A chain is followed at most this many times the cap, then known only where it is that long. */
const MAX_WALK = 4;
/**
 * Frames a state's chain is followed on: a string's character and the count around it (2),
 * deeper where what lies under them takes a safe character or the chain is not shown there; then
 * the state itself.
 */
const CUT_FRAMES = [2, 3, 4];

export class SafeCharChains {
  /** Per state: chain states from it, capped (see run); -1 until known. */
  private runs: Int16Array = new Int16Array(1024).fill(-1);
  /** Per state whose run is below the cap: the state the chain ends at takes no safe character. */
  private closedEnd: Uint8Array = new Uint8Array(1024);
  /** Per state: the state every safe character leads to (after `canonical`), -1 when none. */
  private successors: Int32Array = new Int32Array(1024).fill(-1);
  /** Per state of top frames over the context marker: whether they read one safe character and pop. */
  private popsAfterOneChar = new Map<number, boolean>();

  /** The chains of cut states, whose context marker refuses every safe character (null in that one itself). */
  private cuts: SafeCharChains | null;
  /** Per stack node under a cut: whether what follows it refuses every safe character. */
  private refusesAfter = new Map<number, boolean>();

  /**
   * `cap`: runs are known up to it (the most characters in a token); `canonical`: the state
   * whose masks a state has (counted-repetition.ts), followed instead of the state itself;
   * `markerRefuses`: the states are cut states, whose marker stands for a rest that refuses
   * every safe character (for the `cuts` of another SafeCharChains).
   */
  constructor(
    private automaton: StackAutomaton,
    readonly cap: number,
    private canonical: (state: number) => number,
    private markerRefuses = false,
  ) {
    this.cuts = markerRefuses ? null : new SafeCharChains(automaton, cap, canonical, true);
  }

  /**
   * How many chain states follow one another from `state`, itself included (0: it is not one),
   * capped at `cap`; a chain that comes back to a state (a loop) reaches the cap.
   */
  run(state: number): number {
    const known = this.known(state);
    if (known >= 0) return known;
    if (this.cuts) {
      const byCut = this.runByCut(this.cuts, state);
      if (byCut >= 0) return byCut;
    }
    return this.follow(state);
  }

  private known(state: number): number {
    return state < this.runs.length ? this.runs[state] : -1;
  }

  /**
   * The run of `state` from the chain of its stacks that take safe characters, cut to their top
   * frames (CUT_FRAMES, deeper until what lies under them refuses every safe character), as
   * `cuts` follows it; -1 when no cut shows the cap or a closed end.
   */
  private runByCut(cuts: SafeCharChains, state: number): number {
    // Only where a chain step is possible at all (most states are not in a counted string).
    if (!this.popsAfterOneCharFrom(state)) return -1;
    const a = this.automaton;
    for (const frames of CUT_FRAMES) {
      const taken = a.cutTakers(state, SAFE_FIRST_BYTES, frames);
      if (!taken) return -1;
      let refuses = this.refusesAfter.get(taken.below);
      if (refuses === undefined) {
        const after = a.afterPop(taken.below);
        refuses = after === DEAD || !a.mayTake(after, SAFE_FIRST_BYTES);
        this.refusesAfter.set(taken.below, refuses);
      }
      if (!refuses) continue;
      const run = cuts.run(taken.cut);
      const closed = run < this.cap && cuts.closed(taken.cut);
      if (run >= this.cap || closed) {
        // A cut that loops stands for a state that loops (a string without a count).
        this.set(state, run, closed ? 1 : 0, cuts.successor(taken.cut) === taken.cut ? state : -1);
        return run;
      }
    }
    return -1;
  }

  /** The run ends below the cap at a state that refuses every safe character. */
  closed(state: number): boolean {
    return this.run(state) < this.cap && this.closedEnd[state] === 1;
  }

  /** The state after any safe character from a chain state (it is itself for a loop). */
  successor(state: number): number {
    this.run(state);
    return this.successors[state];
  }

  private follow(state: number): number {
    const a = this.automaton;
    const path: number[] = [];
    const onPath = new Set<number>();
    let s = state;
    let run: number;
    let closed = 0;
    for (;;) {
      const known = s < this.runs.length ? this.runs[s] : -1;
      if (known >= 0) {
        run = known;
        closed = this.closedEnd[s];
        break;
      }
      if (onPath.has(s)) {
        run = this.cap;
        break;
      }
      if (path.length >= MAX_WALK * this.cap) {
        // Still going: the first states have the cap ahead; the others are left unknown.
        for (let i = 0; i <= path.length - this.cap; i++) this.set(path[i], this.cap, 0, this.successors[path[i]]);
        return this.runs[state];
      }
      const next = this.step(s);
      if (next < 0) {
        run = 0;
        closed = a.mayTake(s, SAFE_FIRST_BYTES, this.markerRefuses) ? 0 : 1;
        this.set(s, 0, closed, -1);
        break;
      }
      path.push(s);
      onPath.add(s);
      this.set(s, -1, 0, next);
      s = next;
    }
    for (let i = path.length - 1; i >= 0; i--) {
      run = Math.min(this.cap, run + 1);
      this.set(path[i], run, closed, this.successors[path[i]]);
    }
    return this.runs[state];
  }

  /** The state every safe character leads to from `state` (canonical), or -1 when that is not shown. */
  private step(state: number): number {
    if (!this.popsAfterOneCharFrom(state)) return -1;
    const a = this.automaton;
    const next = a.next(state, 0x20);
    return next === DEAD ? -1 : this.canonical(next);
  }

  /** The stacks of `state` that take safe characters sit on one parent, and their tops read one character and pop to it. */
  private popsAfterOneCharFrom(state: number): boolean {
    const a = this.automaton;
    const tops = a.topFramesOverOneParent(state, SAFE_FIRST_BYTES);
    if (!tops) return false;
    let pops = this.popsAfterOneChar.get(tops.tops);
    if (pops === undefined) {
      pops = readsOneCharAndPops(a, tops.tops);
      this.popsAfterOneChar.set(tops.tops, pops);
    }
    return pops;
  }

  private set(state: number, run: number, closed: number, successor: number): void {
    if (state >= this.runs.length) {
      const size = Math.max(2 * this.runs.length, this.automaton.stateCount + 1024);
      const runs = new Int16Array(size).fill(-1);
      runs.set(this.runs);
      this.runs = runs;
      const ends = new Uint8Array(size);
      ends.set(this.closedEnd);
      this.closedEnd = ends;
      const succ = new Int32Array(size).fill(-1);
      succ.set(this.successors);
      this.successors = succ;
    }
    this.runs[state] = run;
    this.closedEnd[state] = closed;
    this.successors[state] = successor;
  }
}

/**
 * From `tops` (top frames over the context marker), every safe character is read and leads to
 * the context marker alone, and no partial character reaches the context (so below the tops
 * nothing but what follows a whole character can matter).
 */
function readsOneCharAndPops(a: StackAutomaton, tops: number): boolean {
  const done = a.contextOnly;
  for (const seq of safeCharSequences()) {
    let states = [tops];
    for (let k = 0; k < seq.length; k++) {
      const [lo, hi] = seq[k];
      const next = new Set<number>();
      for (const s of states)
        for (let b = lo; b <= hi; b++) {
          const t = a.next(s, b);
          if (t === DEAD) return false;
          if (k < seq.length - 1 ? a.reachesContext[t] : t !== done) return false;
          next.add(t);
        }
      if (next.size > MAX_CHECK_STATES) return false;
      states = [...next];
    }
  }
  return true;
}
