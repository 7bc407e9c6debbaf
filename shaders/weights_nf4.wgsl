// Weight access for NF4 weights (engine/quant/nf4-blocks.ts): 8 codes of 4 bits a word, element j of a word in
// bits 4j..4j+3, and one f16 absmax per 64 weights of the group's flat array, from word grp.p0, two a word. A
// block is 8 words, so the 8 weights of one load share one absmax.
@group(0) @binding(1) var<storage, read> W: array<u32>;
const NF4 = array<f32, 16>(
  -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334,
  -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
  0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0);
fn load_w8(i: u32) -> mat2x4<f32> {
  let p = W[i];
  let block = i / 8u;
  let a = unpack2x16float(W[grp.p0 + block / 2u])[block % 2u];
  let lo = vec4<f32>(NF4[p & 15u], NF4[(p >> 4u) & 15u], NF4[(p >> 8u) & 15u], NF4[(p >> 12u) & 15u]);
  let hi = vec4<f32>(NF4[(p >> 16u) & 15u], NF4[(p >> 20u) & 15u], NF4[(p >> 24u) & 15u], NF4[p >> 28u]);
  return mat2x4<f32>(lo * a, hi * a);
}
fn weight_row_scale(vrow: u32) -> f32 { return 1.0; }
