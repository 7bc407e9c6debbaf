// Where element (token t, input col) of a `width`-wide row lies among f16 16×16 blocks (sgtile_layout.wgsl describes
// the layout: block (t/16, col/16) at its index · 256 halves, 16 tokens × 16 inputs inside). The one definition every
// writer of the blocks uses: the tiling pass (mm_sgtile_x.wgsl) and the kernels that write them ahead of a product
// (ln_shift_tiles, post_tiles, tmix_tiles, sgtile_blocks_out).
fn block_half(t: u32, col: u32, width: u32) -> u32 {
  return ((t / 16u) * (width / 16u) + col / 16u) * 256u + (t % 16u) * 16u + col % 16u;
}
