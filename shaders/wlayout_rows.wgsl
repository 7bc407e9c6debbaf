// Where a matrix kernel finds weight (o, k) of a segment: row-major [out, in], the layout of the checkpoint.
// The other layout is wlayout_blocks.wgsl; matmul.ts picks one per group (MatrixGroup.layout).

/** Index (in units of 8 weights, as load_w8 takes it) of weights o, k..k+7 of segment s; k a multiple of 8. */
fn w8_at(s: Seg, o: u32, k: u32) -> u32 {
  return s.w_off + (o * s.k + k) / 8u;
}

/** First element of the 16×16 tile at rows o.., inputs k.. (multiples of 16), loaded column-major with w_tile_stride. */
fn w_tile_at(s: Seg, o: u32, k: u32) -> u32 {
  return s.w_off * 8u + o * s.k + w_tile_k(k);
}

/** Offset of input k (a multiple of 16) within a strip of 16 rows, from the strip's first weight. */
fn w_tile_k(k: u32) -> u32 {
  return k;
}

fn w_tile_stride(s: Seg) -> u32 {
  return s.k;
}
