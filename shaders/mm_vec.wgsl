// Matrix-vector product for a few tokens (decode): LPR lanes per output row (256 / LPR rows per workgroup), each
// lane reading consecutive 16-byte chunks of the row LPR chunks apart, TB tokens per pass so each weight is read
// once per TB tokens. More lanes a row give a product of few rows more workgroups and more loads in flight: at
// batch 1, a 2048-row product in 8-row workgroups filled only two workgroups per compute unit of a 132-unit GPU.
// The lanes of a row are summed with subgroupAdd where subgroups are 32 wide (then across the row's subgroups in
// shared memory), else in shared memory alone.
const TB: u32 = {{TB}}u;
const TQ: u32 = TB / 4u;
const LPR: u32 = {{LPR}}u;
/** Weight loads a lane issues together (engine/rwkv7/vec-loads.ts). */
const LOADS: u32 = {{LOADS}}u;
const RPW: u32 = 256u / LPR;
/** Inputs between a lane's consecutive chunks. */
const STRIDE: u32 = LPR * 8u;
var<workgroup> red: array<array<f32, 256>, TB>;

fn lane_sum(v: vec4<f32>, lid: u32, lane: u32, q: u32) -> vec4<f32> {
  if (SUBGROUP32) {
    let w = row_subgroup_sum(v);
    if (LPR == 32u) { return w; }
    // One partial sum per subgroup of the row, then the row's subgroups summed (uniform control flow throughout;
    // each q has its own rows of red, so no barrier is needed before the writes).
    if (lid % 32u == 0u) {
      for (var tt = 0u; tt < 4u; tt++) { red[q * 4u + tt][lid / 32u] = w[tt]; }
    }
    workgroupBarrier();
    var sum = vec4<f32>(0.0);
    let first = (lid / LPR) * (LPR / 32u);
    for (var i = 0u; i < LPR / 32u; i++) {
      sum += vec4<f32>(red[q * 4u][first + i], red[q * 4u + 1u][first + i], red[q * 4u + 2u][first + i], red[q * 4u + 3u][first + i]);
    }
    return sum;
  }
  for (var tt = 0u; tt < 4u; tt++) { red[q * 4u + tt][lid] = v[tt]; }
  workgroupBarrier();
  for (var s = LPR / 2u; s > 0u; s = s >> 1u) {
    if (lane < s) {
      for (var tt = 0u; tt < 4u; tt++) { red[q * 4u + tt][lid] += red[q * 4u + tt][lid + s]; }
    }
    workgroupBarrier();
  }
  return vec4<f32>(red[q * 4u][lid], red[q * 4u + 1u][lid], red[q * 4u + 2u][lid], red[q * 4u + 3u][lid]);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  let lane = lid % LPR;
  let s = find_seg(wid.x * RPW);
  let o = wid.x * RPW + lid / LPR - s.row0;
  let rows = row_count();
  let t0 = wid.y * TB;
  var acc: array<vec4<f32>, TQ>;
  if (o < s.n) {
    var k = lane * 8u;
    // LOADS weight loads a trip, all issued before any is used: a lane's loads are then in flight together
    // instead of one round trip to memory each (the read probe needs 4 a trip to pass 4 TB/s from 264
    // workgroups; bench/RESULTS.md "Device facts").
    for (; k + (LOADS - 1u) * STRIDE < s.k; k += LOADS * STRIDE) {
      var m: array<mat2x4<f32>, LOADS>;
      for (var u = 0u; u < LOADS; u++) { m[u] = load_w8(w8_at(s, o, k + u * STRIDE)); }
      for (var tt = 0u; tt < TB; tt++) {
        if (t0 + tt < rows) {
          let xi = s.x_off + ((t0 + tt) * s.k + k) / 4u;
          var d = 0.0;
          for (var u = 0u; u < LOADS; u++) {
            d += dot(m[u][0], x[xi + u * (STRIDE / 4u)]) + dot(m[u][1], x[xi + u * (STRIDE / 4u) + 1u]);
          }
          acc[tt / 4u][tt % 4u] += d;
        }
      }
    }
    for (; k < s.k; k += STRIDE) {
      let m = load_w8(w8_at(s, o, k));
      for (var tt = 0u; tt < TB; tt++) {
        if (t0 + tt < rows) {
          let xi = s.x_off + ((t0 + tt) * s.k + k) / 4u;
          acc[tt / 4u][tt % 4u] += dot(m[0], x[xi]) + dot(m[1], x[xi + 1u]);
        }
      }
    }
  }
  for (var q = 0u; q < TQ; q++) {
    let total = lane_sum(acc[q], lid, lane, q);
    if (lane == 0u && o < s.n) {
      for (var tt = 0u; tt < 4u; tt++) {
        let t = t0 + q * 4u + tt;
        if (t < rows) { store(s, t, o, total[tt]); }
      }
    }
  }
}
