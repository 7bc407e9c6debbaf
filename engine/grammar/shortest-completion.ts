// The shortest byte string that completes the input from a recognizer state. A scheduler near
// its token budget can emit it instead of sampling, so a constrained output is closed properly
// rather than cut off.

import { BYTES, END, FlatGrammar } from './flat-grammar';
import { StackAutomaton } from './stack-automaton';

export class ShortestCompletion {
  private minLen: Float64Array;
  private bestAlt: Int32Array;

  constructor(private g: FlatGrammar, private a: StackAutomaton) {
    const n = g.ruleAlts.length;
    this.minLen = new Float64Array(n).fill(Infinity);
    this.bestAlt = new Int32Array(n).fill(-1);
    // Bellman-Ford style: only strict improvements, so the chosen alternatives never form a
    // cycle and emitting always terminates.
    for (let changed = true; changed; ) {
      changed = false;
      for (let r = 0; r < n; r++) {
        for (const s of g.ruleAlts[r]) {
          const len = this.lengthFrom(s);
          if (len < this.minLen[r]) {
            this.minLen[r] = len;
            this.bestAlt[r] = s;
            changed = true;
          }
        }
      }
    }
  }

  private lengthFrom(pos: number): number {
    const { kind, arg } = this.g;
    let len = 0;
    for (let p = pos; kind[p] !== END; p++) len += kind[p] === BYTES ? 1 : this.minLen[arg[p]];
    return len;
  }

  /** Bytes that take `state` to acceptance, shortest first; empty when already accepting. */
  bytes(state: number): Uint8Array {
    let best = -1;
    let bestLen = Infinity;
    for (const node of this.a.stateStacks[state]) {
      let len = 0;
      for (let n = node; n !== 0; n = this.a.nodeRest(n)) len += this.lengthFrom(this.a.nodeTop(n));
      if (len < bestLen) {
        bestLen = len;
        best = node;
      }
    }
    const out: number[] = [];
    for (let n = best; n > 0; n = this.a.nodeRest(n)) this.emitFrom(this.a.nodeTop(n), out);
    return Uint8Array.from(out);
  }

  private emitFrom(pos: number, out: number[]): void {
    const { kind, arg, byteSets } = this.g;
    for (let p = pos; kind[p] !== END; p++) {
      if (kind[p] === BYTES) out.push(pickByte(byteSets, arg[p]));
      else this.emitFrom(this.bestAlt[arg[p]], out);
    }
  }
}

/** A readable member of a byte set: printable ASCII (letters and digits first) when there is one. */
function pickByte(sets: Uint8Array, set: number): number {
  const base = set * 256;
  for (const b of PREFERRED) if (sets[base + b]) return b;
  for (let b = 0; b < 256; b++) if (sets[base + b]) return b;
  return 0x20;
}

const PREFERRED: number[] = (() => {
  const order: number[] = [];
  for (let c = 0x61; c <= 0x7a; c++) order.push(c);
  for (let c = 0x30; c <= 0x39; c++) order.push(c);
  for (let c = 0x41; c <= 0x5a; c++) order.push(c);
  for (let c = 0x20; c < 0x7f; c++) if (!order.includes(c)) order.push(c);
  return order;
})();
