// Matrix-vector product for a few tokens (decode) over weights stored as 16×16 blocks (wlayout_blocks.wgsl or
// wlayout_input_blocks.wgsl): the streaming kernel of mm_vec.wgsl rearranged so a subgroup's load stays
// contiguous. mm_vec gives each row a subgroup whose 32 lanes read 512 contiguous bytes of it; over blocks a row is
// 32 bytes a block, so those lanes touched 16 lines, and 0.1B decode at batch 1 ran 20% slower on the H200
// (bench/RESULTS.md "Weights as blocks"). Here a workgroup owns 8 rows (half a strip), as mm_vec does, and a
// subgroup reads two blocks' 8-row halves at once: lane (sub, r, h) loads 8 weights of row r, half h of block
// 2·warp + sub (+ 16 a round) — two runs of 256 contiguous bytes. The 8 subgroups share K; a row's 32 partial sums
// (8 subgroups × 2 blocks × 2 halves) are added in workgroup memory at the end. TB tokens a pass, each weight read
// once per TB tokens.
const TB: u32 = {{TB}}u;
const TQ: u32 = TB / 4u;
/** Blocks a lane loads together (engine/rwkv7/vec-loads.ts). */
const LOADS: u32 = {{LOADS}}u;
var<workgroup> red: array<array<f32, 256>, TB>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let s = find_seg(wid.x * 8u);
  // The workgroup's first row within its segment (a multiple of 8; segment widths are multiples of 16).
  let o0 = wid.x * 8u - s.row0;
  let rows = row_count();
  let t0 = wid.y * TB;
  let warp = lid / 32u;
  let lane = lid % 32u;
  let sub = lane / 16u;
  let r = (lane % 16u) / 2u;
  let h = lane % 2u;
  var acc: array<vec4<f32>, TQ>;
  if (o0 < s.n) {
    let kblocks = s.k / 16u;
    // This lane's 8 weights in block 0 of its strip (wlayout_blocks.wgsl, units of 8 weights): row o0 + r, half h.
    // Block kb is kb · w8_kblock_step further on (32 units, 256 weights, strip by strip).
    let base = w8_at(s, o0 + r, h * 8u);
    let kstep = w8_kblock_step(s);
    // LOADS blocks a trip (kb, kb + 16, ...), all loaded before any is used, so a lane's loads are in flight
    // together (engine/rwkv7/vec-loads.ts); then one block at a time for the rest.
    var kb = warp * 2u + sub;
    for (; kb + 16u * (LOADS - 1u) < kblocks; kb += 16u * LOADS) {
      var m: array<mat2x4<f32>, LOADS>;
      for (var u = 0u; u < LOADS; u++) { m[u] = load_w8(base + (kb + 16u * u) * kstep); }
      for (var tt = 0u; tt < TB; tt++) {
        if (t0 + tt < rows) {
          let xi = s.x_off + ((t0 + tt) * s.k + kb * 16u + h * 8u) / 4u;
          var d = 0.0;
          for (var u = 0u; u < LOADS; u++) { d += dot(m[u][0], x[xi + 64u * u]) + dot(m[u][1], x[xi + 64u * u + 1u]); }
          acc[tt / 4u][tt % 4u] += d;
        }
      }
    }
    for (; kb < kblocks; kb += 16u) {
      let m = load_w8(base + kb * kstep);
      for (var tt = 0u; tt < TB; tt++) {
        if (t0 + tt < rows) {
          let xi = s.x_off + ((t0 + tt) * s.k + kb * 16u + h * 8u) / 4u;
          acc[tt / 4u][tt % 4u] += dot(m[0], x[xi]) + dot(m[1], x[xi + 1u]);
        }
      }
    }
  }
  for (var q = 0u; q < TQ; q++) {
    for (var tt = 0u; tt < 4u; tt++) { red[q * 4u + tt][lid] = acc[q][tt]; }
  }
  workgroupBarrier();
  if (lid < 8u * TB && o0 < s.n) {
    let rr = lid % 8u;
    let tt = lid / 8u;
    var sum = 0.0;
    for (var w = 0u; w < 8u; w++) {
      let at = w * 32u + rr * 2u;
      sum += red[tt][at] + red[tt][at + 1u] + red[tt][at + 16u] + red[tt][at + 17u];
    }
    if (t0 + tt < rows) { store(s, t0 + tt, o0 + rr, sum); }
  }
}
