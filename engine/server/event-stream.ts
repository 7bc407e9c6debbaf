// Streamed answers: NDJSON (one JSON value a line) for the engine API, Server-Sent Events for the OpenAI
// routes. Headers go out with the first write; writes after the caller left are dropped.

import type { ServerResponse } from 'http';

export class NdjsonStream {
  constructor(private readonly res: ServerResponse) {}

  open(): void {
    this.res.writeHead(200, { 'Content-Type': 'application/x-ndjson; charset=utf-8', 'Cache-Control': 'no-store', 'X-Accel-Buffering': 'no' });
  }

  write(value: unknown): void {
    if (!this.res.destroyed) this.res.write(JSON.stringify(value) + '\n');
  }
}

export class SseStream {
  constructor(private readonly res: ServerResponse) {}

  open(): void {
    this.res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-store', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
  }

  write(value: unknown): void {
    if (!this.res.destroyed) this.res.write(`data: ${JSON.stringify(value)}\n\n`);
  }

  done(): void {
    if (!this.res.destroyed) this.res.write('data: [DONE]\n\n');
  }
}
