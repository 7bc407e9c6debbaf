// A conversation state saved to disk: the tokens run through the model, the recurrent state after
// them and the logits that followed, as CBOR (cbor-x keeps typed arrays as typed arrays). The
// model's dimensions are stored too, so loading it into another model fails with a clear error.

// cbor-x ships CommonJS for require(), but its typings resolve as ESM under Node16 resolution.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { encode } = require('cbor-x') as { encode(v: unknown): Uint8Array };
import type { ModelInfo } from './types';
import { StateFileError } from './errors';
import { asShape, maxRows, maxSnapshotFloats, snapshotFloats, type StateShape } from './state-shape';
import { allFinite } from './yield-chunks';
import { decodeConversationCbor } from './conversation-cbor';

export const CONVERSATION_FORMAT = 'rwkv-flow.conversation';
/** 2: adds stateRows, the rows of a growing state (RWKV-7b) after its fixed part; version 1 files (fixed states) still load. */
export const CONVERSATION_VERSION = 2;

/** Most tokens a saved conversation holds: what is saved can always be read back within its bound. */
export const MAX_CONVERSATION_TOKENS = 1 << 20;

/**
 * Largest conversation file of this model: its state, logits and at most MAX_CONVERSATION_TOKENS tokens,
 * each a CBOR typed array of 4-byte values, plus the small fields and headers (64 KiB is ample).
 */
export function conversationBytesBound(info: ModelInfo, shape: StateShape | number): number {
  return 4 * (maxSnapshotFloats(asShape(shape)) + info.vocabSize + MAX_CONVERSATION_TOKENS) + 64 * 1024;
}

/** Bytes of a conversation file's head that isConversationHead needs. */
export const CONVERSATION_HEAD_BYTES = 64;

/**
 * Whether a file's first bytes are those encodeConversation writes: a CBOR map whose first entry is
 * format: "rwkv-flow.conversation". A save replaces only such a file, and judging the head keeps that
 * check cheap however large the file is.
 */
export function isConversationHead(head: Uint8Array): boolean {
  if (head.length === 0 || head[0] >> 5 !== 5) return false;
  const info = head[0] & 0x1f;
  let at = 1 + (info < 24 || info === 31 ? 0 : info === 24 ? 1 : info === 25 ? 2 : info === 26 ? 4 : info === 27 ? 8 : NaN);
  if (Number.isNaN(at)) return false;
  for (const text of ['format', CONVERSATION_FORMAT]) {
    if (text.length >= 24 || head[at] !== (0x60 | text.length)) return false; // short text string header
    for (let i = 0; i < text.length; i++) if (head[at + 1 + i] !== text.charCodeAt(i)) return false;
    at += 1 + text.length;
  }
  return true;
}

export interface ModelSignature {
  version: string;
  nLayer: number;
  nEmbd: number;
  nHead: number;
  headSize: number;
  vocabSize: number;
}

export interface ConversationFile {
  format: typeof CONVERSATION_FORMAT;
  version: number;
  model: ModelSignature;
  /** Initial state the tokens were fed from ('' = zero state). */
  initialState: string;
  /** Model rows fed. */
  tokens: Int32Array;
  state: Float32Array;
  /** Rows of a growing state after its fixed part (state-shape.ts); 0 for a fixed-size state. */
  stateRows: number;
  /** Logits after the last token. */
  logits: Float32Array;
  savedAt: string;
}

export function modelSignature(info: ModelInfo): ModelSignature {
  const { version, nLayer, nEmbd, nHead, headSize, vocabSize } = info;
  return { version, nLayer, nEmbd, nHead, headSize, vocabSize };
}

type ConversationFields = Omit<ConversationFile, 'format' | 'version' | 'savedAt' | 'stateRows'> & { stateRows?: number };

/** The file as one buffer (tools and tests); a save writes encodeConversationParts' parts as they are. */
export function encodeConversation(c: ConversationFields): Uint8Array {
  const parts = encodeConversationParts(c);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, (at += p.length) - p.length);
  return out;
}

const LITTLE_ENDIAN_HOST = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
/** RFC 8746 tags of little-endian Float32Array and Int32Array (those cbor-x writes and conversation-cbor.ts reads). */
const TYPED_ARRAY_TAG = new Map<unknown, number>([
  [Float32Array, 85],
  [Int32Array, 78],
]);

/**
 * The file's CBOR as parts: `format` first (isConversationHead), `stateRows` defaulting to 0 (a fixed-size state).
 * The small fields are encoded by cbor-x; each typed array is its CBOR header and then its own memory, not a copy,
 * so a save does not copy a state of hundreds of MiB on the event loop. Keep the arrays unchanged until written.
 */
