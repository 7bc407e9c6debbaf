// The operator's per-request deadline (EngineConfig.requestTimeoutMs): one AbortSignal that fires when
// either the caller aborts or the deadline passes, so the scheduler cancels a request past its time
// the same way it cancels one its caller gave up on (queued: removed; running: its slot freed).

/** A request ran past the deadline set in the model configuration. */
export class RequestTimeoutError extends Error {
  /** A generation's output up to the deadline (generate only; stop reason 'timeout'). */
  partial?: { reason: 'timeout'; text: string; promptTokens: number; completionTokens: number };

  constructor(readonly timeoutMs: number) {
    super(`request cancelled: it ran past the ${formatMs(timeoutMs)} deadline of this model (requestTimeoutMs in the model configuration)`);
    this.name = 'RequestTimeoutError';
  }
}

/** setTimeout's largest delay; longer ones would fire at once. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

export class RequestDeadline {
  /** Aborted by the caller's signal or by the deadline. */
  readonly signal: AbortSignal;
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly forward = () => this.controller.abort();
  private passed = false;

  /** timeoutMs 0: no deadline, only the caller's signal. Starts counting now. */
  constructor(
    readonly timeoutMs: number,
    private readonly outer?: AbortSignal,
  ) {
    this.signal = this.controller.signal;
    if (outer?.aborted) this.controller.abort();
    else outer?.addEventListener('abort', this.forward, { once: true });
    if (timeoutMs > 0 && !this.signal.aborted) {
      this.timer = setTimeout(() => {
        this.passed = !this.signal.aborted;
        this.controller.abort();
      }, timeoutMs);
      // A pending deadline alone must not keep the process alive.
      this.timer.unref();
    }
  }

  /** True when the deadline, not the caller, ended the request. */
  get expired(): boolean {
    return this.passed;
  }

  /** The error to report for `err`: a timeout when the deadline caused it, else err itself. */
  explain(err: unknown): unknown {
    return this.passed ? new RequestTimeoutError(this.timeoutMs) : err;
  }

  /** Runs `work` under the deadline; an abort caused by the deadline becomes RequestTimeoutError. */
  async run<T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    try {
      return await work(this.signal);
    } catch (err) {
      throw this.explain(err);
    } finally {
      this.dispose();
    }
  }

  /** Stop the timer and let go of the caller's signal (call when the request has ended). */
  dispose(): void {
    clearTimeout(this.timer);
    this.outer?.removeEventListener('abort', this.forward);
  }
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}
