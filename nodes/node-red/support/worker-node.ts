// What every rwkv-* worker node shares: finding its model config node, one AbortController per
// message in flight, status text, done() on every path, and on close (redeploy, removal) aborting
// all in-flight requests and waiting until the engine has let go of their slots. A cancelled message
// ends with done(err) naming why (node closed, HTTP caller gone, a cancel message), so a Catch node can
// answer its caller. A control message (msg.cancel = id, or topic 'cancel' with the id as payload) cancels
// the in-flight message whose msg.requestId or msg._msgid is that id.

import type { Engine } from '../../../engine/api';
import { RequestCancelledError, type CancelCause } from '../../../engine/errors';
import { errorStatus, readyStatus, type ProgressStatus } from '../../shared/progress-status';
import type { ModelConfigNode } from './model-config-node';
import type { NodeMessage, NodeRedApi, NodeStatus, RuntimeNode, SendFunction } from './node-red-types';

export interface WorkContext {
  engine: Engine;
  signal: AbortSignal;
  /** Progress of this message; shown as the node status. */
  progress(status: ProgressStatus): void;
  send: SendFunction;
}

/** Handles one message; returns what to send (null: send nothing). */
export type WorkHandler = (msg: NodeMessage, ctx: WorkContext) => Promise<NodeMessage | (NodeMessage | null)[] | null>;

/** Builds a node instance's handler from its editor configuration. */
export type HandlerFactory = (config: Record<string, unknown>) => WorkHandler;

const FILL: Record<ProgressStatus['phase'], NodeStatus> = {
  ready: { fill: 'green', shape: 'ring' },
  queued: { fill: 'grey', shape: 'ring' },
  prefill: { fill: 'yellow', shape: 'ring' },
  decode: { fill: 'blue', shape: 'dot' },
  done: { fill: 'green', shape: 'dot' },
  error: { fill: 'red', shape: 'ring' },
};

export function registerWorkerNode(RED: NodeRedApi, type: string, makeHandler: HandlerFactory): void {
  RED.nodes.registerType(type, function (this: RuntimeNode, config: Record<string, unknown>) {
    RED.nodes.createNode(this, config);
    const node = this;
    const model = RED.nodes.getNode(String(config.model ?? '')) as ModelConfigNode | null;
    const handler = makeHandler(config);
    const inFlight = new Map<AbortController, Promise<void>>();
    /** Ids a control message may name, per message in flight. */
    const idsOf = new Map<AbortController, string[]>();
    let closing = false;

    let shownProgress = false; // once a message shows its progress, the deploy-time status stays away
    const show = (status: ProgressStatus) => {
      shownProgress = true;
      const busy = inFlight.size > 1 ? `${inFlight.size} active · ` : '';
      node.status({ ...FILL[status.phase], text: busy + status.text });
    };

    if (!model) node.status({ fill: 'red', shape: 'ring', text: 'no rwkv-model configuration' });
    // At deploy, not at the first message: which model runs where, or why it failed to load.
    model?.getEngine().then(
      (engine) => shownProgress || closing || node.status({ ...FILL.ready, text: readyStatus(engine.modelInfo).text }),
      (err: unknown) => shownProgress || closing || node.status({ ...FILL.error, text: errorStatus(err).text }),
    );

    node.on('input', (msg, send, done) => {
      if (!model) {
        done(new Error(`${type}: no rwkv-model configuration selected`));
        return;
      }
      const cancel = cancelTarget(msg);
      if (cancel !== null) {
        // A control message: it is not a request; it cancels the one(s) it names and goes no further.
        if (cancel instanceof Error) return done(new Error(`${type}: ${cancel.message}`));
        let hits = 0;
        for (const [controller, ids] of idsOf) {
          if (!ids.includes(cancel) || controller.signal.aborted) continue;
          controller.abort(new RequestCancelledError(`${type}: request ${cancel} cancelled by a cancel message`, 'cancelled'));
          hits++;
        }
        if (hits === 0) node.warn(`${type}: cancel: no request ${cancel} in flight (finished already, or another node's)`);
        done();
        return;
      }
      const controller = new AbortController();
      if (closing) controller.abort(new RequestCancelledError(`${type} is closing (redeploy or shutdown); request not started`, 'closed'));
      const unwatch = watchHttpCaller(msg, () =>
        controller.abort(new RequestCancelledError(`${type}: the HTTP caller disconnected before the answer; request cancelled`, 'disconnected')),
      );
      // Once cancelled, the engine's last events (e.g. its 'abort' stop) must not paint the status as done.
      const progress = (status: ProgressStatus) => controller.signal.aborted || show(status);
      const work = (async () => {
        try {
          const engine = await model.getEngine();
          const out = await handler(msg, { engine, signal: controller.signal, progress, send });
          if (controller.signal.aborted) throw controller.signal.reason; // cancelled meanwhile: nothing goes out
          if (out) send(out);
          done();
        } catch (err) {
          const why = controller.signal.aborted ? controller.signal.reason : err;
          const error = why instanceof Error ? why : new Error(String(why));
          if (!closing) show(controller.signal.aborted ? { phase: 'error', text: CANCELLED_STATUS[cancelCause(controller.signal.reason)] } : errorStatus(error));
          done(error);
        } finally {
          unwatch();
        }
      })().finally(() => (inFlight.delete(controller), idsOf.delete(controller)));
      inFlight.set(controller, work);
      idsOf.set(controller, requestIds(msg));
    });

    node.on('close', (_removed, done) => {
      closing = true;
      const closed = new RequestCancelledError(`${type} closed (redeploy, removal or shutdown) before the answer; request cancelled`, 'closed');
      for (const controller of inFlight.keys()) controller.abort(closed);
      Promise.allSettled([...inFlight.values()]).then(() => {
        node.status({});
        done();
      });
    });
  });
}

