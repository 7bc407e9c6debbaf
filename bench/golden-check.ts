// Quick correctness check on whatever adapter this machine has (e.g. the H200 before benchmarking):
// worst relative L2 error of the engine's logits against the golden reference, f32 and f16 weights,
// decode (one token per call) and prefill (whole sequence) paths.
//   RWKV_SHARED=path/to/shared node dist/bench/golden-check.js
// On a machine without subgroup matrices (lavapipe), every subgroup-matrix variant below runs with its matrices
// emulated (engine/gpu/subgroup-matrix-emulation.ts; about 4 minutes on a 2-core VM):
//   RWKV_FLOW_KERNEL_PATH=subgroup-matrix RWKV_FLOW_EMULATE_SUBGROUP_MATRIX=1 node dist/bench/golden-check.js

import * as path from 'path';
import { createBackend } from '../engine/backend';
import { acquireGpu, type GpuContext } from '../engine/gpu/device';
import { randomRwkv7Checkpoint } from '../engine/random-model';
import { resolveSamplerOptions, TokenSampler } from '../engine/samplers';
import type { DrawJob, TopLogits } from '../engine/types';
import { readSafetensors } from '../engine/loader/safetensors';
import { toF32, toI32 } from '../engine/loader/dtype';
import { GOLDEN } from '../test/paths';
import { worstRelL2 } from '../test/metrics';