export function encodeConversationParts(c: ConversationFields): Uint8Array[] {
  const fields = { format: CONVERSATION_FORMAT, version: CONVERSATION_VERSION, savedAt: new Date().toISOString(), stateRows: 0, ...c };
  if (!LITTLE_ENDIAN_HOST) return [encode(fields)]; // cbor-x tags big-endian arrays as such
  const entries = Object.entries(fields);
  if (entries.length >= 24) throw new Error(`internal: ${entries.length} conversation fields do not fit a one-byte CBOR map header`);
  const parts: Uint8Array[] = [Uint8Array.of(0xa0 | entries.length)]; // a map of fewer than 24 entries
  // cbor-x may hand out views of a buffer it reuses: each small part is copied before the next encode.
  for (const [key, value] of entries) {
    parts.push(encode(key).slice());
    const tag = value !== null && typeof value === 'object' ? TYPED_ARRAY_TAG.get(value.constructor) : undefined;
    if (tag === undefined) {
      parts.push(encode(value).slice());
      continue;
    }
    const array = value as Float32Array | Int32Array;
    parts.push(Uint8Array.of(0xd8, tag, ...byteStringHeader(array.byteLength)), new Uint8Array(array.buffer, array.byteOffset, array.byteLength));
  }
  return parts;
}

/** CBOR major type 2 (byte string) with its length. */
function byteStringHeader(length: number): number[] {
  if (length < 24) return [0x40 | length];
  if (length < 2 ** 8) return [0x58, length];
  if (length < 2 ** 16) return [0x59, length >> 8, length & 0xff];
  if (length < 2 ** 32) return [0x5a, (length >>> 24) & 0xff, (length >>> 16) & 0xff, (length >>> 8) & 0xff, length & 0xff];
  const high = Math.floor(length / 2 ** 32);
  return [0x5b, 0, 0, (high >>> 8) & 0xff, high & 0xff, (length >>> 24) & 0xff, (length >>> 16) & 0xff, (length >>> 8) & 0xff, length & 0xff];
}

/**
 * Parse and check a conversation file against the loaded model. The values are checked a piece at a time with turns
 * of the event loop between (a growing state's rows run to hundreds of MiB; yield-chunks.ts).
 */
export async function decodeConversation(bytes: Uint8Array, source: string, info: ModelInfo, shapeOrSize: StateShape | number): Promise<ConversationFile> {
  const shape = asShape(shapeOrSize);
  let value: unknown;
  try {
    value = await decodeConversationCbor(bytes);
  } catch (e) {
    throw new StateFileError(source, `not a readable CBOR file (${(e as Error).message})`);
  }
  const c = value as Partial<ConversationFile>;
  if (!c || typeof c !== 'object' || c.format !== CONVERSATION_FORMAT) {
    throw new StateFileError(source, `not an rwkv-flow conversation file (format field is ${JSON.stringify(c?.format)})`);
  }
  if (c.version !== 1 && c.version !== CONVERSATION_VERSION) throw new StateFileError(source, `unsupported conversation file version ${c.version}`);
  if (c.version === 1) c.stateRows = 0;
  const want = modelSignature(info);
  const got = c.model ?? ({} as ModelSignature);
  for (const key of Object.keys(want) as (keyof ModelSignature)[]) {
    if (got[key] !== want[key]) {
      throw new StateFileError(source, `saved for another model: ${key} ${JSON.stringify(got[key])}, loaded model has ${JSON.stringify(want[key])}`);
    }
  }
  // The row count is checked against the model and its context limit before the state's length is judged by it.
  const rows = c.stateRows;
  if (typeof rows !== 'number' || !Number.isInteger(rows) || rows < 0 || rows > maxRows(shape)) {
    const limit = maxRows(shape) ? `an integer in [0, ${maxRows(shape)}] (the context limit)` : '0 (this model\'s state does not grow)';
    throw new StateFileError(source, `stateRows must be ${limit}, got ${JSON.stringify(rows)}`);
  }
  const floats = snapshotFloats(shape, rows);
  if (!(c.state instanceof Float32Array) || c.state.length !== floats) {
    throw new StateFileError(source, `state must be ${floats} f32 values${rows ? ` (${shape.stateSize} + ${rows} cached tokens × ${shape.stateRowFloats})` : ''}`);
  }
  if (!(c.logits instanceof Float32Array) || c.logits.length !== info.vocabSize) {
    throw new StateFileError(source, `logits must be ${info.vocabSize} f32 values`);
  }
  if (!(c.tokens instanceof Int32Array)) throw new StateFileError(source, 'tokens must be an Int32Array');
  if (!(await allFinite(c.state))) throw new StateFileError(source, 'state holds non-finite values');
  // A generation with an empty prompt samples from these logits as they are.
  if (!(await allFinite(c.logits))) throw new StateFileError(source, 'logits hold non-finite values');
  return c as ConversationFile;
}
