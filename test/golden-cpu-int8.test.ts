// int8 weights on the CPU backend against the golden models (../shared/golden), every version. Two questions, two
// bounds, as test/golden-quant.test.ts asks them of the GPU:
//  - Are the layout and kernels right? The int8 logits against f32 weights holding the *same dequantised* values
//    on the same backend. The CPU backend quantises every matrix it lays out in panels (the GPU keeps the
//    LoRA-like ones f16): the large ones, RWKV-7's LoRAs, RWKV-6's token-shift and decay LoRAs, RWKV-7a's
//    s_emb_x. What differs is the f16 embedding int8 keeps and the inputs' i16 rounding: measured worst row
//    3.5e-4 (v4) to 9.5e-4 (v6). Bound 3e-3; a misplaced scale, row or LoRA block moves the logits by more than
//    the quantisation itself (1e-2 and up).
//  - How much does quantising cost? The logits against the reference outputs, worst row. Measured on the CPU:
//    v4 1.5e-2, v5 2.4e-2, v6 3.7e-2, v7 2.0e-2, v7a 2.1e-2, v7b 2.2e-2 (v4-v6 include the reference's bf16 ln0, 5e-3 to
//    1.3e-2; see golden.test.ts). The bounds are about 1.5x those.

import { strict as assert } from 'assert';
import * as path from 'path';
import { createBackend, type Backend } from '../engine/backend';
import { loadCheckpoint } from '../engine/loader/checkpoint';
import { readSafetensors } from '../engine/loader/safetensors';
import { toF32, toI32 } from '../engine/loader/dtype';
import { cpuDequantised } from './cpu-dequantised';
import { requireGolden } from './golden-required';
import { GOLDEN } from './paths';
import { worstRelL2 } from './metrics';

const CASES = [
  { golden: 'v4-tiny', bound: 2.5e-2 },
  { golden: 'v5-tiny', bound: 3.5e-2 },
  { golden: 'v6-tiny', bound: 5.5e-2 },
  { golden: 'v7-tiny', bound: 3e-2 },
  { golden: 'v7a-tiny', bound: 3e-2 },
  { golden: 'v7b-tiny', bound: 3.5e-2 },
];

describe('golden [cpu]: int8 weights, every version', function () {
  this.timeout(300_000);
  before(function () {
    requireGolden(this, ...CASES.flatMap((c) => [path.join(GOLDEN, `${c.golden}.pth`), path.join(GOLDEN, `${c.golden}.golden.st`)]));
  });

  for (const c of CASES) {
    it(`${c.golden}: the dequantised weights' logits within 3e-3, the reference's within ${c.bound}; nf4 refused`, async () => {
      const ck = loadCheckpoint(path.join(GOLDEN, `${c.golden}.pth`));
      const g = readSafetensors(path.join(GOLDEN, `${c.golden}.golden.st`));
      const tokens = Array.from(toI32(g.tensors.get('tokens')!));
      const want = Float32Array.from(toF32(g.tensors.get('logits')!));
      const vocab = want.length / tokens.length;
      let q8: Backend | undefined;
      let same: Backend | undefined;
      try {
        q8 = await createBackend({ model: ck, slots: 1, precision: 'int8', device: 'cpu', threads: 2 });
        assert.match(q8.adapterName, /^CPU: .*int8 weights/);
        same = await createBackend({ model: cpuDequantised(ck), slots: 1, precision: 'f32', device: 'cpu', threads: 2 });
        const [got] = await q8.run([{ slot: 0, tokens, output: 'all' }]);
        const [ref] = await same.run([{ slot: 0, tokens, output: 'all' }]);
        const kernelErr = worstRelL2(got!, ref!, vocab);
        const quantErr = worstRelL2(got!, want, vocab);
        console.log(`      ${c.golden} int8: vs same weights in f32 ${kernelErr.toExponential(2)}, vs reference ${quantErr.toExponential(2)}`);
        assert.ok(kernelErr < 3e-3, `rel L2 ${kernelErr} against the dequantised weights in f32`);
        assert.ok(quantErr < c.bound, `rel L2 ${quantErr} against the reference >= ${c.bound}`);
        // nf4 stays the GPU's, refused by name on every version.
        await assert.rejects(createBackend({ model: ck, slots: 1, precision: 'nf4', device: 'cpu' }), /device 'cpu': precision 'nf4' runs on the GPU backend only/);
      } finally {
        q8?.dispose();
        same?.dispose();
      }
    });
  }
});
