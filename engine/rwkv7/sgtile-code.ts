// The inner code of the subgroup-matrix products (shaders/mm_sgtile.wgsl, mm_sgmat.wgsl), generated for one tile shape as
// straight-line WGSL: one named variable per matrix (c_i_j results, a{u}_i left, b{u}_j right) and no loops over
// tiles. Written with arrays of matrices and loops, the same kernel ran 1.2–1.6× slower on the H200 for the larger
// tiles (the driver cannot keep a dynamically indexed array of matrices in registers); a subgroup holding 4×4 tiles
// only pays with the flat form (bench/device/gemm-probe.ts, bench/RESULTS.md "Flat tiles", 2026-12-04).

const LEFT = 'subgroup_matrix_left<f16, 16, 16>';
const RIGHT = 'subgroup_matrix_right<f16, 16, 16>';
const RESULT = 'subgroup_matrix_result<f32, 16, 16>';

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/**
 * Result tile c_i_j through the subgroup's 256 floats of workgroup memory (`ot`) into `sink` (given the value's
 * expression), its 32 lanes taking 16 neighbouring outputs of a token at a time; tokens from `t0`, outputs from `o0`,
 * both past the bounds skipped. Every subgroup of the workgroup runs it, so its barriers are uniform. Shared by both
 * kernels' epilogues. With K slices (sk > 1, mm_sgtile.wgsl SK) the subgroups of slice 0 add the other slices' tiles
 * to their own, in slice order, and only they store.
 */
function tileThroughWorkgroup(i: number, j: number, t0: string, o0: string, sink: (value: string) => string, bounds = 't < rows && o < s.n', sk = 1): string {
  const value = range(sk).map((q) => (q === 0 ? 'ot[sg * 256u + e]' : `ot[(sg + ${q}u * SGS) * 256u + e]`)).join(' + ');
  const loop = [
    'for (var e = lane; e < 256u; e += 32u) {',
    `  let t = ${t0} + ${i * 16}u + e / 16u;`,
    `  let o = ${o0} + ${j * 16}u + e % 16u;`,
    `  if (${bounds}) { ${sink(value)} }`,
    '}',
  ];
  return [
    `subgroupMatrixStore<row_major>(&ot, sg * 256u, c_${i}_${j}, 16u);`,
    'workgroupBarrier();',
    ...(sk > 1 ? ['if (q == 0u) {', ...loop.map((l) => `  ${l}`), '}'] : loop),
    'workgroupBarrier();',
  ].join('\n  ');
}

/**
 * Code for mm_sgtile.wgsl's placeholders: {{ACCUMULATORS}}, {{K_LOOP}} (trips of KU steps of 16 inputs, then one step
 * at a time for the rest of the span; `pipe`: the trips software-pipelined, tiled-pipeline.ts), {{STORES}} and
 * {{SHARED}} (module-scope declarations the stores need). Split (split > 1), each result tile goes whole to the
 * partial sums for mm_split_reduce.wgsl. Unsplit, the product stores its own results as the reduction would (store():
 * activation, accumulation, bounds): each tile through the subgroup's 1 KB of workgroup memory, its lanes writing 16
 * neighbouring outputs of a token at a time — one dispatch and one pass over the results fewer.
 */
