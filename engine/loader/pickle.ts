// A restricted Python unpickler (protocols 0-5 binary opcodes, as torch.save writes them). It never
// executes anything: GLOBAL/STACK_GLOBAL are resolved through a caller-supplied allow-list and
// persistent ids through a caller-supplied loader, so an unknown global or opcode is an error that
// names it rather than a security hole. A crafted stream cannot make it allocate or work without bound:
// the stream's size, the values it pushes, the items put into containers, the memo and the nesting depth
// are all capped (LOADER_LIMITS.pickle), integers are at most 8 bytes, and messages never stringify a
// (possibly shared, exponentially large) structure.

import { clip, LOADER_LIMITS } from './limits';

/** A Python tuple (kept distinct from lists only where it matters: it is a plain frozen array). */
export type PyTuple = readonly unknown[];

/** A callable resolved from GLOBAL: REDUCE calls it with the argument tuple. */
export interface PyCallable {
  readonly qualifiedName: string;
  call(args: PyTuple): unknown;
}

/** A dict whose state was set by BUILD (e.g. OrderedDict with `_metadata`) keeps it here. */
export class PyDict extends Map<unknown, unknown> {
  state?: unknown;
}

export type PickleLimits = { -readonly [K in keyof typeof LOADER_LIMITS.pickle]: number };

export interface UnpickleHooks {
  /** Resolve `module.name`; throw (or return undefined) for anything not allowed. */
  findClass(module: string, name: string): PyCallable | undefined;
  persistentLoad(pid: unknown): unknown;
}

const MARK = Symbol('mark');

export class UnpicklingError extends Error {}

