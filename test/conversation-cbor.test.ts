// The conversation file's own CBOR reader (engine/conversation-cbor.ts) reads what cbor-x writes exactly as cbor-x
// reads it, and names what it cannot read: truncated bytes, indefinite lengths, tags other than the typed arrays,
// nesting past its bound, trailing bytes.

import { strict as assert } from 'assert';
import { decodeConversationCbor } from '../engine/conversation-cbor';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { decode, encode } = require('cbor-x') as { decode(b: Uint8Array): unknown; encode(v: unknown): Uint8Array };

describe('conversation CBOR reader', () => {
  it('reads what cbor-x writes as cbor-x reads it (integers, floats, strings, nested maps, arrays, typed arrays)', async () => {
    const value = {
      format: 'rwkv-flow.conversation',
      version: 2,
      savedAt: new Date(0).toISOString(),
      stateRows: 70000,
      model: { version: 'v7b', nLayer: 2, big: 2 ** 40, neg: -5, negBig: -(2 ** 33), half: 0.5, third: 1 / 3, flags: [true, false, null] },
      initialState: 'ünïcode ✓',
      tokens: Int32Array.from([0, -1, 2 ** 31 - 1, -(2 ** 31)]),
      state: Float32Array.from([1.5, -0, Infinity, NaN, 3e-40]),
      logits: new Float32Array(0),
    };
    const bytes = encode(value);
    const mine = (await decodeConversationCbor(bytes)) as Record<string, unknown>;
    const theirs = decode(bytes) as Record<string, unknown>;
    assert.deepEqual({ ...mine, model: { ...(mine.model as object) } }, theirs);
    assert.ok(mine.state instanceof Float32Array && mine.tokens instanceof Int32Array);
    // Every alignment of the typed arrays' bytes within the file.
    for (const pad of ['', 'a', 'ab', 'abc']) {
      const shifted = (await decodeConversationCbor(encode({ pad, state: value.state }))) as { state: Float32Array };
      assert.deepEqual(shifted.state, value.state);
    }
  });

  it('names what it cannot read', async () => {
    const bytes = encode({ state: new Float32Array(4) });
    await assert.rejects(decodeConversationCbor(bytes.subarray(0, bytes.length - 3)), /truncated at byte/);
    await assert.rejects(decodeConversationCbor(Uint8Array.from([0xbf, 0xff])), /indefinite or reserved length/);
    await assert.rejects(decodeConversationCbor(Uint8Array.from([0xc1, 0x00])), /unsupported tag 1/);
    await assert.rejects(decodeConversationCbor(Uint8Array.from([0xd8, 85, 0x43, 1, 2, 3])), /tag 85 must hold a byte string of whole 4-byte values/);
    await assert.rejects(decodeConversationCbor(Uint8Array.from([0xa1, 0x01, 0x02])), /map key that is not a text string/);
    await assert.rejects(decodeConversationCbor(Uint8Array.from(new Array(20).fill(0x81).concat([0]))), /nested deeper than 8/);
    await assert.rejects(decodeConversationCbor(Uint8Array.from([0x01, 0x02])), /1 bytes after the value/);
    await assert.rejects(decodeConversationCbor(Uint8Array.from([0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff])), /too large/);
    await assert.rejects(decodeConversationCbor(Uint8Array.from([0x62, 0xff, 0xfe])), /TypeError|invalid|encoded/i);
  });
});
