// A tiled product (mm_sgtile.wgsl unsplit, or the reduction pass of a split one, mm_split_reduce.wgsl) storing its
// results as the f16 blocks the next tiled product reads (sgtile_layout.wgsl), so that product runs without its
// tiling pass (mm_sgtile_x.wgsl) and these results are not written as f32 rows and read back to be converted. The
// next product's segment i reads this product's segment i whole (its inputs = these outputs, k_i = n_i): segment i's
// block (token block tb, input block kb) at Σ_{j<i} padded rows · n_j + (tb · n_i/16 + kb) · 256 halves. Used for the
// FFN key into the FFN value and the first LoRA stages into the second (engine/rwkv7/runtime.ts productBlocksFor).
@group(0) @binding(7) var<storage, read_write> xo: array<f16>;

/** First half of the blocks of the next product's segment that reads segment s. */
fn block_base(s: Seg) -> u32 {
  var b = 0u;
  for (var j = 0u; j < grp.count; j++) {
    if (grp.segs[j].row0 < s.row0) { b += padded_rows() * grp.segs[j].n; }
  }
  return b;
}

/** Output o of token t from its sum v0, or 0 for a token past the batch (`pad`), into the block layout. */
fn store_block(s: Seg, t: u32, o: u32, v0: f32, pad: bool) {
  xo[block_base(s) + block_half(t, o, s.n)] = f16(select(activated(s, o, v0), 0.0, pad));
}
