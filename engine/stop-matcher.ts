// Stop strings matched on the decoded text stream. Tokens rarely align with a stop string, so
// text that could still turn out to be the start of a stop string is held back; nothing of a
// stop string is ever emitted.

export class StopMatcher {
  private pending = '';
  private stoppedAt = -1;

  constructor(private readonly stops: readonly string[]) {
    for (const s of stops) if (typeof s !== 'string' || s.length === 0) throw new Error('stop strings must be non-empty strings');
  }

  get stopped(): boolean {
    return this.stoppedAt >= 0;
  }

  /** Add decoded text; returns the text that is now safe to emit. After a stop, returns ''. */
  push(text: string): string {
    if (this.stopped) return '';
    this.pending += text;
    let first = -1;
    for (const s of this.stops) {
      const at = this.pending.indexOf(s);
      if (at >= 0 && (first < 0 || at < first)) first = at;
    }
    if (first >= 0) {
      this.stoppedAt = first;
      const out = this.pending.slice(0, first);
      this.pending = '';
      return out;
    }
    const hold = this.heldSuffixLength();
    const out = this.pending.slice(0, this.pending.length - hold);
    this.pending = this.pending.slice(this.pending.length - hold);
    return out;
  }

  /** End of generation without a stop: release what was held. */
  flush(): string {
    const out = this.stopped ? '' : this.pending;
    this.pending = '';
    return out;
  }

  /** Longest suffix of pending that is a proper prefix of some stop string. */
  private heldSuffixLength(): number {
    let best = 0;
    for (const s of this.stops) {
      const max = Math.min(s.length - 1, this.pending.length);
      for (let n = max; n > best; n--) {
        if (this.pending.endsWith(s.slice(0, n))) {
          best = n;
          break;
        }
      }
    }
    return best;
  }
}
