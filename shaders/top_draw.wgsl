// Draws each row's next token from its 'top' result (shaders/top_logits.wgsl) on the GPU, so decode steps can run
// back to back without a readback (engine/rwkv7/top-draw.ts TopDrawer). One workgroup of LANES invocations a row;
// rows share nothing. The lanes compute the candidates' probabilities and weights, and decay and rewrite the row's
// penalty pairs, side by side; the sums over candidates stay on lane 0, in the order one lane took them all before
// (LANES = 1 is that form), so every bit is the same. One lane walking a row's pairs (hundreds after a long
// generation with ai00's default penalties) and its 256 candidates made the draw a chain of dependent loads.
//
// The draw is the host's (engine/samplers/token-sampler.ts sampleTop: greedy, or nucleus through
// probability.ts drawUntilMass) in f32, in the same order, so the same uniform gives the same row up to rounding.
// Then the row's presence / frequency penalties (engine/samplers/penalties.ts) are updated in the reducer's adjust
// pairs, which the next step's reduction adds to the logits.

// TopJob: shaders/top_job.wgsl.
// Parallel to the reducer's adjust pairs: the pair's delta is bias - penalty; penalized: the row was drawn (or came
// with a penalty), so a later draw adds the frequency, not the presence, penalty.
struct PairState { bias: f32, penalty: f32, penalized: u32 }

@group(0) @binding(0) var<storage, read_write> jobs: array<TopJob>;
@group(0) @binding(1) var<storage, read_write> adjust: array<vec2u>; // (logit row, delta as f32 bits)
@group(0) @binding(2) var<storage, read> top: array<u32>;
@group(0) @binding(3) var<storage, read_write> pairs: array<PairState>;
// [rows n, steps, -, -], then n rows of PARAM words, then steps·n uniforms (step-major): one read buffer for both,
// to stay within 8 storage buffers.
@group(0) @binding(4) var<storage, read> args: array<u32>;
// [MAX_ROWS step counters, then the drawn rows, step-major]: one read_write buffer for both, as above.
@group(0) @binding(5) var<storage, read_write> state: array<u32>;
// The forward's token ids: the drawn row is the next step's input.
@group(0) @binding(6) var<storage, read_write> ids: array<u32>;

const CAP: u32 = {{CAP}}u;
const STRIDE: u32 = 4u + 2u * CAP;
const MAX_ROWS: u32 = {{MAX_ROWS}}u;
const PARAM: u32 = 8u;
const NONE: u32 = 0xffffffffu;
const LANES: u32 = {{LANES}}u;
// engine/samplers/probability.ts LOG_CUTOFF: rows further below the max carry no probability.
const LOG_CUTOFF: f32 = 30.0;

fn logit(base: u32, j: u32) -> f32 { return bitcast<f32>(top[base + 5u + 2u * j]); }

// What lane 0 read or decided, for every lane (through workgroupUniformLoad).
var<workgroup> w_step: u32;
var<workgroup> w_job: TopJob;
var<workgroup> w_drawn: u32;
var<workgroup> w_count: u32;
// The first candidate below the cutoff, then the pair holding the drawn row (atomicMin over the lanes).
var<workgroup> w_first: atomic<u32>;
// Candidates' probabilities p_j, then their weights (p_j / p_0)^(1/T).
var<workgroup> w_p: array<f32, CAP>;

