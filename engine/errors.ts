// Error classes of the request runtime. Each names the request-level problem so a flow node can
// show it to the user; none of them stops the engine.

/** A request parameter is invalid; raised before anything is queued. */
export class RequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RequestError';
  }
}

/** All slots are busy and the waiting queue is at its bound. */
export class QueueFullError extends Error {
  constructor(readonly maxQueue: number) {
    super(`engine queue is full (${maxQueue} requests already waiting for a slot); retry later or raise maxQueue`);
    this.name = 'QueueFullError';
  }
}

/** The request was cancelled through its AbortSignal. */
export class AbortError extends Error {
  constructor(message = 'request aborted') {
    super(message);
    this.name = 'AbortError';
  }
}

/** The engine was disposed (last lease released or model reloaded) before the request finished. */
/** Why a caller cancelled a request: a cancel message for it, its HTTP caller gone, or its node closing. */
export type CancelCause = 'cancelled' | 'disconnected' | 'closed';

/**
 * The reason a host gives its AbortSignal when it cancels a request: the engine then ends the request with
 * stop reason 'abort' and this cause (instead of a plain 'abort').
 */
export class RequestCancelledError extends Error {
  constructor(
    message: string,
    readonly cancelCause: CancelCause,
  ) {
    super(message);
    this.name = 'RequestCancelledError';
  }
}

export class EngineClosedError extends Error {
  constructor(message = 'engine is closed') {
    super(message);
    this.name = 'EngineClosedError';
  }
}

/** A state file or buffer is unreadable or does not fit the loaded model. */
export class StateFileError extends Error {
  constructor(source: string, problem: string) {
    super(`state ${source}: ${problem}`);
    this.name = 'StateFileError';
  }
}
