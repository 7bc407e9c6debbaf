// Where mm_sgtile reads its activations: each segment's inputs as f16 in 16×16 blocks, every block 512 contiguous
// bytes, so a subgroup loads a whole left matrix with one contiguous read (a strided 16×16 load from row-major
// storage ran 1.5–1.7× slower in the H200 probe, a copy through workgroup memory one f16 at a time 1.8× or more;
// bench/RESULTS.md "Tiled activations"). Segment i's block (token block tb, input block kb) starts at
// tile_base(i) + (tb · k/16 + kb) · 256 halves, rows of 16 tokens × 16 inputs inside; tokens are padded with
// zeros to a multiple of TILE_TOKENS, so a workgroup's token tile never reads past its segment.
// 64, or 128 for tilings of more tokens a workgroup (matmul.ts tileTokensOf): the tiling pass, the product and its
// reduction of one product agree.
const TILE_TOKENS: u32 = {{TILE_TOKENS}}u;

fn padded_rows() -> u32 {
  return ((row_count() + TILE_TOKENS - 1u) / TILE_TOKENS) * TILE_TOKENS;
}

/** First half of segment i's blocks. */
fn tile_base(i: u32) -> u32 {
  var b = 0u;
  for (var j = 0u; j < i; j++) { b += padded_rows() * grp.segs[j].k; }
  return b;
}

/** Row stride of the tiled product's partial sums: the virtual rows rounded up to whole segments of 64. */
fn part_stride() -> u32 {
  return ((grp.p1 + 63u) / 64u) * 64u;
}

/**
 * Where split z's partial sum of (token t, virtual row v) goes: [split][padded rows][part_stride()], so whole
 * 16×16 result tiles fit even for tokens past the batch and outputs past the last matrix.
 */
fn part_index(z: u32, t: u32, v: u32) -> u32 {
  return (z * padded_rows() + t) * part_stride() + v;
}