export async function goldenCheck(name = 'v7-tiny'): Promise<Record<string, number>> {
  const gpu = await acquireGpu();
  const g = readSafetensors(path.join(GOLDEN, `${name}.golden.st`));
  const tokens = Array.from(toI32(g.tensors.get('tokens')!));
  const want = Float32Array.from(toF32(g.tensors.get('logits')!));
  const V = want.length / tokens.length;
  const out: Record<string, number> = {};
  console.log(`golden check on ${gpu.adapterName}, kernel path ${gpu.kernelPath}`);
  // 'tiled': every product on the prefill kernel (subgroup matrices on that path), even single tokens.
  // 'int8': per-row int8 codes (on subgroup matrices, widened to f16 on the staged tiles above 4 rows).
  // 'sgtile': every product on the tiled subgroup-matrix kernel (mm_sgtile, normally from 64 rows), even single
  // tokens, so the golden sequences (24 tokens) reach it. 'staged': the same on the staged tiles (mm_sgstage).
  // On a subgroup-matrix device f16 products are stored as 16×16 blocks; the '-rows' modes keep the checkpoint's rows.
  // The tilings: 4×4 tiles in one subgroup (the prefill FFN tiles until the nineteenth session), the default ones
  // (matmul.ts DEFAULT_TILED: 4×2 in two subgroups, 4 steps a trip; 2×2 in 2×2 subgroups, one step).
  const sgtile = { RWKV_MATMUL_TILED: '4x4x1x1u4@1' };
  const sgtileSmall = { RWKV_MATMUL_TILED: '4x2x1x2u4@1' };
  const sgtileBase = { RWKV_MATMUL_TILED: '2x2x2x2u1@1' };
  const staged = { RWKV_MATMUL_TILED: 'off', RWKV_MATMUL_STAGED: '2x2x2x2k64@1' };
  const rows = { RWKV_WEIGHT_BLOCKS: 'off' };
  // The experiments of bench/device/wide-tiles.sh and block-order.sh: 128 × 128 workgroup tiles (4×4 tiles in 2×2
  // subgroups, inputs padded to 128 tokens) and the weights' blocks input by input.
  const sgtileWide = { RWKV_MATMUL_TILED: '4x4x2x2u4@1' };
  const byInput = { RWKV_WEIGHT_BLOCKS: 'by-input' };
  const modes: [string, 'f32' | 'f16' | 'int8', number | undefined, Record<string, string>][] = [
    ['f32', 'f32', undefined, {}],
    ['f16', 'f16', undefined, {}],
    ['f16-rows', 'f16', undefined, rows],
    ['f16-tiled', 'f16', 0, {}],
    ['f16-sgtile', 'f16', 0, sgtile],
    ['f16-sgtile-small', 'f16', 0, sgtileSmall],
    ['f16-sgtile-base', 'f16', 0, sgtileBase],
    ['f16-sgtile-rows', 'f16', 0, { ...sgtile, ...rows }],
    ['f16-staged', 'f16', 0, staged],
    ['f16-sgtile-wide', 'f16', 0, sgtileWide],
    ['f16-by-input', 'f16', undefined, byInput],
    ['f16-by-input-sgtile', 'f16', 0, { ...sgtileBase, ...byInput }],
    ['int8', 'int8', undefined, {}],
  ];
  for (const [label, precision, vecMaxRows, env] of modes) {
    // Kernel switches are read when the backend is built; set only around that.
    const before = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
    Object.assign(process.env, env);
    const be = await createBackend({ model: path.join(GOLDEN, `${name}.pth`), slots: 2, precision, gpu, vecMaxRows });
    for (const [k, v] of Object.entries(before)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    if (label !== 'f32') console.log(`${label}: ${be.kernelPath}`);
    const [seq] = await be.run([{ slot: 0, tokens, output: 'all' }]);
    const steps = new Float32Array(want.length);
    for (let t = 0; t < tokens.length; t++) steps.set((await be.run([{ slot: 1, tokens: [tokens[t]], output: 'last' }]))[0]!, t * V);
    out[`${name}.${label}.sequence`] = worstRelL2(seq!, want, V);
    out[`${name}.${label}.stepwise`] = worstRelL2(steps, want, V);
    be.dispose();
  }
  out['draws.mismatches'] = await drawCheck(gpu);
  return out;
}

/**
 * Tokens drawn on the GPU (runDraws) against the host drawing from the same tops one call at a time, on a random f16
 * model of the full World vocabulary: 8 slots, ai00's default sampler (penalties on) or greedy, 24 steps in a call of
 * 8 and two continuing it. Returns how many drawn tokens differ (0 expected: the draw is the host's, in f32).
 */
async function drawCheck(gpu: GpuContext): Promise<number> {
  const ck = randomRwkv7Checkpoint({ nLayer: 2, nEmbd: 256, vocabSize: 65536, dtype: 'f16', seed: 3 });
  const [host, dev] = [await createBackend({ model: ck, slots: 8, precision: 'f16', gpu }), await createBackend({ model: ck, slots: 8, precision: 'f16', gpu })];
  const opts = (slot: number) => resolveSamplerOptions(slot % 4 === 0 ? { temperature: 0, presencePenalty: 1 } : { seed: slot + 1 });
  const samplers = (V: number) => Array.from({ length: 8 }, (_, slot) => new TokenSampler(opts(slot), V, (id) => id));
  const [hs, ds] = [samplers(65536), samplers(65536)];
  let hostNext = hs.map((_, slot) => 1000 + slot);
  const steps = 8;
  const byHost: number[][] = [];
  for (let s = 0; s < 3 * steps; s++) {
    const tops = (await host.run(hostNext.map((t, slot) => ({ slot, tokens: [t], output: 'top' as const, adjust: hs[slot].adjustments() })))) as TopLogits[];
    hostNext = tops.map((top, slot) => hs[slot].sampleTop(top));
    byHost.push(hostNext);
  }
  // One call, then two continuing it, the first queued before the call is read back (as the scheduler runs them).
  const jobs: DrawJob[] = ds.map((sm, slot) => ({ slot, token: 1000 + slot, draw: sm.drawParams(dev.topCapacity ?? 0)!, uniforms: sm.takeUniforms(steps) }));
  const calls = [dev.runDraws!(jobs, steps), dev.continueDraws!(ds.map((sm) => sm.takeUniforms(steps)), steps)];
  let mismatches = 0;
  for (let call = 0; call < 3; call++) {
    const rows = await calls[call];
    if (call === 0) calls.push(dev.continueDraws!(ds.map((sm) => sm.takeUniforms(steps)), steps));
    for (let s = 0; s < steps; s++)
      for (let slot = 0; slot < 8; slot++) if (rows[s * 8 + slot] !== byHost[call * steps + s][slot]) mismatches++;
  }
  console.log(`draws: ${mismatches} of ${3 * 8 * 8} tokens drawn on the GPU differ from the host's`);
  host.dispose();
  dev.dispose();
  return mismatches;
}

if (require.main === module) {
  goldenCheck(process.argv[2]).then(
    (r) => {
      console.log(JSON.stringify(r, null, 1));
      // The golden bounds (test/golden.test.ts, golden-quant.test.ts): f32 weights < 1e-3, f16 weights < 5e-3,
      // int8 < 3e-2; exit 2 past them.
      const bound = (k: string) => (k === 'draws.mismatches' ? 1 : k.includes('.f32.') ? 1e-3 : k.includes('.int8.') ? 3e-2 : 5e-3);
      const over = Object.entries(r).filter(([k, v]) => !(v < bound(k)));
      if (over.length) console.error(`golden bounds exceeded: ${over.map(([k, v]) => `${k} ${v}`).join(', ')}`);
      process.exit(over.length ? 2 : 0);
    },
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
