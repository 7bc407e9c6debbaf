// rwkv7_post.wgsl's results written once more as the output product's f16 blocks (sgtile_layout.wgsl, one segment
// of C inputs), so that product runs without its tiling pass (engine/rwkv7/norm-tiles.ts). A lane holds one column:
// the head's values meet in workgroup memory and the even lanes write the pairs. Dispatched over the padded rows,
// the rows past the batch writing zeros.
@group(0) @binding(4) var<storage, read_write> xt: array<u32>;
var<workgroup> pair: array<f32, N>;

/** Column c (lane i of the head) of token t, value v: into the blocks, two neighbouring columns a word. */
fn write_tiles(t: u32, c: u32, i: u32, v: f32) {
  pair[i] = v;
  workgroupBarrier();
  if (i % 2u == 0u) {
    xt[block_half(t, c, C) / 2u] = pack2x16float(vec2<f32>(pair[i], pair[i + 1u]));
  }
}
