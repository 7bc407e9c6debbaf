// The inner code of the tiled subgroup-matrix product (shaders/mm_sgtile.wgsl), generated for one tile shape as
// straight-line WGSL: one named variable per matrix (c_i_j results, a{u}_i left, b{u}_j right) and no loops over
// tiles. Written with arrays of matrices and loops, the same kernel ran 1.2–1.6× slower on the H200 for the larger
// tiles (the driver cannot keep a dynamically indexed array of matrices in registers); a subgroup holding 4×4 tiles
// only pays with the flat form (bench/device/gemm-probe.ts, bench/RESULTS.md "Flat tiles", 2026-12-04).

const LEFT = 'subgroup_matrix_left<f16, 16, 16>';
const RIGHT = 'subgroup_matrix_right<f16, 16, 16>';
const RESULT = 'subgroup_matrix_result<f32, 16, 16>';

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** Code for mm_sgtile.wgsl's placeholders: {{ACCUMULATORS}}, {{TRIP}} (KU steps of 16 inputs), {{STEP}} (one), {{STORES}}. */
export function tiledProductCode(mt: number, nt: number, ku: number): Record<'ACCUMULATORS' | 'TRIP' | 'STEP' | 'STORES', string> {
  const pairs = range(mt).flatMap((i) => range(nt).map((j) => [i, j] as const));
  // Loads of step u: the left matrices of the subgroup's MT token blocks, the right ones of its NT output blocks.
  const loads = (u: number) => [
    ...range(mt).map((i) => `let a${u}_${i} = subgroupMatrixLoad<${LEFT}>(&xt, xbase + ${i * 256}u * kblocks + (k0 / 16u + ${u}u) * 256u, false, 16u);`),
    ...range(nt).map((j) => `let b${u}_${j} = subgroupMatrixLoad<${RIGHT}>(&W, wbase + ${j * 16}u * k + w_tile_k(k0 + ${16 * u}u), true, wstride);`),
  ];
  const multiplies = (u: number) => pairs.map(([i, j]) => `c_${i}_${j} = subgroupMatrixMultiplyAccumulate(a${u}_${i}, b${u}_${j}, c_${i}_${j});`);
  // A trip's loads all come before its multiplies, so they are in flight together.
  const trip = [...range(ku).flatMap(loads), ...range(ku).flatMap(multiplies)];
  return {
    ACCUMULATORS: pairs.map(([i, j]) => `var c_${i}_${j}: ${RESULT};`).join('\n  '),
    TRIP: trip.join('\n    '),
    STEP: [...loads(0), ...multiplies(0)].join('\n    '),
    STORES: pairs.map(([i, j]) => `subgroupMatrixStore(&part, part0 + ${i * 16}u * pstride + ${j * 16}u, c_${i}_${j}, false, pstride);`).join('\n  '),
  };
}
