// Crafted model files (bench/crafted-models.ts) must be refused with a clear, short error, quickly and with
// bounded memory. Each refusal runs in a child process (bench/safety-loader.ts) through the engine's load
// path, so a loader that hangs or balloons is killed — by a timeout or an RSS ceiling — and reported as a
// failure instead of taking the test run down. The smaller checks below run in-process.

import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as zlib from 'zlib';
import { buildZip, CRAFTED_MODELS, pk, rawSafetensors } from '../bench/crafted-models';
import { refuseInChild } from '../bench/safety-loader';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { preview } from '../engine/loader/limits';
import { unpickle, type PickleLimits } from '../engine/loader/pickle';
import { describeModel } from '../engine/model-spec';
import type { TensorInfo } from '../engine/loader/checkpoint-reader';

/** Peak RSS a refusal may add over the child's baseline. */
const MAX_RSS_GROWTH_MIB = 300;
/** Generous bounds (refusals take well under a second); the child is killed past the timeout. */
const CHILD_TIMEOUT_MS = 30_000;
const MAX_REFUSAL_MS = 10_000;
const MAX_MESSAGE_CHARS = 400;

describe('loader: hostile model files', function () {
  this.timeout(120_000);
  let tmp: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'rwkv-hostile-'));
  });
  after(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
  });
  const tmpFile = (name: string, data: Uint8Array) => {
    const p = path.join(tmp, name);
    fs.writeFileSync(p, data);
    return p;
  };

  describe('each crafted class is refused clearly, quickly, in bounded memory (child process)', () => {
    for (const crafted of CRAFTED_MODELS) {
      it(`${crafted.name}: ${crafted.what}`, async () => {
        const file = crafted.write(tmp);
        try {
          const r = await refuseInChild(file, { timeoutMs: CHILD_TIMEOUT_MS, rssLimitMiB: 1024 });
          assert.strictEqual(r.killed, undefined, `child killed (${r.killed}) after ${r.ms} ms at ${r.peakRssMiB} MiB`);
          assert.notStrictEqual(r.error, null, 'the file was accepted');
          const error = r.error!;
          assert.ok(error.length <= MAX_MESSAGE_CHARS, `message of ${error.length} characters: ${error.slice(0, 200)}…`);
          assert.match(error, crafted.expect);
          const maxGrowth = crafted.maxRssGrowthMiB ?? MAX_RSS_GROWTH_MIB;
          assert.ok(r.peakRssMiB - r.baselineRssMiB <= maxGrowth, `peak RSS ${r.peakRssMiB} MiB, baseline ${r.baselineRssMiB} MiB (bound: +${maxGrowth})`);
          assert.ok(r.ms <= MAX_REFUSAL_MS, `refused after ${r.ms} ms`);
        } finally {
          fs.rmSync(file, { force: true });
        }
      });
    }
  });

  describe('ZIP structure', () => {
    const state = pk.stateDict([['t', pk.tensor('FloatStorage', '0', 2, 0, [2], [1])]]);
    const storage = new Uint8Array(new Float32Array([1.5, -2]).buffer);

    it('a small deflated data.pkl still loads (re-zipped archives), inflated no further than declared', () => {
      const deflated = zlib.deflateRawSync(state);
      const ok = tmpFile('deflated-pkl.pth', buildZip([
        { name: 'm/data.pkl', data: deflated, method: 8, size: state.length, crc: zlib.crc32(state) },
        { name: 'm/data/0', data: storage },
      ]));
      assert.deepStrictEqual([...new Float32Array(loadCheckpoint(ok).tensors.get('t')!.bytes.slice().buffer)], [1.5, -2]);
      // The same stream declared 10 bytes long: inflation stops there instead of running to its end.
      const short = tmpFile('deflated-short.pth', buildZip([
        { name: 'm/data.pkl', data: deflated, method: 8, size: 10 },
        { name: 'm/data/0', data: storage },
      ]));
      assert.throws(() => loadCheckpoint(short), /entry m\/data\.pkl does not inflate \(more than the declared 10 bytes\)/);
    });

    it('local headers must agree with the central directory', () => {
      const zip = buildZip([{ name: 'm/data.pkl', data: state }, { name: 'm/data/0', data: storage }]);
      const renamed = Buffer.from(zip);
      const at = renamed.indexOf('m/data/0'); // the local header's copy of the name comes first
      renamed.write('m/data/9', at);
      assert.throws(() => loadCheckpoint(tmpFile('renamed.pth', renamed)), /local header of m\/data\/0 disagrees with the central directory \(name m\/data\/9\)/);
      const resized = Buffer.from(zip);
      const local = resized.lastIndexOf(Buffer.from([0x50, 0x4b, 0x03, 0x04])); // m/data/0's local header
      resized.writeUInt32LE(4, local + 22);
      assert.throws(() => loadCheckpoint(tmpFile('resized.pth', resized)), /local header of m\/data\/0 disagrees with the central directory \(size 4 vs 8\)/);
    });

    it('duplicate entry names are refused', () => {
      const f = tmpFile('dup.pth', buildZip([{ name: 'm/data.pkl', data: state }, { name: 'm/data/0', data: storage }, { name: 'm/data/0', data: storage }]));
      assert.throws(() => loadCheckpoint(f), /entry m\/data\/0 appears twice/);
    });
  });

  describe('pickle limits', () => {
    const hooks = { findClass: () => undefined, persistentLoad: () => null };
    const small: PickleLimits = { maxBytes: 1000, maxValues: 50, maxElements: 40, maxMemo: 5, maxDepth: 4 };
    const run = (...ops: Buffer[]) => () => unpickle(Buffer.concat([Buffer.from([0x80, 0x02]), ...ops, Buffer.from([0x2e])]), hooks, small);

    it('size, values, elements, memo and depth are bounded', () => {
      assert.throws(() => unpickle(Buffer.alloc(1001, 0x4e), hooks, small), /stream of 1001 bytes is larger than the 1000 allowed/);
      assert.throws(run(Buffer.alloc(60, 0x4e)), /more than 50 values/);
      // 10 lists of 5 items each: 50 elements, built from fewer than 50 pushes by reusing one memoized value.
      const fives = Buffer.concat([pk.op(0x4e), pk.put(0), pk.op(0x30), ...new Array(10).fill(Buffer.concat([pk.op(0x28), ...new Array(5).fill(pk.get(0)), pk.op(0x6c, 0x30)]))]);
      assert.doesNotThrow(run(Buffer.concat([pk.op(0x4e), pk.put(0), pk.op(0x30, 0x28), ...new Array(4).fill(pk.get(0)), pk.op(0x6c)])));
      assert.throws(() => unpickle(Buffer.concat([Buffer.from([0x80, 0x02]), fives, Buffer.from([0x4e, 0x2e])]), hooks, { ...small, maxValues: 1000 }), /more than 40 container items/);
      assert.throws(run(...[0, 1, 2, 3, 4, 5].map((i) => Buffer.concat([pk.op(0x4e), pk.put(i), pk.op(0x30)])), pk.op(0x4e)), /more than 5 memo entries/);
      assert.throws(run(Buffer.alloc(5, 0x5d), Buffer.alloc(4, 0x61)), /containers nested more than 4 levels deep/);
      assert.doesNotThrow(run(Buffer.alloc(4, 0x5d), Buffer.alloc(3, 0x61)));
    });

    it('integers longer than 8 bytes are refused before decoding', () => {
      assert.strictEqual(unpickle(Buffer.concat([Buffer.from([0x80, 0x02]), pk.long(2n ** 52n), Buffer.from([0x2e])]), hooks), 2 ** 52);
      assert.throws(run(Buffer.from([0x8a, 9, 1, 0, 0, 0, 0, 0, 0, 0, 0])), /integer of 9 bytes is too large/);
    });

    it('messages stay short whatever the file holds', () => {
      const longName = 'x'.repeat(100_000);
      assert.throws(
        () => unpickle(Buffer.concat([Buffer.from([0x80, 0x02]), pk.global('os', longName), Buffer.from([0x2e])]), hooks),
        (e: Error) => /unsupported global os\.x+… \(100000 characters\)/.test(e.message) && e.message.length < 400,
      );
      // A list holding itself, and 30 levels of a list of two references to the level below (2^30 leaves).
      const cyclic: unknown[] = [];
      cyclic.push(cyclic, cyclic);
      let shared: unknown[] = [];
      for (let i = 0; i < 30; i++) shared = [shared, shared];
      for (const v of [cyclic, shared, new Map([[1, shared]])]) assert.ok(preview(v).length <= 140, preview(v));
      assert.strictEqual(preview([1, 'a', [2, 3]]), '[1, "a", [2, 3]]');
    });
  });

  describe('model spec: layer indices', () => {
    const index = (names: string[]) => ({
      tensors: new Map<string, TensorInfo>(names.map((n) => [n, { name: n, dtype: 'f32', shape: [1] }])),
    });

    it('a tensor of a layer past a gap, or with a leading zero, is refused by name', () => {
      assert.throws(
        () => describeModel(index(['emb.weight', 'blocks.0.att.w0', 'blocks.1.att.w0', 'blocks.3.att.w0']) as never),
        /^Error: tensor blocks\.3\.att\.w0: layer index 3 is not a layer of the model \(the model's layers are blocks\.0 … blocks\.1\)$/,
      );
      assert.throws(() => describeModel(index(['emb.weight', 'blocks.0.att.w0', 'blocks.1.att.w0', 'blocks.01.att.w0']) as never), /tensor blocks\.01\.att\.w0: layer index 01/);
      assert.throws(() => describeModel(index(['emb.weight', 'blocks.5.att.w0']) as never), /layer index 5 is not a layer of the model \(the checkpoint has no blocks\.0 tensors\)/);
    });

    it('safetensors: an empty tensor with huge other dimensions is still accepted', () => {
      const f = tmpFile('overflow.st', rawSafetensors({ t: { dtype: 'F16', shape: [2 ** 27, 2 ** 27, 0], data_offsets: [0, 0] } }));
      assert.strictEqual(loadCheckpoint(f).tensors.get('t')!.bytes.length, 0); // an empty tensor is fine
    });
  });
});