export function unpickle(data: Uint8Array, hooks: UnpickleHooks, limits: PickleLimits = LOADER_LIMITS.pickle): unknown {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const stack: unknown[] = [];
  const memo = new Map<number, unknown>();
  /** Nesting depth of each container made (absent: depth 1 or not a container). */
  const depthOf = new WeakMap<object, number>();
  let pos = 0;
  let values = 0;
  let elements = 0;

  const fail = (msg: string): never => {
    throw new UnpicklingError(`pickle: ${clip(msg, 300)} (at byte ${pos})`);
  };
  if (data.length > limits.maxBytes) fail(`stream of ${data.length} bytes is larger than the ${limits.maxBytes} allowed`);
  const push = (v: unknown) => {
    if (++values > limits.maxValues) fail(`more than ${limits.maxValues} values`);
    stack.push(v);
  };
  /** Account for `items` going into `container` (new or existing): element count and nesting depth. */
  const contain = (container: object, items: readonly unknown[]) => {
    elements += items.length;
    if (elements > limits.maxElements) fail(`more than ${limits.maxElements} container items in total`);
    let depth = depthOf.get(container) ?? 1;
    for (const item of items) {
      if (item !== null && typeof item === 'object') depth = Math.max(depth, (depthOf.get(item) ?? 1) + 1);
    }
    if (depth > limits.maxDepth) fail(`containers nested more than ${limits.maxDepth} levels deep`);
    if (depth > 1) depthOf.set(container, depth);
  };
  const need = (n: number) => {
    if (pos + n > data.length) fail('unexpected end of data');
  };
  const u8 = () => (need(1), data[pos++]);
  const u16 = () => (need(2), (pos += 2), view.getUint16(pos - 2, true));
  const u32 = () => (need(4), (pos += 4), view.getUint32(pos - 4, true));
  const i32 = () => (need(4), (pos += 4), view.getInt32(pos - 4, true));
  const u64 = () => {
    need(8);
    const v = view.getBigUint64(pos, true);
    pos += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) fail(`length ${v} too large`);
    return Number(v);
  };
  const bytes = (n: number) => (need(n), (pos += n), data.subarray(pos - n, pos));
  const utf8 = (n: number) => Buffer.from(bytes(n)).toString('utf8');
  const line = () => {
    const end = data.indexOf(0x0a, pos);
    if (end < 0) fail('unterminated text line');
    const s = Buffer.from(data.subarray(pos, end)).toString('latin1');
    pos = end + 1;
    return s;
  };
  const pop = () => (stack.length === 0 ? fail('stack underflow') : stack.pop());
  const top = () => (stack.length === 0 ? fail('stack underflow') : stack[stack.length - 1]);
  const popMark = (): unknown[] => {
    for (let i = stack.length - 1; i >= 0; i--) {
      if (stack[i] === MARK) {
        const items = stack.splice(i);
        items.shift();
        return items;
      }
    }
    return fail('MARK not found');
  };
  const memoPut = (i: number) => {
    if (!memo.has(i) && memo.size >= limits.maxMemo) fail(`more than ${limits.maxMemo} memo entries`);
    memo.set(i, top());
  };
  const memoGet = (i: number) => (memo.has(i) ? memo.get(i) : fail(`memo key ${i} not defined`));
  /** Little-endian two's-complement integer of arbitrary length (LONG1 / LONG4). */
  const long = (n: number): number => {
    // Python writes the fewest bytes; a safe integer needs at most 8. Longer ones are refused before
    // decoding (arbitrary-precision decoding of a huge one is quadratic).
    if (n > 8) fail(`integer of ${n} bytes is too large`);
    const b = bytes(n);
    let v = 0n;
    for (let i = n - 1; i >= 0; i--) v = (v << 8n) | BigInt(b[i]);
    if (n > 0 && b[n - 1] & 0x80) v -= 1n << BigInt(8 * n);
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) fail(`integer ${v} too large`);
    return Number(v);
  };
  const setItems = (dict: unknown, items: unknown[]) => {
    if (!(dict instanceof Map)) fail('SETITEM(S) on a non-dict');
    if (items.length % 2) fail('odd number of items for SETITEMS');
    contain(dict as object, items);
    for (let i = 0; i < items.length; i += 2) (dict as Map<unknown, unknown>).set(items[i], items[i + 1]);
  };
  const append = (list: unknown, items: unknown[]) => {
    if (!Array.isArray(list) || Object.isFrozen(list)) fail('APPEND(S) on a non-list');
    contain(list as unknown[], items);
    for (const item of items) (list as unknown[]).push(item);
  };
  const global = (module: string, name: string) => {
    const c = hooks.findClass(module, name);
    if (!c) fail(`unsupported global ${clip(module, 100)}.${clip(name, 100)}`);
    push(c);
  };
  const tuple = (items: unknown[]): PyTuple => {
    contain(items, items);
    return Object.freeze(items);
  };
  const list = (items: unknown[]): unknown[] => {
    contain(items, items);
    return items;
  };
  const dict = (items: unknown[]): PyDict => {
    const d = new PyDict();
    setItems(d, items);
    return d;
  };
  const call = (fn: unknown, args: unknown) => {
    if (!fn || typeof (fn as PyCallable).call !== 'function') fail('REDUCE/NEWOBJ on a non-callable');
    if (!Array.isArray(args)) fail('REDUCE/NEWOBJ arguments are not a tuple');
    return (fn as PyCallable).call(args as PyTuple);
  };

  for (;;) {
    const opPos = pos;
    const op = u8();
    switch (op) {
      case 0x80: { // PROTO
        const v = u8();
        if (v > 5) fail(`unsupported pickle protocol ${v}`);
        break;
      }
      case 0x95: u64(); break; // FRAME: framing is irrelevant when the whole stream is in memory
      case 0x2e: { // STOP
        if (stack.length !== 1) fail(`stack has ${stack.length} items at STOP`);
        return stack[0];
      }
      case 0x28: push(MARK); break; // MARK
      case 0x30: pop(); break; // POP
      case 0x31: popMark(); break; // POP_MARK
      case 0x32: push(top()); break; // DUP
      case 0x4e: push(null); break; // NONE
      case 0x88: push(true); break; // NEWTRUE
      case 0x89: push(false); break; // NEWFALSE
      case 0x4a: push(i32()); break; // BININT
      case 0x4b: push(u8()); break; // BININT1
      case 0x4d: push(u16()); break; // BININT2
      case 0x8a: push(long(u8())); break; // LONG1
      case 0x8b: push(long(u32())); break; // LONG4
      case 0x47: { need(8); push(view.getFloat64(pos, false)); pos += 8; break; } // BINFLOAT (big-endian)
      case 0x58: push(utf8(u32())); break; // BINUNICODE
      case 0x8c: push(utf8(u8())); break; // SHORT_BINUNICODE
      case 0x8d: push(utf8(u64())); break; // BINUNICODE8
      case 0x54: push(Buffer.from(bytes(u32())).toString('latin1')); break; // BINSTRING
      case 0x55: push(Buffer.from(bytes(u8())).toString('latin1')); break; // SHORT_BINSTRING
      case 0x42: push(bytes(u32())); break; // BINBYTES
      case 0x43: push(bytes(u8())); break; // SHORT_BINBYTES
      case 0x8e: push(bytes(u64())); break; // BINBYTES8
      case 0x5d: push([]); break; // EMPTY_LIST
      case 0x6c: push(list(popMark())); break; // LIST
      case 0x61: { const v = pop(); append(top(), [v]); break; } // APPEND
      case 0x65: { const items = popMark(); append(top(), items); break; } // APPENDS
      case 0x29: push(tuple([])); break; // EMPTY_TUPLE
      case 0x74: push(tuple(popMark())); break; // TUPLE
      case 0x85: push(tuple([pop()])); break; // TUPLE1
      case 0x86: { const b = pop(); const a = pop(); push(tuple([a, b])); break; } // TUPLE2
      case 0x87: { const c = pop(); const b = pop(); const a = pop(); push(tuple([a, b, c])); break; } // TUPLE3
      case 0x7d: push(new PyDict()); break; // EMPTY_DICT
      case 0x64: push(dict(popMark())); break; // DICT
      case 0x73: { const v = pop(); const k = pop(); setItems(top(), [k, v]); break; } // SETITEM
      case 0x75: { const items = popMark(); setItems(top(), items); break; } // SETITEMS
      case 0x63: { const module = line(); const name = line(); global(module, name); break; } // GLOBAL
      case 0x93: { // STACK_GLOBAL
        const name = pop();
        const module = pop();
        if (typeof module !== 'string' || typeof name !== 'string') fail('STACK_GLOBAL needs two strings');
        global(module as string, name as string);
        break;
      }
      case 0x52: { const args = pop(); const fn = pop(); push(call(fn, args)); break; } // REDUCE
      case 0x81: { const args = pop(); const cls = pop(); push(call(cls, args)); break; } // NEWOBJ
      case 0x62: { // BUILD: only dict-like targets take state (OrderedDict._metadata); other state is dropped.
        const state = pop();
        const obj = top();
        if (obj instanceof PyDict) obj.state = state;
        break;
      }
      case 0x51: push(hooks.persistentLoad(pop())); break; // BINPERSID
      case 0x71: memoPut(u8()); break; // BINPUT
      case 0x72: memoPut(u32()); break; // LONG_BINPUT
      case 0x94: memoPut(memo.size); break; // MEMOIZE
      case 0x68: push(memoGet(u8())); break; // BINGET
      case 0x6a: push(memoGet(u32())); break; // LONG_BINGET
      default:
        pos = opPos;
        fail(`unsupported opcode 0x${op.toString(16).padStart(2, '0')}${op >= 0x20 && op < 0x7f ? ` '${String.fromCharCode(op)}'` : ''}`);
    }
  }
}
