// rwkv7_tmix_decode.wgsl's results written once more as the output product's f16 blocks (sgtile_layout.wgsl, one
// segment of C inputs), so that product runs without its tiling pass (engine/rwkv7/norm-tiles.ts). The lead lane of
// each channel holds its value: the head's values meet in workgroup memory, then N/2 lanes write the pairs. Dispatched
// over the padded rows (one token a job in decode, so the rows past the jobs), those writing zeros.
@group(0) @binding(11) var<storage, read_write> xt: array<u32>;
var<workgroup> hy: array<f32, N>;

/** Word of the head's columns 2p, 2p + 1 of token t in the blocks. */
fn tile_word(t: u32, h: u32, p: u32) -> u32 {
  let c = h * N + 2u * p;
  return block_half(t, c, C) / 2u;
}

/** A padded row: zeros in the head's columns. */
fn write_zero_tiles(t: u32, h: u32, lid: u32) {
  if (lid < N / 2u) { xt[tile_word(t, h, lid)] = 0u; }
}

/** Channel i's value v (from its lead lane) into the blocks. */
fn write_tiles(t: u32, h: u32, i: u32, lid: u32, v: f32, lead: bool) {
  if (lead) { hy[i] = v; }
  workgroupBarrier();
  if (lid < N / 2u) { xt[tile_word(t, h, lid)] = pack2x16float(vec2<f32>(hy[2u * lid], hy[2u * lid + 1u])); }
}
