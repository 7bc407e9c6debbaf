// The slice of the Node-RED runtime API these nodes use (Node-RED ships no TypeScript types).

export interface NodeMessage {
  _msgid?: string;
  payload?: unknown;
  [key: string]: unknown;
}

export interface NodeStatus {
  fill?: 'red' | 'green' | 'yellow' | 'blue' | 'grey';
  shape?: 'ring' | 'dot';
  text?: string;
}

export type SendFunction = (msg: NodeMessage | (NodeMessage | null)[]) => void;
export type DoneFunction = (err?: Error) => void;

export interface RuntimeNode {
  id: string;
  /** The node's credentials (declared in registerType), kept apart from the flow file by Node-RED. */
  credentials?: Record<string, unknown>;
  status(status: NodeStatus): void;
  error(err: unknown, msg?: NodeMessage): void;
  log(text: string): void;
  warn(message: unknown): void;
  on(event: 'input', listener: (msg: NodeMessage, send: SendFunction, done: DoneFunction) => void): void;
  on(event: 'close', listener: (removed: boolean, done: () => void) => void): void;
}

export interface NodeRedApi {
  /** The runtime's settings; userDir is where flows and installed nodes live. */
  settings?: { userDir?: string };
  /** The editor's admin HTTP API (express), and its permission check. */
  httpAdmin?: { get(route: string, ...handlers: ((req: unknown, res: { json(body: unknown): void }, next: () => void) => void)[]): void };
  auth?: { needsPermission(permission: string): (req: unknown, res: unknown, next: () => void) => void };
  nodes: {
    createNode(node: object, config: object): void;
    getNode(id: string): unknown;
    registerType(
      type: string,
      constructor: (this: RuntimeNode, config: Record<string, unknown>) => void,
      opts?: { credentials?: Record<string, { type: 'text' | 'password' }> },
    ): void;
  };
}
