// An error that is the HTTP request's own fault (bad body, size, auth, route): answered with its status and
// message, counted apart from the engine's errors.

export class HttpError extends Error {
  /** Close the connection after answering (the rest of an oversized body is never read). */
  readonly close: boolean;
  /** OpenAI's error type for it. */
  readonly type: string;

  constructor(
    readonly status: number,
    message: string,
    opts: { close?: boolean; type?: string } = {},
  ) {
    super(message);
    this.name = 'HttpError';
    this.close = opts.close ?? false;
    this.type = opts.type ?? (status === 401 ? 'authentication_error' : status === 404 ? 'not_found_error' : 'invalid_request_error');
  }
}
