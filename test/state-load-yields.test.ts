// Loading or reading a large RWKV-7b state yields to the event loop (house rule: no synchronous stretch grows with
// the context). A conversation file, a state read back from the GPU and a state written to it are each worked on at
// most YIELD_FLOATS floats at a time, so a state of F floats gives the event loop at least F / YIELD_FLOATS turns:
// a bound from the piece size, not from how fast this machine is. Before, each ran in one synchronous stretch.

import { strict as assert } from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { acquireGpu, releaseGpu, type GpuContext } from '../engine/gpu/device';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { describeModel } from '../engine/model-spec';
import { encodeConversation, modelSignature } from '../engine/conversation-file';
import { readStateSource } from '../engine/state-file';
import { StateFolder } from '../engine/state-folder';
import { deaRowFloats } from '../engine/rwkv7/dea-sizes';
import { stateFloats } from '../engine/state-layout';
import { YIELD_FLOATS } from '../engine/yield-chunks';
import { turnsDuring } from './event-loop-turns';

const CK = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 128, vocabSize: 300, variant: 'v7b', dtype: 'f32', seed: 11 });
const INFO = describeModel(CK);
/** Many rows: 16,384 tokens of 2 · (256 + 128) floats, 48 MiB of rows. */
const ROWS = 16384;

/** A random 7b state of `rows` cached rows (finite values; `poisonLast` makes its last value NaN). */
function randomState(stateSize: number, rows: number, rowFloats: number, poisonLast = false): Float32Array {
  const s = new Float32Array(stateSize + rows * rowFloats);
  let x = 12345;
  for (let i = 0; i < s.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    s[i] = (x / 2 ** 32 - 0.5) * 2;
  }
  if (poisonLast) s[s.length - 1] = NaN;
  return s;
}

