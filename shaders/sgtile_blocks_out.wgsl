// A tiled product (mm_sgtile.wgsl, unsplit) storing its results as the f16 blocks the next tiled product reads
// (sgtile_layout.wgsl: one segment, inputs = this segment's outputs, block (tb, kb) at (tb · n/16 + kb) · 256 halves),
// so that product runs without its tiling pass (mm_sgtile_x.wgsl) and these results are not written as f32 rows and
// read back to be converted. The FFN key writes the FFN value's blocks this way (engine/rwkv7/runtime.ts).
@group(0) @binding(7) var<storage, read_write> xo: array<f16>;

/** Output o of token t from its sum v0, or 0 for a token past the batch (`pad`), into the block layout. */
fn store_block(s: Seg, t: u32, o: u32, v0: f32, pad: bool) {
  xo[((t / 16u) * (s.n / 16u) + o / 16u) * 256u + (t % 16u) * 16u + o % 16u] = f16(select(activated(s, o, v0), 0.0, pad));
}