@compute @workgroup_size(LANES)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_index) lid: u32) {
  let i = wid.x;
  let n = args[0];
  let steps = args[1];
  if (i >= n) { return; }
  if (lid == 0u) {
    w_step = state[i];
    w_job = jobs[i];
    atomicStore(&w_first, NONE);
  }
  let s = workgroupUniformLoad(&w_step);
  // Past the prepared steps there is no uniform and no room: nothing to do (TopDrawer.encode refuses this).
  if (s >= steps) { return; }
  let job = workgroupUniformLoad(&w_job);
  if (lid == 0u) { state[i] = s + 1u; }

  let p = 4u + i * PARAM;
  let ids_at = args[p];
  let top_k = args[p + 1u];
  let temperature = bitcast<f32>(args[p + 2u]);
  let top_p = bitcast<f32>(args[p + 3u]);
  let presence = bitcast<f32>(args[p + 4u]);
  let frequency = bitcast<f32>(args[p + 5u]);
  let decay = bitcast<f32>(args[p + 6u]);
  let room = args[p + 7u];
  let u = bitcast<f32>(args[4u + n * PARAM + s * n + i]);

  let base = job.out * STRIDE;
  let count = top[base];
  var drawn = NONE;
  if (count > 0u && top[base + 3u] > 0u) {
    if (temperature == 0.0) {
      drawn = top[base + 4u];
    } else {
      let mx = bitcast<f32>(top[base + 1u]);
      let log_z = log(bitcast<f32>(top[base + 2u]));
      // Candidates: the prefix within LOG_CUTOFF of the max (the top is best first), then the first top_k of them.
      let floor = mx - LOG_CUTOFF;
      for (var j = lid; j < count; j += LANES) {
        if (!(logit(base, j) >= floor)) { atomicMin(&w_first, j); }
      }
      workgroupBarrier();
      let nc = min(count, atomicLoad(&w_first));
      let k = min(top_k, nc);
      for (var j = lid; j < k; j += LANES) { w_p[j] = exp(logit(base, j) - mx - log_z); }
      workgroupBarrier();
      // Take candidates until their mass passes top_p; the one crossing it is kept, and at least one is.
      var kept = 0u;
      if (lid == 0u) {
        var cum = 0.0;
        while (kept < k && cum <= top_p) {
          cum += w_p[kept];
          kept++;
        }
        w_count = max(kept, 1u);
      }
      kept = workgroupUniformLoad(&w_count);
      // Weights p^(1/T), taken relative to the best candidate's p: the same shares, but a small T cannot underflow
      // them all to 0 in f32 (the host's f64 does not underflow there).
      let inv_t = 1.0 / temperature;
      let p0 = exp(logit(base, 0u) - mx - log_z);
      for (var j = lid; j < kept; j += LANES) { w_p[j] = pow(w_p[j] / p0, inv_t); }
      workgroupBarrier();
      if (lid == 0u) {
        var sum = 0.0;
        for (var j = 0u; j < kept; j++) { sum += w_p[j]; }
        var pick = 0u;
        if (sum > 0.0) {
          pick = kept - 1u;
          var c = 0.0;
          for (var j = 0u; j < kept; j++) {
            c += w_p[j] / sum;
            if (u <= c) {
              pick = j;
              break;
            }
          }
        }
        w_drawn = top[base + 4u + 2u * pick];
      }
      drawn = workgroupUniformLoad(&w_drawn);
    }
  }
  if (lid == 0u) {
    state[MAX_ROWS + s * n + i] = drawn;
    if (drawn != NONE) { ids[ids_at] = drawn; }
  }
  if (drawn == NONE) { return; }
  if (presence == 0.0 && frequency == 0.0) { return; }

  // Penalties for the next step: every one decays, then the drawn row's grows.
  let cnt = job.adj_count;
  atomicStore(&w_first, NONE);
  workgroupBarrier();
  for (var j = lid; j < cnt; j += LANES) {
    let q = job.adj_off + j;
    pairs[q].penalty *= decay;
    if (adjust[q].x == drawn) { atomicMin(&w_first, j); }
  }
  // The decayed pairs are read again below by other lanes.
  storageBarrier();
  workgroupBarrier();
  if (lid == 0u) {
    let at = min(atomicLoad(&w_first), cnt);
    var c = cnt;
    if (at == cnt && cnt < room) {
      // Not in the segment yet: a new pair in the room prepare left after it.
      pairs[job.adj_off + cnt] = PairState(0.0, presence, 1u);
      adjust[job.adj_off + cnt] = vec2u(drawn, 0u);
      c++;
      jobs[i].adj_count = c;
    } else if (at < cnt) {
      let q = job.adj_off + at;
      // A row carrying only a bias has no penalty yet: the presence penalty is its first.
      pairs[q].penalty += select(presence, frequency, pairs[q].penalized != 0u);
      pairs[q].penalized = 1u;
    }
    w_count = c;
  }
  storageBarrier();
  let all = workgroupUniformLoad(&w_count);
  for (var j = lid; j < all; j += LANES) {
    let q = job.adj_off + j;
    adjust[q].y = bitcast<u32>(pairs[q].bias - pairs[q].penalty);
  }
}
