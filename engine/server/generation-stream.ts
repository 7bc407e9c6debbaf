// One engine generation driven for an HTTP caller. The first event is awaited before any header is sent, so
// whatever the engine refuses up front (bad parameters, a schema that does not compile, a full queue) is an
// HTTP error status rather than a 200 with an error inside; everything after streams.

import type { Engine, GenerateEvent, GenerateRequest } from '../api';

export type StopEvent = Extract<GenerateEvent, { type: 'stop' }>;

export class GenerationStream {
  private constructor(
    private readonly it: AsyncIterator<GenerateEvent>,
    private first: GenerateEvent | null,
  ) {}

  /** Starts the generation (the caller's signal cancels it) and waits for its first event. */
  static async open(engine: Engine, request: GenerateRequest, signal: AbortSignal): Promise<GenerationStream> {
    const it = engine.generate(request, { signal })[Symbol.asyncIterator]();
    let first: IteratorResult<GenerateEvent>;
    try {
      first = await it.next();
    } catch (err) {
      await it.return?.();
      throw err;
    }
    return new GenerationStream(it, first.done ? null : first.value);
  }

  /** Every event, the first included; leaving the loop early cancels the generation. */
  async *events(): AsyncGenerator<GenerateEvent> {
    try {
      if (this.first) yield this.first;
      this.first = null;
      for (;;) {
        const next = await this.it.next();
        if (next.done) return;
        yield next.value;
      }
    } finally {
      await this.it.return?.();
    }
  }
}