const CANCELLED_STATUS: Record<CancelCause | 'abort', string> = {
  cancelled: 'cancelled: by a cancel message',
  disconnected: 'cancelled: caller disconnected',
  closed: 'cancelled: node closed',
  abort: 'cancelled',
};

function cancelCause(reason: unknown): CancelCause | 'abort' {
  return reason instanceof RequestCancelledError ? reason.cancelCause : 'abort';
}

/** Longest request id a cancel message may name (ids are compared, never stored beyond the message). */
const MAX_REQUEST_ID = 256;

/** The ids a cancel message can use for `msg`: its msg.requestId (string or number) and its msg._msgid. */
function requestIds(msg: NodeMessage): string[] {
  const ids: string[] = [];
  const own = msg.requestId;
  if ((typeof own === 'string' && own.length > 0) || (typeof own === 'number' && Number.isFinite(own))) ids.push(String(own));
  if (typeof msg._msgid === 'string' && msg._msgid.length > 0) ids.push(msg._msgid);
  return ids;
}

/**
 * The id a control message cancels (msg.cancel, or the payload of a message with topic 'cancel'); null for an
 * ordinary message; an Error naming the problem for a malformed one.
 */
export function cancelTarget(msg: NodeMessage): string | Error | null {
  let id: unknown;
  if (msg.cancel !== undefined && msg.cancel !== null && msg.cancel !== false) id = msg.cancel;
  else if (msg.topic === 'cancel') id = msg.payload;
  else return null;
  if (typeof id === 'number' && Number.isFinite(id)) return String(id);
  if (typeof id === 'string' && id.length > 0 && id.length <= MAX_REQUEST_ID) return id;
  return new Error(`a cancel message must name the request: msg.cancel (or the payload of topic 'cancel') must be its msg.requestId or msg._msgid (a string of 1-${MAX_REQUEST_ID} characters or a number), got ${describe(id)}`);
}

function describe(value: unknown): string {
  if (typeof value === 'string') return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value);
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

/**
 * Calls `onGone` when the HTTP caller of a message from an http-in node goes away before the answer:
 * http-in puts its response wrapper in msg.res, the express response being msg.res._res, which emits
 * 'close' both after a normal end and when the connection drops (then it is not finished). Returns
 * the function that stops watching.
 */
export function watchHttpCaller(msg: NodeMessage, onGone: () => void): () => void {
  const wrapper = msg.res as { _res?: unknown } | undefined;
  const res = (isPlainObject(wrapper) && wrapper._res !== undefined ? wrapper._res : wrapper) as HttpResponseLike | undefined;
  if (!res || typeof res.on !== 'function' || typeof res.removeListener !== 'function') return () => {};
  const finished = () => res.writableFinished === true || res.writableEnded === true;
  if ((res.destroyed === true || res.closed === true) && !finished()) {
    onGone();
    return () => {};
  }
  const onClose = () => {
    if (!finished()) onGone();
  };
  res.on('close', onClose);
  return () => res.removeListener!('close', onClose);
}

interface HttpResponseLike {
  on?: (event: 'close', listener: () => void) => unknown;
  removeListener?: (event: 'close', listener: () => void) => unknown;
  writableFinished?: boolean;
  writableEnded?: boolean;
  destroyed?: boolean;
  closed?: boolean;
}

/**
 * The parameters for one message: each key comes from msg.<key>, else from an object payload's
 * <key>, else from the node's editor configuration.
 */
export function mergeParameters<K extends string>(
  keys: readonly K[],
  msg: NodeMessage,
  config: Record<string, unknown>,
): Partial<Record<K, unknown>> {
  const payload = isPlainObject(msg.payload) ? msg.payload : {};
  const out: Partial<Record<K, unknown>> = {};
  for (const key of keys) {
    if (msg[key] !== undefined) out[key] = msg[key];
    else if (payload[key] !== undefined) out[key] = payload[key];
    else if (config[key] !== undefined) out[key] = config[key];
  }
  return out;
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}
