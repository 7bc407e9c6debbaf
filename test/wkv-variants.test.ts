// The WKV-7 kernel variants (engine/rwkv7/wkv.ts): which one runs where, each against the reference kernel on
// random inputs of several job mixes, and each forced on the whole engine against the golden reference
// (../shared/golden v7-tiny): logits of a sequence at once, token by token and in a mixed batch, final state.

import { strict as assert } from 'assert';
import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { acquireGpu, releaseGpu, type GpuContext } from '../engine/gpu/device';
import { readSafetensors } from '../engine/loader/safetensors';
import { toF32, toI32 } from '../engine/loader/dtype';
import type { Rwkv7Runtime } from '../engine/rwkv7/runtime';
import { stateLayout } from '../engine/state-layout';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import {
  chooseWkv,
  wkvPrefillFromEnv,
  describeWkv,
  parseWkvVariant,
  wkvDevice,
  wkvUnsupported,
  wkvVariantName,
  wkvVariants,
  WKV_PREFILL_TOKENS,
  wkvMaxChunks,
  wkvScratchFloats,
  type WkvDevice,
  type WkvVariant,
} from '../engine/rwkv7/wkv';
import { WkvHarness, maxAbsDiff } from '../bench/wkv-harness';
import { requireGolden } from './golden-required';
import { worstRelL2 } from './metrics';
import { GOLDEN } from './paths';

const NAMES = wkvVariants().map(wkvVariantName);
/** A GPU like the H200: 32-lane subgroups, 48 KB of workgroup memory, 1024 invocations. */
const GPU32: WkvDevice = { headSize: 64, subgroupMinSize: 32, maxWorkgroupStorage: 49152, maxInvocations: 1024, cpuDriver: false };

describe('WKV kernel variants: the choice', () => {
  it('names round-trip, and an unknown name is refused naming the forms', () => {
    for (const n of NAMES) assert.equal(wkvVariantName(parseWkvVariant(n)), n);
    assert.throws(() => parseWkvVariant('split16'), /unknown WKV kernel variant 'split16'.*row-staged/);
  });

  it('says why a device or head size cannot run a variant', () => {
    const v = parseWkvVariant('split16x4-subgroup');
    assert.equal(wkvUnsupported(v, GPU32), null);
    assert.match(wkvUnsupported(v, { ...GPU32, subgroupMinSize: 8 })!, /subgroups may be 8 lanes, fewer than 16/);
    assert.match(wkvUnsupported(v, { ...GPU32, subgroupMinSize: 0 })!, /no subgroups/);
    assert.match(wkvUnsupported(v, { ...GPU32, headSize: 48 })!, /head size 48 is not a multiple of 4 × 16 lanes/);
    assert.equal(wkvUnsupported(parseWkvVariant('split4x16-shared'), { ...GPU32, headSize: 48 }), null);
    assert.match(wkvUnsupported(parseWkvVariant('split4x16-shared'), { ...GPU32, maxWorkgroupStorage: 256 })!, /512 bytes of workgroup memory/);
    assert.match(wkvUnsupported({ kind: 'row-staged' }, { ...GPU32, headSize: 63 })!, /odd/);
    assert.match(wkvUnsupported({ kind: 'row' }, { ...GPU32, headSize: 2048 })!, /1024 invocations/);
  });

  it('a GPU runs split rows, chosen by the longest job; CPU drivers and odd heads fall back', () => {
    const name = (tokens: number, d: WkvDevice) => wkvVariantName(chooseWkv(tokens, d));
    assert.equal(name(1, GPU32), 'split4x16-subgroup');
    assert.equal(name(WKV_PREFILL_TOKENS - 1, GPU32), 'split4x16-subgroup');
    assert.equal(name(WKV_PREFILL_TOKENS, GPU32), 'split8x8-shared');
    assert.equal(name(1, { ...GPU32, subgroupMinSize: 0 }), 'split4x16-shared');
    assert.equal(name(1, { ...GPU32, subgroupMinSize: 8 }), 'split4x16-subgroup');
    assert.equal(name(512, { ...GPU32, headSize: 16 }), 'split4x16-shared');
    assert.equal(name(1, { ...GPU32, headSize: 6 }), 'row-staged');
    assert.equal(name(512, { ...GPU32, headSize: 6 }), 'row');
    assert.equal(name(512, { ...GPU32, cpuDriver: true }), 'row');
    assert.equal(describeWkv(GPU32, null), `WKV split4x16-subgroup, split8x8-shared from ${WKV_PREFILL_TOKENS} tokens a job`);
    assert.equal(describeWkv({ ...GPU32, cpuDriver: true }, null), 'WKV row');
    // RWKV_WKV_PREFILL's names go first for prefill only, where the device runs them.
    const ab = { ...GPU32, prefillFirst: wkvPrefillFromEnv({ RWKV_WKV_PREFILL: 'split16x16-shared, split16x4-shared' }) };
    assert.equal(name(512, ab), 'split16x16-shared');
    assert.equal(name(1, ab), 'split4x16-subgroup');
    assert.equal(name(512, { ...ab, maxWorkgroupStorage: 1024 }), 'split16x4-shared');
    assert.throws(() => wkvPrefillFromEnv({ RWKV_WKV_PREFILL: 'split8x8' }), /unknown WKV kernel variant 'split8x8'/);
    assert.deepEqual(wkvPrefillFromEnv({}), []);
    for (const tokens of [1, 512]) for (const headSize of [6, 16, 32, 48, 64, 128]) {
      const d = { ...GPU32, headSize };
      assert.equal(wkvUnsupported(chooseWkv(tokens, d), d), null, `${tokens} tokens, head size ${headSize}`);
    }
  });
});

