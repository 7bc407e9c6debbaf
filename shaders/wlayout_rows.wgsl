// Where a matrix kernel finds weight (o, k) of a segment: row-major [out, in], the layout of the checkpoint.
// The other layout is wlayout_blocks.wgsl; matmul.ts picks one per group (MatrixGroup.layout).

/** Index (in units of 8 weights, as load_w8 takes it) of weights o, k..k+7 of segment s; k a multiple of 8. */
fn w8_at(s: Seg, o: u32, k: u32) -> u32 {
  return s.w_off + (o * s.k + k) / 8u;
}

/** From weights o, k.. to o, k + 16.. in units of 8 weights (w8_at's): 16 weights. */
fn w8_kblock_step(s: Seg) -> u32 {
  return 2u;
}

/** First element of the 16×16 tile at rows o.., inputs k.. (multiples of 16), loaded column-major with w_tile_stride. */
fn w_tile_at(s: Seg, o: u32, k: u32) -> u32 {
  return s.w_off * 8u + o * s.k + w_tile_k(s, k);
}

/** Offset of input k (a multiple of 16) within a strip of 16 rows, from the strip's first weight. */
fn w_tile_k(s: Seg, k: u32) -> u32 {
  return k;
}

/** Offset from a 16×16 tile to the one 16 rows on (the same inputs). */
fn w_strip_step(s: Seg) -> u32 {
  return 16u * s.k;
}

fn w_tile_stride(s: Seg) -> u32 {
  return s.k;
}
