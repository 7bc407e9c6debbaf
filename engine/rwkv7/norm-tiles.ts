// The norm + token-shift kernel writing the next product's f16 blocks (shaders/ln_shift_tiles.wgsl). A tiled
// product (mm_sgtile.wgsl) reads its activations as f16 16×16 blocks, which a tiling pass (mm_sgtile_x.wgsl) made
// from the f32 rows before each product: one more dispatch, and the rows read back once more. Where the rows are
// the norm kernel's mixes (the time mix's r/k/v group, with its first LoRAs in fused decode steps, and the FFN key),
// the norm kernel writes the blocks itself while it has the values, and the product runs without the pass.

/** What the norm kernel writes for the product after it: the mix each segment reads, and the product's token tiles. */
export interface NormTiles {
  segMix: number[];
  tileTokens: number;
}

/** ln_shift_tiles.wgsl's TILE_WRITES: segment i's word from mix segMix[i] of the column pair (a, b). */
export function normTileWrites(segMix: readonly number[]): string {
  return segMix.map((m, i) => `xt[${i}u * seg + w] = pack2x16float(vec2<f32>(a[${m}u], b[${m}u]));`).join('\n  ');
}

/** Workgroups (tokens) the norm kernel runs over for T tokens: with blocks, the rows padded to the product's tiles. */
export function normRows(T: number, tiles: NormTiles | null): number {
  return tiles ? Math.ceil(T / tiles.tileTokens) * tiles.tileTokens : T;
}