export function tiledProductCode(mt: number, nt: number, ku: number, split: number, blocksOut = false, pipe = false, sk = 1): Record<'ACCUMULATORS' | 'K_LOOP' | 'STORES' | 'SHARED', string> {
  const pairs = range(mt).flatMap((i) => range(nt).map((j) => [i, j] as const));
  // Loads of step u at input `k` into variables named with `prefix`: the left matrices of the subgroup's MT token
  // blocks, the right ones of its NT output blocks.
  const loads = (u: number, k = 'k0', prefix = '', decl = 'let') => [
    ...range(mt).map((i) => `${decl} ${prefix}a${u}_${i} = subgroupMatrixLoad<${LEFT}, row_major>(&xt, xbase + ${i * 256}u * kblocks + (${k} / 16u + ${u}u) * 256u, 16u);`),
    ...range(nt).map((j) => `${decl} ${prefix}b${u}_${j} = subgroupMatrixLoad<${RIGHT}, col_major>(&W, wbase + ${j}u * wstrip + w_tile_k(s, ${k} + ${16 * u}u), wstride);`),
  ];
  const multiplies = (u: number) => pairs.map(([i, j]) => `c_${i}_${j} = subgroupMatrixMultiplyAccumulate(a${u}_${i}, b${u}_${j}, c_${i}_${j});`);
  const operands = range(ku).flatMap((u) => [...range(mt).map((i) => `a${u}_${i}`), ...range(nt).map((j) => `b${u}_${j}`)]);
  // A trip's loads all come before its multiplies, so they are in flight together. Pipelined, the trip starting
  // at k0 was loaded by the trip before (the first by the prologue) and loads the next one's before multiplying;
  // the last trip's loads reach past the span (past the buffer at its end, where robust access clamps them) and are
  // never multiplied.
  const trips = pipe
    ? [
        ...range(ku).flatMap((u) => loads(u, 'span.x', '', 'var')),
        'var k0 = span.x;',
        `for (; k0 + ${16 * (ku - 1)}u < span.y; k0 += ${16 * ku}u) {`,
        `  let kn = k0 + ${16 * ku}u;`,
        ...range(ku).flatMap((u) => loads(u, 'kn', 'n')).map((l) => `  ${l}`),
        ...range(ku).flatMap(multiplies).map((l) => `  ${l}`),
        ...operands.map((m) => `  ${m} = n${m};`),
        '}',
      ]
    : [
        'var k0 = span.x;',
        `for (; k0 + ${16 * (ku - 1)}u < span.y; k0 += ${16 * ku}u) {`,
        ...[...range(ku).flatMap((u) => loads(u)), ...range(ku).flatMap(multiplies)].map((l) => `  ${l}`),
        '}',
      ];
  // Then one step at a time for the rest of the range.
  const rest = ['for (; k0 < span.y; k0 += 16u) {', ...[...loads(0), ...multiplies(0)].map((l) => `  ${l}`), '}'];
  return {
    ACCUMULATORS: pairs.map(([i, j]) => `var c_${i}_${j}: ${RESULT};`).join('\n  '),
    K_LOOP: [...trips, ...rest].join('\n  '),
    STORES: split > 1 && sk > 1
      ? // The slices' sum of each tile into the partial sums as the matrix store would place it.
        pairs.map(([i, j]) => tileThroughWorkgroup(i, j, '0u', '0u', (v) => `part[part0 + (${i * 16}u + e / 16u) * pstride + ${j * 16}u + e % 16u] = ${v};`, 'true', sk)).join('\n  ')
      : split > 1
      ? pairs.map(([i, j]) => `subgroupMatrixStore<row_major>(&part, part0 + ${i * 16}u * pstride + ${j * 16}u, c_${i}_${j}, pstride);`).join('\n  ')
      : [
          // mm_sgtile has no early return, so every subgroup reaches these stores.
          'let rows = row_count();',
          'let tr0 = t0 + sm * MT * 16u;',
          'let or0 = o0 + sn * NT * 16u;',
          // As the next product's f16 blocks (sgtile_blocks_out.wgsl): every token row of the tile, those past the batch
          // as zeros, since that product reads its blocks up to the padded rows.
          ...pairs.map(([i, j]) =>
            blocksOut
              ? tileThroughWorkgroup(i, j, 'tr0', 'or0', (v) => `store_block(s, t, o, ${v}, t >= rows);`, 'o < s.n', sk)
              : tileThroughWorkgroup(i, j, 'tr0', 'or0', (v) => `store(s, t, o, ${v});`, undefined, sk),
          ),
        ].join('\n  '),
    SHARED: split > 1 && sk === 1 ? '' : 'var<workgroup> ot: array<f32, 256u * SGS * SK>;',
  };
}

/**
 * Code for mm_sgmat.wgsl's placeholders: {{ACCUMULATORS}}, {{WLOADS}} (every weight matrix of a stage of KC inputs,
 * issued before the stage's activations are staged, so their latency overlaps that and the barrier), {{MULTIPLIES}}
 * (the stage's multiplies, step by step, a half-full last stage stopping at the span's end), {{EPILOGUE}} (each
 * result through workgroup memory into emit()). The multiplies run in the order of the loop form, so the sums are
 * the same bits.
 */
export function stagedRowsCode(mt: number, nt: number, kc: number): Record<'ACCUMULATORS' | 'WLOADS' | 'MULTIPLIES' | 'EPILOGUE', string> {
  const pairs = range(mt).flatMap((i) => range(nt).map((j) => [i, j] as const));
  const steps = range(kc / 16);
  // A half-full last stage reads weights at its span's end again instead of past it: those are never multiplied.
  const wloads = steps.flatMap((u) => range(nt).map((j) => `let w${u}_${j} = subgroupMatrixLoad<${RIGHT}, col_major>(&W, w_tile_at(s, o0 + ${j * 16}u, min(k0 + ${u * 16}u, span.y - 16u)), wstride);`));
  const multiplies = steps.map((u) => [
    `if (k0 + ${u * 16}u < span.y) {`,
    ...range(mt).map((i) => `  let a${u}_${i} = subgroupMatrixLoad<${LEFT}, row_major>(&xs, ${i * 16}u * XS + ${u * 16}u, XS);`),
    ...range(nt).flatMap((j) => range(mt).map((i) => `  c_${i}_${j} = subgroupMatrixMultiplyAccumulate(a${u}_${i}, w${u}_${j}, c_${i}_${j});`)),
    '}',
  ].join('\n    '));
  const epilogue = pairs.map(([i, j]) => tileThroughWorkgroup(i, j, 't0', 'o0', (v) => `emit(s, t, o, ${v}, wid.z);`));
  return {
    ACCUMULATORS: pairs.map(([i, j]) => `var c_${i}_${j}: ${RESULT};`).join('\n  '),
    WLOADS: wloads.join('\n    '),
    MULTIPLIES: multiplies.join('\n    '),
    EPILOGUE: epilogue.join('\n  '),
  };
}
