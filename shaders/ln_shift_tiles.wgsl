// ln_shift.wgsl's mixed rows written once more, for the product that reads them next, as f16 16×16 blocks in the
// layout of sgtile_layout.wgsl (segment i's block (token block, input block) at i · padded rows · C + (tb · C/16 +
// kb) · 256 halves, 16 tokens × 16 inputs inside), so that tiled product runs without its tiling pass
// (mm_sgtile_x.wgsl): one dispatch fewer, and the mixes are not read back to be converted. The norm kernel is then
// dispatched over the padded rows, the rows past the batch writing zeros, as the tiling pass did. Every segment of
// that product reads a whole mix (C inputs): TILE_WRITES stores mix SEG_MIX[i] of the pair for segment i (generated,
// engine/rwkv7/norm-tiles.ts normTileWrites).
@group(0) @binding(9) var<storage, read_write> xt: array<u32>;
const TILE_TOKENS: u32 = {{TILE_TOKENS}}u;
// The f32 mixes too, where a product that does not take the blocks reads them.
const WRITE_ROWS: bool = {{WRITE_ROWS}};

/** Rows the norm kernel runs: the batch's tokens padded to the product's token tiles. */
fn tile_rows() -> u32 {
  return ((batch.T + TILE_TOKENS - 1u) / TILE_TOKENS) * TILE_TOKENS;
}

/** Inputs c and c + 1 (c even) of token t, mixes a and b, into every segment's blocks. */
fn write_tiles(t: u32, c: u32, a: array<f32, M>, b: array<f32, M>) {
  let prows = tile_rows();
  // Half index within a segment; c even, so the pair is one 32-bit word.
  let w = block_half(t, c, C) / 2u;
  let seg = prows * C / 2u;
  {{TILE_WRITES}}
}
