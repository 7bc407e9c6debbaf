// Matrix product on subgroup matrices reading both operands straight from storage: the activations as f16 16×16
// blocks that mm_sgtile_x.wgsl wrote (one contiguous 512-byte load per left matrix, sgtile_layout.wgsl), the
// weights row-major ([out, in], so the right operand column-major with stride K). A workgroup of SGM × SGN
// subgroups computes BM = 16·MT·SGM tokens × BN = 16·NT·SGN outputs; subgroup (m, n) owns MT×NT result tiles.
// No workgroup memory at all: against mm_sgstage.wgsl, which copies both tiles there one f16 at a time, 1.8× faster
// on the 1.5B 2048² product at 512 tokens on the H200 (94 against 168 µs; bench/RESULTS.md "Tiled activations").
// The K range (SPLIT ranges, or all of K when SPLIT is 1) and the partial sums come from mm_split.wgsl. The loop
// bodies are generated per tile shape (the placeholders in double braces, engine/rwkv7/sgtile-code.ts) as straight-line code on
// named matrices: with arrays of matrices and loops over them, 4×4 tiles a subgroup ran slower, not faster.
// Offsets depend on subgroup_id, uniform within a subgroup (what the matrix operations need) but not within a
// workgroup (what the default uniformity check proves), hence the diagnostic.
enable subgroups;
enable chromium_experimental_subgroup_matrix;
diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);

const MT: u32 = {{MT}}u;
const NT: u32 = {{NT}}u;
const SGM: u32 = {{SGM}}u;
const SGN: u32 = {{SGN}}u;
/** Subgroups of one K slice: SGM × SGN, each owning MT×NT result tiles. */
const SGS: u32 = SGM * SGN;
/**
 * K slices a workgroup (engine/rwkv7/tiled-slices.ts): SK groups of SGS subgroups share the workgroup's result tiles,
 * each summing one slice of its K range; their sums meet in workgroup memory before the stores.
 */
const SK: u32 = {{SK}}u;
/** Steps of 16 inputs whose matrices are loaded together (engine/rwkv7/tiled-unroll.ts). */
const KU: u32 = {{KU}}u;
const BM: u32 = 16u * MT * SGM;
const BN: u32 = 16u * NT * SGN;

@group(0) @binding(6) var<storage, read> xt: array<f16>;
{{SHARED}}

@compute @workgroup_size(32u * SGS * SK)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32) {
  var si = 0u;
  for (var i = 1u; i < grp.count; i++) {
    if (wid.x * BN >= grp.segs[i].row0) { si = i; }
  }
  let s = grp.segs[si];
  // The segment's width and the offsets pass through subgroupBroadcastFirst, which tells the compiler they are
  // uniform within the subgroup (the matrix operations need that). On the H200 this measured the same as without it
  // (bench/RESULTS.md "Tiled activations", run 9); it is kept because the figures were taken with it.
  let k = subgroupBroadcastFirst(s.k);
  // The workgroup's first output row within its segment and first token.
  let o0 = wid.x * BN - s.row0;
  let t0 = wid.y * BM;
  // The subgroup's K slice, and its place among the slice's subgroups.
  let q = sg / SGS;
  let sm = (sg % SGS) / SGN;
  let sn = sg % SGN;
  let kblocks = k / 16u;
  let xbase = subgroupBroadcastFirst(tile_base(si) + (t0 / 16u + sm * MT) * kblocks * 256u);
  let wbase = subgroupBroadcastFirst(w_tile_at(s, o0 + sn * NT * 16u, 0u));
  let span = k_slice(k, wid.z * SK + q, SPLIT * SK, 16u);
  // Where the subgroup's first result tile goes (sgtile_layout.wgsl), computed before the K loop.
  let part0 = subgroupBroadcastFirst(part_index(wid.z, t0 + sm * MT * 16u, wid.x * BN + sn * NT * 16u));
  let pstride = part_stride();
  let wstride = w_tile_stride(s);
  // From one of the subgroup's weight tiles to the next 16 outputs on (wlayout_*.wgsl).
  let wstrip = subgroupBroadcastFirst(w_strip_step(s));
  // The loops' bodies are generated (engine/rwkv7/sgtile-code.ts): one named variable per matrix, no arrays.
  {{ACCUMULATORS}}
  // KU steps of 16 inputs a trip: every left and right matrix of the trip is loaded before any is multiplied, so a
  // subgroup's loads are in flight together instead of one round trip to memory per step of 16 (pipelined, the next
  // trip's loads also overlap this trip's multiplies: engine/rwkv7/tiled-pipeline.ts); then one step at a time for
  // the rest of the range. Rows past the segment read its neighbour's weights (or are clamped at the buffer's end):
  // their results are never stored.
  {{K_LOOP}}
  // Split, results go straight to the partial sums as whole 16×16 tiles, and mm_split_reduce.wgsl applies activation,
  // accumulation and bounds; unsplit, they are stored here as it would store them (sgtile-code.ts). (The partial
  // sums' address once went through row_count() while it had a branch: that alone ran the 2048² product at 512
  // tokens at 175 µs instead of 94 on the H200; row_count() is branch-free now.)
  {{STORES}}
}
