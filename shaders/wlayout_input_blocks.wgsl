// Where a matrix kernel finds weight (o, k) of a segment stored as 16×16 blocks input by input
// (engine/rwkv7/weight-blocks.ts 'input-blocks'): the blocks of inputs 16·kb.. of every 16-row strip lie side by
// side, strip order, then those of the next kb; a block is 256 contiguous weights, 16 rows of 16. Concurrent
// workgroups (neighbouring strips, the same inputs) then read neighbouring blocks. A segment's rows are whole blocks
// (blockable), so s.n / 16 strips make one kb's run.

/** Index (in units of 8 weights, as load_w8 takes it) of weights o, k..k+7 of segment s; k a multiple of 8. */
fn w8_at(s: Seg, o: u32, k: u32) -> u32 {
  return s.w_off + ((k / 16u) * (s.n / 16u) + o / 16u) * 32u + (o % 16u) * 2u + (k % 16u) / 8u;
}

/** From weights o, k.. to o, k + 16.. in units of 8 weights (w8_at's): a run of s.n / 16 blocks. */
fn w8_kblock_step(s: Seg) -> u32 {
  return 32u * (s.n / 16u);
}

/** First element of the 16×16 tile at rows o.., inputs k.. (multiples of 16), loaded column-major with w_tile_stride. */
fn w_tile_at(s: Seg, o: u32, k: u32) -> u32 {
  return s.w_off * 8u + (o / 16u) * 256u + w_tile_k(s, k);
}

/** Offset of input k (a multiple of 16) from the segment's first weight of the same strip: kb runs of s.n / 16 blocks. */
fn w_tile_k(s: Seg, k: u32) -> u32 {
  return k * s.n;
}

/** Offset from a 16×16 tile to the one 16 rows on (the same inputs): the next block. */
fn w_strip_step(s: Seg) -> u32 {
  return 256u;
}

fn w_tile_stride(s: Seg) -> u32 {
  return 16u;
}
