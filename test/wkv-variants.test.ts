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
  WKV_CHUNK_TOKENS,
  wkvMidTokens,
  wkvPrefillFromEnv,
  describeWkv,
  parseWkvVariant,
  wkvDevice,
  wkvPasses,
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
    for (const n of ['chunk16', 'chunk32', 'chunk16-subgroup', 'chunk32-subgroup']) assert.ok(NAMES.includes(n), `${n} in ${NAMES}`);
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
    assert.equal(name(WKV_CHUNK_TOKENS - 1, GPU32), 'split8x8-shared');
    assert.equal(name(WKV_CHUNK_TOKENS, GPU32), 'chunk32-subgroup');
    assert.equal(name(1, { ...GPU32, subgroupMinSize: 0 }), 'split4x16-shared');
    assert.equal(name(1, { ...GPU32, subgroupMinSize: 8 }), 'split4x16-subgroup');
    assert.equal(name(256, { ...GPU32, headSize: 16 }), 'split4x16-shared');
    assert.equal(name(512, { ...GPU32, headSize: 16, subgroupMinSize: 0 }), 'split4x16-shared');
    assert.equal(name(1, { ...GPU32, headSize: 6 }), 'row-staged');
    assert.equal(name(512, { ...GPU32, headSize: 6 }), 'row');
    assert.equal(name(512, { ...GPU32, cpuDriver: true }), 'row');
    assert.equal(describeWkv(GPU32, null), `WKV split4x16-subgroup, split8x8-shared from ${WKV_PREFILL_TOKENS} tokens a job, chunk32-subgroup from ${WKV_CHUNK_TOKENS}`);
    assert.equal(describeWkv({ ...GPU32, subgroupMinSize: 0 }, null), `WKV split4x16-shared, split8x8-shared from ${WKV_PREFILL_TOKENS} tokens a job`);
    assert.equal(describeWkv({ ...GPU32, cpuDriver: true }, null), 'WKV row');
    // RWKV_WKV_PREFILL's names go first for prefill only, where the device runs them.
    const ab = { ...GPU32, prefillFirst: wkvPrefillFromEnv({ RWKV_WKV_PREFILL: 'split16x16-shared, split16x4-shared' }) };
    assert.equal(name(512, ab), 'split16x16-shared');
    assert.equal(name(256, ab), 'split16x16-shared');
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