describe('loading a large RWKV-7b state yields to the event loop', function () {
  this.timeout(600_000);
  const shape = { stateSize: stateFloats(INFO), stateRowFloats: deaRowFloats(INFO), maxStateRows: ROWS };
  const floats = shape.stateSize + ROWS * shape.stateRowFloats;
  let dir: string;
  before(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'state-yields-'))));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  const conversation = (state: Float32Array) =>
    encodeConversation({
      model: modelSignature(INFO),
      initialState: '',
      tokens: Int32Array.from({ length: ROWS }, (_, i) => i % 300),
      state,
      stateRows: ROWS,
      logits: new Float32Array(INFO.vocabSize),
    });

  it(`a conversation file of ${ROWS} rows: a turn at least every ${YIELD_FLOATS} floats checked; a NaN in the last row still refused`, async () => {
    const state = randomState(shape.stateSize, ROWS, shape.stateRowFloats);
    const bytes = conversation(state);
    const folder = new StateFolder(dir);
    const { turns, result } = await turnsDuring(() => readStateSource(bytes, folder, INFO, shape));
    assert.equal(result.state.length, floats);
    assert.equal(result.state[floats - 1], state[floats - 1]);
    const pieces = Math.floor(floats / YIELD_FLOATS);
    console.log(`      ${floats} floats: ${turns} turns (${pieces} pieces)`);
    assert.ok(turns >= pieces, `${turns} event-loop turns while ${floats} floats were decoded and checked`);
    await assert.rejects(readStateSource(conversation(randomState(shape.stateSize, ROWS, shape.stateRowFloats, true)), folder, INFO, shape), /state holds non-finite values/);
  });

  it('a conversation file whose state does not sit at a multiple of 4 bytes: copied out of the file a piece at a time too', async () => {
    const state = randomState(shape.stateSize, ROWS, shape.stateRowFloats);
    // Names of 1 to 4 characters move the state's bytes through every alignment; one of them is misaligned.
    let checked = 0;
    for (const initialState of ['a', 'ab', 'abc', 'abcd']) {
      const bytes = encodeConversation({
        model: modelSignature(INFO),
        initialState,
        tokens: Int32Array.from({ length: ROWS }, (_, i) => i % 300),
        state,
        stateRows: ROWS,
        logits: new Float32Array(INFO.vocabSize),
      });
      const { turns, result } = await turnsDuring(() => readStateSource(bytes, new StateFolder(dir), INFO, shape));
      assert.deepEqual(result.state.subarray(floats - 1000), state.subarray(floats - 1000));
      // Every float is handled twice, each time a piece at a time: copied out of the file, then checked.
      const pieces = Math.floor(floats / YIELD_FLOATS);
      assert.ok(turns >= 2 * pieces, `initial state name ${JSON.stringify(initialState)}: ${turns} event-loop turns for ${floats} floats`);
      checked++;
    }
    assert.equal(checked, 4);
  });

  describe('[cpu] reading and writing a slot of many rows', () => {
    let be: Backend;
    before(async () => {
      be = await createBackend({ model: CK, slots: 2, precision: 'f32', device: 'cpu', maxContext: ROWS });
    });
    after(() => be?.dispose());

    it('the event loop copies no more than a piece at a time: the write copies in pieces, the compute thread builds the read', async () => {
      const state = randomState(shape.stateSize, ROWS, shape.stateRowFloats);
      // Every typed-array copy on this thread while the state goes in and comes back, by its length.
      const proto = Object.getPrototypeOf(Float32Array.prototype) as { set: (...a: unknown[]) => void; slice: (...a: unknown[]) => ArrayLike<number> };
      const { set, slice } = proto;
      let largest = 0;
      proto.set = function (this: unknown, ...args: unknown[]) {
        largest = Math.max(largest, (args[0] as ArrayLike<number>).length);
        return set.apply(this, args);
      };
      proto.slice = function (this: unknown, ...args: unknown[]) {
        const out = slice.apply(this, args);
        largest = Math.max(largest, out.length);
        return out;
      };
      let read: Float32Array;
      try {
        be.writeState(1, state);
        read = await be.readState(1);
      } finally {
        proto.set = set;
        proto.slice = slice;
      }
      assert.deepEqual(read, state);
      assert.ok(largest <= Math.max(YIELD_FLOATS, shape.stateSize), `the event loop copied ${largest} floats at once (rows: ${ROWS * shape.stateRowFloats})`);
    });
  });

  describe('[gpu] reading and writing a slot of many rows', () => {
    let gpu: GpuContext;
    let be: Backend;
    /** Turns counted while a test runs (a setImmediate chain). */
    let turn = 0;
    let counting = false;
    const tick = () => {
      if (!counting) return;
      turn++;
      setImmediate(tick);
    };
    /** Bytes handed to the GPU queue, and the turns in which rows were (writeBuffer into a layer's row buffer). */
    let written = 0;
    const rowWriteTurns = new Set<number>();
    /** The turn in which the rows' read-back buffer was mapped (readState then reorders them). */
    let mappedAt = -1;
    let restore: () => void;
    before(async () => {
      gpu = await acquireGpu();
      be = await createBackend({ model: CK, slots: 2, precision: 'f32', device: 'gpu', gpu, maxContext: ROWS });
      const device = gpu.device;
      const queue = device.queue;
      const writeBuffer = queue.writeBuffer.bind(queue);
      queue.writeBuffer = ((buffer: GPUBuffer, offset: number, data: BufferSource | SharedArrayBuffer, dataOffset?: number, size?: number) => {
        // Sizes count elements of a typed array, bytes of an ArrayBuffer (WebGPU writeBuffer).
        const perElement = ArrayBuffer.isView(data) ? ((data as unknown as { BYTES_PER_ELEMENT?: number }).BYTES_PER_ELEMENT ?? 1) : 1;
        const elements = ArrayBuffer.isView(data) ? data.byteLength / perElement : (data as ArrayBuffer).byteLength;
        written += (size ?? elements - (dataOffset ?? 0)) * perElement;
        if (buffer.label.startsWith('deaRows')) rowWriteTurns.add(turn);
        return writeBuffer(buffer, offset, data as BufferSource, dataOffset, size);
      }) as typeof queue.writeBuffer;
      const createBuffer = device.createBuffer.bind(device);
      device.createBuffer = ((desc: GPUBufferDescriptor) => {
        const b = createBuffer(desc);
        if (desc.label === 'state staging (rows)') {
          const mapAsync = b.mapAsync.bind(b);
          b.mapAsync = async (...args: Parameters<GPUBuffer['mapAsync']>) => {
            await mapAsync(...args);
            mappedAt = turn;
          };
        }
        return b;
      }) as typeof device.createBuffer;
      restore = () => {
        queue.writeBuffer = writeBuffer as typeof queue.writeBuffer;
        device.createBuffer = createBuffer as typeof device.createBuffer;
      };
    });
    after(() => {
      restore?.();
      be?.dispose();
      if (gpu) releaseGpu(gpu);
    });

    it('a fixedOnly read (mean pooling takes one after every token) reads the fixed part alone, no rows', async () => {
      be.resetState(0);
      await be.run([{ slot: 0, tokens: [1, 2, 3, 4, 5, 6], output: 'none' }]);
      const full = await be.readState(0);
      const fixed = await be.readState(0, { fixedOnly: true });
      assert.equal(full.length, shape.stateSize + 6 * shape.stateRowFloats);
      assert.equal(fixed.length, shape.stateSize);
      assert.deepEqual(fixed, full.subarray(0, shape.stateSize));
    });

    it('writeState uploads its rows after it returns, in a turn for each piece; readState reorders them in a turn for each piece', async () => {
      const state = randomState(shape.stateSize, ROWS, shape.stateRowFloats);
      const rowBytes = ROWS * shape.stateRowFloats * 4;
      const pieces = Math.floor((ROWS * shape.stateRowFloats) / YIELD_FLOATS);
      turn = 0;
      counting = true;
      setImmediate(tick);
      try {
        written = 0;
        be.writeState(1, state);
        assert.ok(written < rowBytes / 8, `${written} bytes uploaded before writeState returned (rows: ${rowBytes})`);
        const read = await be.readState(1);
        const doneAt = turn;
        console.log(`      ${ROWS} rows: written in ${rowWriteTurns.size} turns, reordered over ${doneAt - mappedAt} turns (${pieces} pieces)`);
        assert.ok(written >= rowBytes, `${written} bytes uploaded in all`);
        assert.deepEqual(read, state);
        assert.ok(rowWriteTurns.size >= pieces, `rows written in ${rowWriteTurns.size} event-loop turns`);
        assert.ok(mappedAt >= 0 && doneAt - mappedAt >= pieces, `${doneAt - mappedAt} event-loop turns between the rows' read-back and the snapshot`);
      } finally {
        counting = false;
      }
    });
  });
});