describe('WKV kernel variants: the chunked one', () => {
  it('is named by its chunk length and scan rows; other lengths are refused', () => {
    assert.deepEqual(parseWkvVariant('chunk16x16'), { kind: 'chunk', tc: 16, rows: 16 });
    assert.deepEqual(parseWkvVariant('chunk32x4'), { kind: 'chunk', tc: 32, rows: 4 });
    assert.throws(() => parseWkvVariant('chunk24x4'), /unknown WKV kernel variant 'chunk24x4'.*chunkTCxR/);
  });

  it('says why a device cannot run it', () => {
    assert.equal(wkvUnsupported(parseWkvVariant('chunk16x16'), GPU32), null);
    assert.match(wkvUnsupported(parseWkvVariant('chunk16x16'), { ...GPU32, maxInvocations: 256 })!, /1024 invocations exceed the device's 256/);
    assert.match(wkvUnsupported(parseWkvVariant('chunk16x4'), { ...GPU32, headSize: 6 })!, /head size 6 is not a multiple of 4/);
    assert.match(wkvUnsupported(parseWkvVariant('chunk16x3'), GPU32)!, /rows \(3\) must be a power of two dividing the head size 64/);
    assert.match(wkvUnsupported(parseWkvVariant('chunk32x16'), { ...GPU32, maxWorkgroupStorage: 4096 })!, /bytes of workgroup memory, the device has 4096/);
  });

  it('bounds its chunks and scratch by the sub-pass: a partial chunk per job, never more chunks than tokens', () => {
    assert.equal(wkvMaxChunks(16, 512, 1), 33);
    assert.equal(wkvMaxChunks(16, 10, 8), 9);
    assert.equal(wkvMaxChunks(16, 5, 8), 5);
    assert.equal(wkvMaxChunks(32, 100, 3), 7);
    // G [64][64], E and F [16][64], L [16][16] per chunk and head.
    assert.equal(wkvScratchFloats(parseWkvVariant('chunk16x16'), 32, 64, 512, 16), (32 + 16) * 32 * (4096 + 2048 + 256));
    assert.equal(wkvScratchFloats(parseWkvVariant('split8x8-shared'), 32, 64, 512, 16), 0);
  });

  it('runs for prefill only where RWKV_WKV_PREFILL names it (not a default yet)', () => {
    const ab = { ...GPU32, prefillFirst: wkvPrefillFromEnv({ RWKV_WKV_PREFILL: 'chunk16x16' }) };
    assert.equal(wkvVariantName(chooseWkv(512, ab)), 'chunk16x16');
    assert.equal(wkvVariantName(chooseWkv(1, ab)), 'split4x16-subgroup');
    assert.equal(wkvVariantName(chooseWkv(512, GPU32)), 'split8x8-shared');
    assert.equal(wkvVariantName(chooseWkv(512, { ...ab, maxInvocations: 256 })), 'split8x8-shared');
  });
});

describe('WKV kernel variants on this device', function () {
  this.timeout(1_800_000);
  let gpu: GpuContext;
  before(async () => {
    gpu = await acquireGpu();
  });
  after(() => gpu && releaseGpu(gpu));

  /** Runs where the device can, else skips saying why. */
  const supported = (ctx: Mocha.Context, v: WkvVariant, headSize: number) => {
    const why = wkvUnsupported(v, wkvDevice(gpu, headSize));
    if (why) {
      console.log(`      (skipped: ${why})`);
      ctx.skip();
    }
  };

  describe('against the reference kernel on random inputs', () => {
    // Job mixes: decode beside prefill chunks, lengths around the row variants' prefetch and the choice's threshold.
    const problems = [
      { heads: 3, headSize: 64, batches: [[1, 17, 40, 2], [1, 1, 1], [64]] },
      { heads: 2, headSize: 32, batches: [[5, 1, 33]] },
    ];
    const refs = new Map<string, { y: Float32Array; state: Float32Array }>();
    const harnesses = new Map<number, WkvHarness>();
    const harness = (i: number) => {
      const p = problems[i];
      if (!harnesses.has(i)) {
        const tokens = Math.max(...p.batches.map((b) => b.reduce((x, y) => x + y, 0)));
        harnesses.set(i, new WkvHarness(gpu, { heads: p.heads, headSize: p.headSize, tokens, slots: 4, seed: 11 + i }));
      }
      return harnesses.get(i)!;
    };
    after(() => harnesses.forEach((h) => h.dispose()));

    for (const name of NAMES.filter((n) => n !== 'row')) {
      it(`${name} gives the reference's outputs and states`, async function () {
        const v = parseWkvVariant(name);
        let ran = 0;
        for (const [i, p] of problems.entries()) {
          if (wkvUnsupported(v, wkvDevice(gpu, p.headSize))) continue;
          for (const jobs of p.batches) {
            const h = harness(i).use(jobs);
            const key = `${i}:${jobs}`;
            if (!refs.has(key)) refs.set(key, await h.run({ kind: 'row' }));
            const ref = refs.get(key)!;
            const got = await h.run(v);
            const scale = Math.max(...ref.y.map(Math.abs));
            assert.ok(scale > 0.1, 'the reference outputs are not all near zero');
            const dy = maxAbsDiff(got.y, ref.y);
            const ds = maxAbsDiff(got.state, ref.state);
            // Only the order of the sums differs from the reference (the chunked variant: also how they are grouped).
            assert.ok(dy <= 1e-5 * scale, `head size ${p.headSize}, jobs [${jobs}]: max |Δy| ${dy} (outputs up to ${scale})`);
            assert.ok(ds <= 1e-5, `head size ${p.headSize}, jobs [${jobs}]: max |Δstate| ${ds}`);
            ran++;
          }
        }
        if (!ran) supported(this, v, 64);
      });
    }
  });

  it('a chunked variant whose chunks would not fit its scratch gives way to the split kernels for that sub-pass', async function () {
    const model = randomRwkv7Checkpoint({ nLayer: 1, nEmbd: 64, headSize: 64, vocabSize: 16, seed: 5 });
    const be = await createBackend({ model, slots: 64, maxTokens: 64, maxRows: 64, precision: 'f32', gpu, device: 'gpu' });
    try {
      const rt = be as unknown as Rwkv7Runtime;
      supported(this, parseWkvVariant('chunk16x4'), 64);
      rt.wkvVariant = parseWkvVariant('chunk16x4');
      const wkvs = (T: number, J: number) => rt.dispatchLabels(T, J, J).filter((l) => l.startsWith('rwkv7_wkv')).length;
      // Room for ceil(64 / 16) + 16 = 20 chunks. A sub-pass of T tokens in J jobs may have min(T, ceil(T / 16) + J):
      // one 64-token job 5 (two passes), 64 one-token jobs 64 (one pass), 40 tokens in 16 jobs 19, in 18 jobs 21.
      assert.equal(wkvs(64, 1), 2);
      assert.deepEqual(rt.dispatchLabels(64, 1, 1).filter((l) => l.startsWith('rwkv7_wkv')), ['rwkv7_wkv_prep', 'rwkv7_wkv']);
      assert.equal(wkvs(64, 64), 1);
      assert.equal(wkvs(40, 16), 2);
      assert.equal(wkvs(40, 18), 1);
    } finally {
      be.dispose();
    }
  });

  describe('forced on the engine, against the golden reference (v7-tiny, f32 weights)', () => {
    const TOL = 1e-3;
    let be: Backend;
    let tokens: number[];
    let logits: Float32Array;
    let golden: ReturnType<typeof readSafetensors>;
    let vocab: number;
    before(async function () {
      requireGolden(this, path.join(GOLDEN, 'v7-tiny.pth'), path.join(GOLDEN, 'v7-tiny.golden.st'));
      golden = readSafetensors(path.join(GOLDEN, 'v7-tiny.golden.st'));
      tokens = Array.from(toI32(golden.tensors.get('tokens')!));
      logits = Float32Array.from(toF32(golden.tensors.get('logits')!));
      vocab = logits.length / tokens.length;
      be = await createBackend({ model: path.join(GOLDEN, 'v7-tiny.pth'), slots: 4, precision: 'f32', gpu, device: 'gpu' });
    });
    after(() => be?.dispose());

    it('refuses a variant the model cannot run, naming why', () => {
      const runtime = be as unknown as Rwkv7Runtime;
      assert.throws(() => (runtime.wkvVariant = parseWkvVariant('split32x4-subgroup')), /split32x4-subgroup cannot run here: head size 64 is not a multiple of 4 × 32 lanes/);
      assert.equal(runtime.wkvVariant, null);
    });

    for (const name of NAMES) {
      it(`${name}: a sequence at once, token by token, in a mixed batch, and the final state`, async function () {
        const v = parseWkvVariant(name);
        supported(this, v, be.info.headSize);
        const runtime = be as unknown as Rwkv7Runtime;
        runtime.wkvVariant = v;
        try {
          assert.equal(runtime.wkvPath, `WKV ${name}`);
          for (let s = 0; s < 4; s++) be.resetState(s);
          const [seq] = await be.run([{ slot: 0, tokens, output: 'all' }]);
          assert.ok(worstRelL2(seq!, logits, vocab) < TOL, `sequence at once: rel L2 ${worstRelL2(seq!, logits, vocab)}`);
          const rows = new Float32Array(logits.length);
          for (let t = 0; t < tokens.length; t++) {
            const [o] = await be.run([{ slot: 1, tokens: [tokens[t]], output: 'last' }]);
            rows.set(o!, t * vocab);
          }
          assert.ok(worstRelL2(rows, logits, vocab) < TOL, `token by token: rel L2 ${worstRelL2(rows, logits, vocab)}`);
          // One call: the whole sequence beside a one-token job and a 5-token chunk on other slots.
          const [mixed] = await be.run([
            { slot: 2, tokens, output: 'all' },
            { slot: 3, tokens: [tokens[3]], output: 'last' },
            { slot: 0, tokens: tokens.slice(0, 5), output: 'last' },
          ]);
          assert.ok(worstRelL2(mixed!, logits, vocab) < TOL, `mixed batch: rel L2 ${worstRelL2(mixed!, logits, vocab)}`);
          const state = await be.readState(2);
          for (const [l, parts] of stateLayout(be.info).entries()) {
            const { offset, length } = parts.att_kv;
            const want = Float32Array.from(toF32(golden.tensors.get(`state.${l}.att_kv`)!));
            const err = worstRelL2(state.subarray(offset, offset + length), want, length);
            assert.ok(err < TOL, `state.${l}.att_kv: rel L2 ${err}`);
          }
        } finally {
          runtime.wkvVariant = null;
        }
      });
    }
  });
});