describe('WKV kernel variants: the chunked ones', () => {
  it('are named chunkT[-subgroup]; other forms and the replaced chunkTCxR names are refused naming the variants', () => {
    assert.deepEqual(parseWkvVariant('chunk16'), { kind: 'chunk', tokens: 16, reduce: 'shared' });
    assert.deepEqual(parseWkvVariant('chunk32-subgroup'), { kind: 'chunk', tokens: 32, reduce: 'subgroup' });
    assert.deepEqual(parseWkvVariant('chunk24-subgroup'), { kind: 'chunk', tokens: 24, reduce: 'subgroup' });
    for (const bad of ['chunk', 'chunk0', 'chunk016', 'chunk-4', 'chunk16x', 'chunk16-shared', 'chunk16-subgroups'])
      assert.throws(() => parseWkvVariant(bad), /unknown WKV kernel variant .*chunkT\[-subgroup\]\[-wg128\|-wg256\] or chunkT-lane \(chunk16, chunk32, chunk16-subgroup, chunk32-subgroup, chunk16-lane, chunk32-lane\)/, bad);
    // Wider prep workgroups: named -wgN; -wg64 is the default and names nothing.
    assert.deepEqual(parseWkvVariant('chunk32-subgroup-wg256'), { kind: 'chunk', tokens: 32, reduce: 'subgroup', invocations: 256 });
    assert.deepEqual(parseWkvVariant('chunk16-wg128'), { kind: 'chunk', tokens: 16, reduce: 'shared', invocations: 128 });
    assert.deepEqual(parseWkvVariant('chunk16-wg64'), { kind: 'chunk', tokens: 16, reduce: 'shared' });
    assert.equal(wkvVariantName(parseWkvVariant('chunk32-subgroup-wg256')), 'chunk32-subgroup-wg256');
    for (const bad of ['chunk16-wg32', 'chunk16-wg512', 'chunk16-wg256-subgroup']) assert.throws(() => parseWkvVariant(bad), /unknown WKV kernel variant/, bad);
    // One lane a virtual row: its workgroups are N + T lanes, so no -wgN, and no sum to name.
    assert.deepEqual(parseWkvVariant('chunk32-lane'), { kind: 'chunk', tokens: 32, reduce: 'lane' });
    assert.equal(wkvVariantName(parseWkvVariant('chunk16-lane')), 'chunk16-lane');
    for (const bad of ['chunk16-lane-wg256', 'chunk16-subgroup-lane', 'chunk16-lanes']) assert.throws(() => parseWkvVariant(bad), /unknown WKV kernel variant/, bad);
    for (const old of ['chunk16x4', 'chunk16x16', 'chunk32x4', 'chunk32x16'])
      assert.throws(
        () => parseWkvVariant(old),
        new RegExp(`'${old}' \\(chunkTCxR\\) was replaced by the chunkT\\[-subgroup\\] variants: chunk16, chunk32, chunk16-subgroup, chunk32-subgroup, chunk16-lane, chunk32-lane$`),
      );
    assert.throws(() => wkvPrefillFromEnv({ RWKV_WKV_PREFILL: 'chunk32x16' }), /'chunk32x16' \(chunkTCxR\) was replaced/);
  });

  it('two passes over a scratch buffer, sized by a bound on the chunks of any batch', () => {
    const c = { C: 4 * 64, N: 64, TMAX: 512, STATE: 999 };
    const passes = wkvPasses(parseWkvVariant('chunk16'), c);
    assert.deepEqual(passes.map((p) => [p.scratch, p.bindings]), [
      [true, ['uniform', 'uniform', 'read', 'rw', 'rw', 'rw']],
      [true, ['uniform', 'uniform', 'read', 'rw', 'rw', 'rw']],
    ]);
    assert.deepEqual(passes.map((p) => p.parts.at(-1)), ['rwkv7_wkv_chunk_prep', 'rwkv7_wkv_chunk_scan']);
    assert.deepEqual(wkvPasses(parseWkvVariant('chunk16-subgroup'), c)[0].parts, ['head_common', 'wkv_rowsum_subgroup', 'wkv_chunk_span', 'rwkv7_wkv_chunk_prep']);
    // prep: 80 virtual rows of 8 lanes in workgroups of 8 rows per head, and the chunks of 40 tokens in 3 jobs;
    // scan: 4 rows a workgroup, one per job.
    assert.deepEqual(passes.map((p) => p.dispatch(4, 3, 40)), [[4 * 10, wkvMaxChunks(16, 40, 3)], [64, 3]]);
    // The lane prep: one workgroup of N + T lanes a (head, chunk), its row code straight-line over N/4 registers.
    const lane = wkvPasses(parseWkvVariant('chunk16-lane'), c);
    assert.deepEqual(lane.map((p) => p.parts.at(-1)), ['rwkv7_wkv_chunk_prep_lane', 'rwkv7_wkv_chunk_scan_flat']);
    // Its scan: each of M's 80 rows times the 4 quads of rows, then reloaded from the next chunk's M.
    const sum = String(lane[1].constants.SUM_AND_LOAD);
    assert.equal(sum.match(/g\d+ = chunks\[nat/g)?.length, 80);
    assert.match(sum, /a0 = fma\(x\[316\], vec4<f32>\(g79\), a0\); a1 = fma\(x\[317\], vec4<f32>\(g79\), a1\); a2 = fma\(x\[318\], vec4<f32>\(g79\), a2\); a3 = fma\(x\[319\], vec4<f32>\(g79\), a3\); g79 = chunks\[nat \+ 6320u\];/);
    // Its scan carries 16 state rows a workgroup: 4 heads × 64 rows in 16 workgroups a job.
    assert.deepEqual(lane.map((p) => p.dispatch(4, 3, 40)), [[4, wkvMaxChunks(16, 40, 3)], [16, 3]]);
    const step = String(lane[0].constants.STEP);
    assert.equal(step.match(/s\d+ = s\d+ \*/g)?.length, 16);
    assert.match(step, /s15 = s15 \* tm\[w \+ 15u\]/);
    assert.doesNotMatch(step, /s16/);
    const split = wkvPasses(parseWkvVariant('split8x8-shared'), c);
    assert.deepEqual(split.map((p) => [p.scratch, p.bindings.length, p.dispatch(4, 3, 40)]), [[false, 5, [32, 3]]]);
    assert.equal(wkvScratchFloats(parseWkvVariant('split8x8-shared'), 4, 64, 512, 8), 0);
    assert.equal(wkvScratchFloats(parseWkvVariant('chunk16'), 4, 64, 512, 8), wkvMaxChunks(16, 512, 8) * 4 * 80 * 80);
    assert.equal(wkvScratchFloats(parseWkvVariant('chunk16-subgroup'), 32, 64, 512, 16), 47 * 32 * 80 * 80);
    // The bound holds for every way of cutting the tokens into jobs of at least one token (Σ ceil(len/T)); it is
    // the most chunks of some cut of each size tried, so the scratch is no larger than needed.
    const most = new Map<string, number>();
    const cuts = (left: number, jobs: number, T: number, chunks: number, first: number) => {
      if (left === 0) most.set(`${first},${jobs},${T}`, Math.max(most.get(`${first},${jobs},${T}`) ?? 0, chunks));
      for (let len = 1; len <= left; len++) cuts(left - len, jobs + 1, T, chunks + Math.ceil(len / T), first);
    };
    for (const T of [1, 3, 4, 16]) for (let tokens = 1; tokens <= 14; tokens++) cuts(tokens, 0, T, 0, tokens);
    for (const [key, chunks] of most) {
      const [tokens, jobs, T] = key.split(',').map(Number);
      assert.equal(wkvMaxChunks(T, tokens, jobs), chunks, `${tokens} tokens in ${jobs} jobs, chunks of ${T}`);
    }
    assert.equal(wkvMaxChunks(16, 17, 1), 2);
    assert.equal(wkvMaxChunks(16, 40, 5), 7); // 1 + 1 + 1 + 1 + 36 tokens: 4 + 3 chunks
    assert.equal(wkvMaxChunks(16, 512, 1), 32);
    assert.equal(wkvMaxChunks(16, 5, 8), 5); // never more chunks than tokens
    assert.equal(wkvMaxChunks(32, 100, 3), 6); // 1 + 1 + 98 tokens: 1 + 1 + 4 chunks
  });

  it('says why a device cannot run one', () => {
    const chunk16 = parseWkvVariant('chunk16');
    assert.equal(wkvUnsupported(chunk16, GPU32), null);
    assert.equal(wkvUnsupported(parseWkvVariant('chunk32'), { ...GPU32, headSize: 32 }), null);
    const chunkSg = parseWkvVariant('chunk16-subgroup');
    assert.equal(wkvUnsupported(chunkSg, GPU32), null);
    assert.match(wkvUnsupported(chunkSg, { ...GPU32, subgroupMinSize: 0 })!, /no subgroups/);
    // The prep's rows take 8 lanes at head size 64, 4 at head size 16: subgroups of 8 (lavapipe's) do for both,
    // subgroups of 4 for the second only.
    assert.equal(wkvUnsupported(chunkSg, { ...GPU32, subgroupMinSize: 8 }), null);
    assert.match(wkvUnsupported(chunkSg, { ...GPU32, subgroupMinSize: 4 })!, /subgroups may be 4 lanes, fewer than the prep's 8 a row/);
    assert.equal(wkvUnsupported(chunkSg, { ...GPU32, subgroupMinSize: 4, headSize: 16 }), null);
    assert.equal(wkvUnsupported(chunk16, { ...GPU32, subgroupMinSize: 0 }), null);
    assert.match(wkvUnsupported(chunk16, { ...GPU32, headSize: 6 })!, /head size 6 is not a multiple of 4/);
    assert.match(wkvUnsupported(chunk16, { ...GPU32, maxInvocations: 64 })!, /N \+ T = 80 invocations, the device has 64/);
    assert.match(wkvUnsupported(chunk16, { ...GPU32, maxWorkgroupStorage: 1024 })!, /1280 bytes of workgroup memory/);
    // The wider prep: 256 invocations, and 2 KB of row sums through workgroup memory.
    const wide = parseWkvVariant('chunk16-wg256');
    assert.equal(wkvUnsupported(wide, GPU32), null);
    assert.match(wkvUnsupported(wide, { ...GPU32, maxInvocations: 128 })!, /its prep needs 256 invocations, the device has 128/);
    assert.match(wkvUnsupported(wide, { ...GPU32, maxWorkgroupStorage: 1536 })!, /2048 bytes of workgroup memory/);
    // The lane prep: no subgroups or sums through workgroup memory, N + T lanes, outputs stored 4 tokens at a time.
    const lane = parseWkvVariant('chunk32-lane');
    assert.equal(wkvUnsupported(lane, { ...GPU32, subgroupMinSize: 0 }), null);
    assert.match(wkvUnsupported(lane, { ...GPU32, maxInvocations: 64 })!, /N \+ T = 96 invocations, the device has 64/);
    assert.match(wkvUnsupported(parseWkvVariant('chunk18-lane'), GPU32)!, /chunk length 18 is not a multiple of 4/);
    // Its scan keeps 16 rows × (N + T) floats in workgroup memory, and takes heads of a multiple of 16 rows.
    assert.equal(wkvUnsupported(parseWkvVariant('chunk16-lane'), { ...GPU32, maxWorkgroupStorage: 5120 }), null);
    assert.match(wkvUnsupported(parseWkvVariant('chunk16-lane'), { ...GPU32, maxWorkgroupStorage: 4096 })!, /5120 bytes of workgroup memory/);
    assert.match(wkvUnsupported(parseWkvVariant('chunk16-lane'), { ...GPU32, headSize: 8 })!, /head size 8 is not a multiple of 16 rows/);
    // The scratch for the runtime's largest batch: 1.5B (32 heads), 4096 tokens in 8 jobs is 263 chunks × 32 × 80² floats.
    const big = { heads: 32, tokens: 4096, jobs: 8, maxBindingBytes: 128 * 2 ** 20 };
    assert.match(wkvUnsupported(chunk16, { ...GPU32, batch: big })!, /scratch for 4096 tokens in 8 jobs of 32 heads is 215449600 bytes, more than the device binds in one buffer \(134217728\)/);
    assert.equal(wkvUnsupported(chunk16, { ...GPU32, batch: { ...big, tokens: 512 } }), null);
    assert.equal(wkvUnsupported(chunk16, { ...GPU32, batch: { ...big, maxBindingBytes: 2 ** 31 } }), null);
  });

  it('chunk16-subgroup runs from 128 tokens a job on layers of up to 16 heads, from 256 up to 32 heads, not above or where heads are unknown', () => {
    const name = (tokens: number, d: WkvDevice) => wkvVariantName(chooseWkv(tokens, d));
    assert.equal(wkvMidTokens(12), 128);
    assert.equal(wkvMidTokens(16), 128);
    assert.equal(wkvMidTokens(17), 256);
    assert.equal(wkvMidTokens(32), 256);
    assert.equal(wkvMidTokens(40), Infinity);
    assert.equal(wkvMidTokens(undefined), Infinity);
    const small = { ...GPU32, heads: 12 };
    assert.equal(name(127, small), 'split8x8-shared');
    assert.equal(name(128, small), 'chunk16-subgroup');
    assert.equal(name(WKV_CHUNK_TOKENS - 1, small), 'chunk16-subgroup');
    assert.equal(name(WKV_CHUNK_TOKENS, small), 'chunk32-subgroup');
    // The runtime's facts carry the heads in batch.
    const big = { ...GPU32, batch: { heads: 32, tokens: 512, jobs: 16, maxBindingBytes: 2 ** 30 } };
    assert.equal(name(255, big), 'split8x8-shared');
    assert.equal(name(256, big), 'chunk16-subgroup');
    assert.equal(name(WKV_CHUNK_TOKENS, big), 'chunk32-subgroup');
    assert.equal(name(300, { ...GPU32, heads: 40 }), 'split8x8-shared');
    assert.equal(name(WKV_CHUNK_TOKENS, { ...GPU32, heads: 40 }), 'chunk32-subgroup');
    // Without subgroups, or left out (the runtime's fallback), the split kernel; CPU drivers keep the first kernel.
    assert.equal(name(256, { ...small, subgroupMinSize: 0 }), 'split8x8-shared');
    assert.equal(wkvVariantName(chooseWkv(256, small, false)), 'split8x8-shared');
    assert.equal(name(256, { ...small, cpuDriver: true }), 'row');
    assert.equal(describeWkv(small, null), `WKV split4x16-subgroup, split8x8-shared from ${WKV_PREFILL_TOKENS} tokens a job, chunk16-subgroup from 128, chunk32-subgroup from ${WKV_CHUNK_TOKENS}`);
    assert.equal(describeWkv(big, null), `WKV split4x16-subgroup, split8x8-shared from ${WKV_PREFILL_TOKENS} tokens a job, chunk16-subgroup from 256, chunk32-subgroup from ${WKV_CHUNK_TOKENS}`);
  });

  it('chunk32-subgroup runs for jobs of 512 tokens and more on a GPU; the others, and shorter prefill, where RWKV_WKV_PREFILL names them', () => {
    const name = (tokens: number, d: WkvDevice) => wkvVariantName(chooseWkv(tokens, d));
    for (const tokens of [1, 15, 16, WKV_CHUNK_TOKENS - 1]) assert.doesNotMatch(name(tokens, GPU32), /chunk/);
    for (const tokens of [WKV_CHUNK_TOKENS, 4096]) assert.equal(name(tokens, GPU32), 'chunk32-subgroup');
    // Where it cannot run (no subgroups, a scratch the device cannot bind), or left out (the runtime's fallback),
    // the split kernel; CPU drivers never take it by default.
    assert.equal(name(WKV_CHUNK_TOKENS, { ...GPU32, subgroupMinSize: 0 }), 'split8x8-shared');
    assert.equal(name(WKV_CHUNK_TOKENS, { ...GPU32, batch: { heads: 32, tokens: 65536, jobs: 1, maxBindingBytes: 2 ** 30 } }), 'split8x8-shared');
    assert.equal(wkvVariantName(chooseWkv(WKV_CHUNK_TOKENS, GPU32, false)), 'split8x8-shared');
    for (const tokens of [1, 512]) assert.doesNotMatch(name(tokens, { ...GPU32, cpuDriver: true }), /chunk/);
    const chunked = { ...GPU32, prefillFirst: wkvPrefillFromEnv({ RWKV_WKV_PREFILL: 'chunk16' }) };
    assert.equal(name(WKV_PREFILL_TOKENS, chunked), 'chunk16');
    assert.equal(name(512, chunked), 'chunk16');
    assert.equal(name(WKV_PREFILL_TOKENS - 1, chunked), 'split4x16-subgroup');
    assert.equal(describeWkv(chunked, null), `WKV split4x16-subgroup, chunk16 from ${WKV_PREFILL_TOKENS} tokens a job`);
    assert.equal(name(512, { ...chunked, batch: { heads: 32, tokens: 65536, jobs: 1, maxBindingBytes: 2 ** 30 } }), 'split8x8-shared');
    assert.equal(name(512, { ...chunked, maxInvocations: 64 }), 'split8x8-shared');
    assert.equal(name(512, { ...chunked, cpuDriver: true }), 'chunk16');
    assert.equal(name(512, { ...GPU32, prefillFirst: wkvPrefillFromEnv({ RWKV_WKV_PREFILL: 'chunk32' }) }), 'chunk32');
    const either = { ...GPU32, prefillFirst: wkvPrefillFromEnv({ RWKV_WKV_PREFILL: 'chunk32-subgroup,chunk16' }) };
    assert.equal(name(512, either), 'chunk32-subgroup');
    assert.equal(name(512, { ...either, subgroupMinSize: 0 }), 'chunk16');
    assert.throws(() => wkvPrefillFromEnv({ RWKV_WKV_PREFILL: 'chunk' }), /unknown WKV kernel variant 'chunk'/);
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
    // The last two batches of the first problem: jobs of lengths that are not multiples of the chunk variants'
    // 16 or 32 tokens, several of them shorter than a chunk, in one sub-pass; and a lone job shorter than a chunk.
    const problems = [
      { heads: 3, headSize: 64, batches: [[1, 17, 40, 2], [1, 1, 1], [64], [1, 5, 16, 17, 40], [3]] },
      { heads: 2, headSize: 32, batches: [[5, 1, 33]] },
    ];
    const refs = new Map<string, { y: Float32Array; state: Float32Array }>();
    const harnesses = new Map<number, WkvHarness>();
    const harness = (i: number) => {
      const p = problems[i];
      if (!harnesses.has(i)) {
        const tokens = Math.max(...p.batches.map((b) => b.reduce((x, y) => x + y, 0)));
        const slots = Math.max(...p.batches.map((b) => b.length));
        harnesses.set(i, new WkvHarness(gpu, { heads: p.heads, headSize: p.headSize, tokens, slots, seed: 11 + i }));
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

  it('the lane variants\' scan in the straight-line form GPUs run gives the reference\'s outputs and states (head size 32)', async function () {
    // CI's lavapipe runs the loop form of the same operations (LLVM takes minutes over the straight-line form at head
    // size 64); this checks the generated straight-line code at a size it compiles in seconds.
    const v = parseWkvVariant('chunk16-lane');
    supported(this, v, 32);
    const problem = { heads: 2, headSize: 32, tokens: 40, slots: 3, seed: 12 };
    const ref = new WkvHarness(gpu, problem);
    const flat = new WkvHarness(gpu, { ...problem, flatScan: true });
    try {
      for (const jobs of [[5, 1, 33], [40]]) {
        const want = await ref.use(jobs).run({ kind: 'row' });
        const got = await flat.use(jobs).run(v);
        const scale = Math.max(...want.y.map(Math.abs));
        assert.ok(scale > 0.1, 'the reference outputs are not all near zero');
        assert.ok(maxAbsDiff(got.y, want.y) <= 1e-5 * scale, `jobs [${jobs}]: max |Δy| ${maxAbsDiff(got.y, want.y)}`);
        assert.ok(maxAbsDiff(got.state, want.state) <= 1e-5, `jobs [${jobs}]: max |Δstate| ${maxAbsDiff(got.state, want.state)}`);
      }
    } finally {
      ref.dispose();
      flat.dispose();
    }
  });

  it('a chunked variant whose chunks would not fit its scratch gives way to the split kernels for that sub-pass', async function () {
    const model = randomRwkv7Checkpoint({ nLayer: 1, nEmbd: 64, headSize: 64, vocabSize: 16, seed: 5 });
    const be = await createBackend({ model, slots: 64, maxTokens: 64, maxRows: 64, precision: 'f32', gpu, device: 'gpu' });
    try {
      const rt = be as unknown as Rwkv7Runtime;
      supported(this, parseWkvVariant('chunk16'), 64);
      rt.wkvVariant = parseWkvVariant('chunk16');
      const wkvs = (T: number, J: number) => rt.dispatchLabels(T, J, J).filter((l) => l.startsWith('rwkv7_wkv')).length;
      // Room for 64 tokens in 16 jobs: min(64, ⌊(64 + 16·15) / 16⌋) = 19 chunks. A sub-pass of T tokens in J jobs
      // may have min(T, ⌊(T + 15J) / 16⌋): one 64-token job 4 (two passes), 64 one-token jobs 64 (one pass),
      // 40 tokens in 18 jobs 19 (two), in 20 jobs 21 (one).
      assert.equal(wkvs(64, 1), 2);
      assert.deepEqual(rt.dispatchLabels(64, 1, 1).filter((l) => l.startsWith('rwkv7_wkv')), ['rwkv7_wkv_prep', 'rwkv7_wkv']);
      assert.equal(wkvs(64, 64), 1);
      assert.equal(wkvs(40, 18), 2);
      assert.equal(wkvs(40, 20), 1);
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

    it('a chunk variant records its prep before the recurrence of every layer, sized for the sub-pass', function () {
      const v = parseWkvVariant('chunk16');
      supported(this, v, be.info.headSize);
      const runtime = be as unknown as Rwkv7Runtime;
      runtime.wkvVariant = v;
      try {
        const wkv = runtime.dispatchSizes(40, 2, 2).filter((d) => d.label.startsWith('rwkv7_wkv'));
        const H = be.info.nHead;
        assert.equal(be.info.headSize, 64); // v7-tiny: 80 virtual rows, 10 prep workgroups of 8 a head
        const layer = [
          { label: 'rwkv7_wkv_prep', x: H * 10, y: wkvMaxChunks(16, 40, 2), z: 1 },
          { label: 'rwkv7_wkv', x: (H * 64) / 4, y: 2, z: 1 },
        ];
        assert.deepEqual(wkv, Array.from({ length: be.info.nLayer }, () => layer).flat());
      } finally {
        runtime.wkvVariant = null;
      }
    });

    for (const chunkName of ['chunk16', 'chunk32-subgroup']) {
      it(`RWKV_WKV_PREFILL=${chunkName} runs it for prefill sub-passes only, on the golden logits`, async function () {
        supported(this, parseWkvVariant(chunkName), be.info.headSize);
        const was = process.env.RWKV_WKV_PREFILL;
        process.env.RWKV_WKV_PREFILL = chunkName;
        let chunked: Backend;
        try {
          chunked = await createBackend({ model: path.join(GOLDEN, 'v7-tiny.pth'), slots: 2, precision: 'f32', gpu, device: 'gpu' });
        } finally {
          if (was === undefined) delete process.env.RWKV_WKV_PREFILL;
          else process.env.RWKV_WKV_PREFILL = was;
        }
        try {
          const runtime = chunked as unknown as Rwkv7Runtime;
          assert.match(runtime.wkvPath, new RegExp(`, ${chunkName} from ${WKV_PREFILL_TOKENS} tokens a job$`));
          const preps = (tokens: number) => runtime.dispatchLabels(tokens, 1, 1).filter((l) => l === 'rwkv7_wkv_prep').length;
          assert.equal(preps(WKV_PREFILL_TOKENS), be.info.nLayer);
          assert.equal(preps(WKV_PREFILL_TOKENS - 1), 0);
          assert.equal(preps(1), 0);
          assert.ok(tokens.length >= WKV_PREFILL_TOKENS);
          const [seq] = await chunked.run([{ slot: 0, tokens, output: 'all' }]);
          assert.ok(worstRelL2(seq!, logits, vocab) < TOL, `sequence at once: rel L2 ${worstRelL2(seq!, logits, vocab)}`);
        } finally {
          chunked.dispose();
        }
      });
    }

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
