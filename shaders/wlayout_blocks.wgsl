// Where a matrix kernel finds weight (o, k) of a segment stored as 16×16 blocks (engine/rwkv7/weight-blocks.ts):
// each strip of 16 output rows keeps its place (16·K weights), and inside it block kb (inputs 16·kb..) is 256
// contiguous weights, 16 rows of 16. A subgroup-matrix load of a weight tile is then one contiguous 512-byte read
// instead of 16 rows K apart: on the H200 probe, the tiled product ran 1.9–2.4× faster with its weights so
// (bench/RESULTS.md "Tiled activations"). Streaming kernels read 16 contiguous weights a row a block, whole 32-byte
// sectors, as before.

/** Index (in units of 8 weights, as load_w8 takes it) of weights o, k..k+7 of segment s; k a multiple of 8. */
fn w8_at(s: Seg, o: u32, k: u32) -> u32 {
  return s.w_off + (o / 16u) * 2u * s.k + (k / 16u) * 32u + (o % 16u) * 2u + (k % 16u) / 8u;
}

/** From weights o, k.. to o, k + 16.. in units of 8 weights (w8_at's): a block. */
fn w8_kblock_step(s: Seg) -> u32 {
  return 32u;
}

/** First element of the 16×16 tile at rows o.., inputs k.. (multiples of 16), loaded column-major with w_tile_stride. */
fn w_tile_at(s: Seg, o: u32, k: u32) -> u32 {
  return s.w_off * 8u + o * s.k + w_tile_k(s, k);
}

/** Offset of input k (a multiple of 16) within a strip of 16 rows, from the strip's first weight: block k/16. */
fn w_tile_k(s: Seg, k: u32) -> u32 {
  return k * 16u;
}

/** Offset from a 16×16 tile to the one 16 rows on (the same inputs). */
fn w_strip_step(s: Seg) -> u32 {
  return 16u * s.k;
}

fn w_tile_stride(s: Seg) -> u32 {
  return 16u;
}
