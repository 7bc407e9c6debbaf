// Reduces logits rows on the GPU so sampling reads back CAP candidates instead of the vocabulary. Per row:
// mask the rows a grammar forbids (optional bitset), add the request's sparse adjustments (logit bias,
// repetition penalties), then write the row's max, its softmax normalizer and its CAP largest logits.
//
// Two dispatches of this file (engine/rwkv7/top-logits.ts), so a row is worked on by many workgroups at once; one
// 256-wide workgroup per row read the whole row itself and took ~230 µs a call on the H200 whatever the batch:
//   PHASE 1: (S, rows) workgroups, one per slice of SLICE entries of a row: masks and adjusts its slice in place, and
//            writes the slice's max, normalizer, finite count and CAP largest entries (unsorted) to `parts`.
//   PHASE 2: (rows) workgroups: the CAP largest of the S·CAP candidates of its row's slices, sorted, and the slices'
//            maxima and normalizers merged. The largest CAP of a row are among its slices' largest CAP.
// The CAP-th largest of a workgroup's entries is found exactly by a radix select over the order-preserving u32 form
// of the f32 values (one 8-bit digit per pass, four passes), so values crowding into a few exponents cost the same
// as any other.
//
// Output per row (STRIDE u32): [count, max (f32 bits), sum exp(x - max) (f32 bits), finite count,
// then count pairs (row, logit f32 bits)], best first, equal values by lower row: the candidates are sorted in
// workgroup memory (bitonic, CAP entries) so the CPU, which samples 64 rows a step at batch 64, need not.

// TopJob: shaders/top_job.wgsl.
@group(0) @binding(0) var<storage, read> jobs: array<TopJob>;
@group(0) @binding(1) var<storage, read> adjust: array<vec2u>; // (logit row, delta as f32 bits)
@group(0) @binding(2) var<storage, read_write> logits: array<f32>;
@group(0) @binding(3) var<storage, read_write> top: array<u32>;
@group(0) @binding(4) var<storage, read> allowed: array<u32>;
// Per (job, slice): PART words, [candidate count, max bits, normalizer bits, finite count, CAP keys, CAP rows].
@group(0) @binding(5) var<storage, read_write> parts: array<u32>;

const NO_MASK: u32 = 0xffffffffu;
// -inf's bits, as a variable: a constant bitcast to -inf is refused by the WGSL compiler.
var<private> NEG_INF_BITS: u32 = 0xff800000u;

const PHASE: u32 = {{PHASE}}u;
const WG: u32 = 256u;
const V: u32 = {{V}}u;
const CAP: u32 = {{CAP}}u;
const STRIDE: u32 = 4u + 2u * CAP;
const SLICE: u32 = {{SLICE}}u;
// Slices a row.
const S: u32 = (V + SLICE - 1u) / SLICE;
const PART: u32 = 4u + 2u * CAP;
// Copies of the histogram, copy c fed by invocations lid % COPIES = c, laid out bin-major (bin·COPIES + c): logits
// crowd into few digits (the top digit is sign and exponent), so the invocations of a subgroup mostly add to the same
// bin; in this layout those adds go to COPIES different words in COPIES different banks.
const COPIES: u32 = {{COPIES}}u;
// Entries an invocation loads before using the first (one load in flight each left the workgroup waiting on memory).
const U: u32 = 8u;

var<workgroup> hist: array<atomic<u32>, 256 * COPIES>;
var<workgroup> merged: array<u32, 256>;
var<workgroup> red_m: array<f32, WG>;
var<workgroup> red_s: array<f32, WG>;
var<workgroup> n_valid: atomic<u32>;
var<workgroup> n_finite: atomic<u32>;
var<workgroup> n_out: atomic<u32>;
var<workgroup> n_tie: atomic<u32>;
/** The taken candidates: keys (sort_key) and rows, sorted before they are written out (phase 2). */
var<workgroup> cand_k: array<u32, CAP>;
var<workgroup> cand_r: array<u32, CAP>;
/** (key prefix chosen so far, entries still to take at that prefix); need 0 = take every finite value. */
var<workgroup> sel: vec2u;

// Larger float, larger key. 0 for -inf and NaN: they are never candidates and carry no probability.
fn sort_key(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  if ((b & 0x7fffffffu) > 0x7f800000u || b == 0xff800000u) { return 0u; }
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}

fn clear_hist(lid: u32) {
  for (var c = 0u; c < COPIES; c++) { atomicStore(&hist[lid * COPIES + c], 0u); }
}

// Merge two (max, sum of exp(x - max)) pairs.
fn merge(a: vec2f, b: vec2f) -> vec2f {
  if (b.y == 0.0) { return a; }
  if (a.y == 0.0) { return b; }
  let m = max(a.x, b.x);
  return vec2f(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}

// Where entry i of this workgroup's set is: phase 1, the logit at `base` + i; phase 2, candidate i % CAP of slice
// i / CAP, its key at the returned word and its row CAP words after.
fn entry_at(base: u32, i: u32) -> u32 {
  if (PHASE == 1u) { return base + i; }
  return base + (i / CAP) * PART + 4u + i % CAP;
}

// The keys of entries i0, i0 + WG, ..., i0 + (U-1)·WG of n; 0 past the end. Every load is issued before any is used.
fn keys_u(base: u32, i0: u32, n: u32) -> array<u32, U> {
  var ks: array<u32, U>;
  for (var u = 0u; u < U; u++) {
    let i = i0 + u * WG;
    let at = entry_at(base, min(i, n - 1u));
    var k: u32;
    if (PHASE == 1u) { k = sort_key(logits[at]); } else { k = parts[at]; }
    ks[u] = select(0u, k, i < n);
  }
  return ks;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid3: vec3u) {
  let lid = lid3.x;
  // Phase 1: slice wid.x of job wid.y's row; phase 2: job wid.x.
  let jj = select(wid.x, wid.y, PHASE == 1u);
  let job = jobs[jj];
  let lo = select(0u, wid.x * SLICE, PHASE == 1u);
  let n = select(S * CAP, min(SLICE, V - lo), PHASE == 1u);
  let base = select(jj * S * PART, job.row * V + lo, PHASE == 1u);

  if (PHASE == 1u) {
    if (job.mask != NO_MASK) {
      for (var i = lid; i < n; i += WG) {
        let r = lo + i;
        if (((allowed[job.mask + (r >> 5u)] >> (r & 31u)) & 1u) == 0u) { logits[base + i] = bitcast<f32>(NEG_INF_BITS); }
      }
    }
    // The adjustments below touch rows other invocations may have just masked (outside the branch: barriers
    // must be in uniform control flow, and a value read from storage is not uniform to the compiler).
    storageBarrier();
    // Each slice adds the adjustments of its own rows (a row appears once in a job's list: TopLogitsReducer.check).
    for (var i = lid; i < job.adj_count; i += WG) {
      let a = adjust[job.adj_off + i];
      if (a.x >= lo && a.x < lo + n) { logits[job.row * V + a.x] += bitcast<f32>(a.y); }
    }
  }
  clear_hist(lid);
  if (lid == 0u) {
    atomicStore(&n_valid, 0u);
    atomicStore(&n_finite, 0u);
    atomicStore(&n_out, 0u);
    atomicStore(&n_tie, 0u);
  }
  storageBarrier();
  workgroupBarrier();

  // The histogram of the keys' top digit; phase 1 also the online max and normalizer of its slice, phase 2 merges
  // its slices' (below).
  let copy = lid % COPIES;
  var ms = vec2f(0.0, 0.0);
  var count = 0u;
  for (var i0 = lid; i0 < n; i0 += U * WG) {
    // Phase 1 keeps the values too, for the normalizer (phase 2's keys are all it reads).
    var xs: array<f32, U>;
    var ks: array<u32, U>;
    if (PHASE == 1u) {
      for (var u = 0u; u < U; u++) {
        let i = i0 + u * WG;
        xs[u] = select(bitcast<f32>(NEG_INF_BITS), logits[base + min(i, n - 1u)], i < n);
      }
      for (var u = 0u; u < U; u++) { ks[u] = sort_key(xs[u]); }
    } else {
      ks = keys_u(base, i0, n);
    }
    for (var u = 0u; u < U; u++) {
      let k = ks[u];
      if (k == 0u) { continue; }
      count += 1u;
      atomicAdd(&hist[(k >> 24u) * COPIES + copy], 1u);
      if (PHASE == 1u) {
        let x = xs[u];
        if (ms.y == 0.0) { ms = vec2f(x, 1.0); }
        else if (x > ms.x) { ms = vec2f(x, ms.y * exp(ms.x - x) + 1.0); }
        else { ms.y += exp(x - ms.x); }
      }
    }
  }
  atomicAdd(&n_valid, count);
  if (PHASE == 2u && lid < S) {
    let p = jj * S * PART + lid * PART;
    ms = vec2f(bitcast<f32>(parts[p + 1u]), bitcast<f32>(parts[p + 2u]));
    atomicAdd(&n_finite, parts[p + 3u]);
  }
  red_m[lid] = ms.x;
  red_s[lid] = ms.y;
  workgroupBarrier();
  for (var w = WG / 2u; w > 0u; w = w >> 1u) {
    if (lid < w) {
      let r = merge(vec2f(red_m[lid], red_s[lid]), vec2f(red_m[lid + w], red_s[lid + w]));
      red_m[lid] = r.x;
      red_s[lid] = r.y;
    }
    workgroupBarrier();
  }

  if (lid == 0u) {
    let valid = atomicLoad(&n_valid);
    sel = vec2u(0u, select(0u, CAP, valid > CAP));
  }
  var st = workgroupUniformLoad(&sel);
  if (st.y > 0u) {
    for (var level = 0u; level < 4u; level++) {
      let shift = 24u - 8u * level;
      if (level > 0u) {
        clear_hist(lid);
        workgroupBarrier();
        let high = st.x >> (shift + 8u);
        for (var i0 = lid; i0 < n; i0 += U * WG) {
          let ks = keys_u(base, i0, n);
          for (var u = 0u; u < U; u++) {
            let k = ks[u];
            if (k != 0u && (k >> (shift + 8u)) == high) { atomicAdd(&hist[((k >> shift) & 255u) * COPIES + copy], 1u); }
          }
        }
        workgroupBarrier();
      }
      var total = 0u;
      for (var c = 0u; c < COPIES; c++) { total += atomicLoad(&hist[lid * COPIES + c]); }
      merged[lid] = total;
      workgroupBarrier();
      // merged[d] becomes the count of digits d and above (a scan: one invocation walking the digits down was most
      // of a workgroup's time once its entries were few).
      for (var off = 1u; off < 256u; off <<= 1u) {
        let add = select(0u, merged[min(lid + off, 255u)], lid + off < 256u);
        workgroupBarrier();
        merged[lid] += add;
        workgroupBarrier();
      }
      // The digit holding the need-th largest key (counting from the top) among those with this prefix: the one whose
      // count from the top reaches need and whose next does not (digit 0 when none reaches it).
      let above = select(0u, merged[min(lid + 1u, 255u)], lid < 255u);
      if ((merged[lid] >= st.y || lid == 0u) && above < st.y) { sel = vec2u(st.x | (lid << shift), st.y - above); }
      st = workgroupUniformLoad(&sel);
    }
  }

  // st.x is now the key of the CAP-th largest value: take every key above it and st.y of those equal to it.
  for (var i0 = lid; i0 < n; i0 += U * WG) {
    let ks = keys_u(base, i0, n);
    for (var u = 0u; u < U; u++) {
      let k = ks[u];
      var take = k > st.x;
      if (!take && k == st.x && st.y > 0u) { take = atomicAdd(&n_tie, 1u) < st.y; }
      if (take) {
        let i = i0 + u * WG;
        let j = atomicAdd(&n_out, 1u);
        cand_k[j] = k;
        if (PHASE == 1u) { cand_r[j] = lo + i; } else { cand_r[j] = parts[entry_at(base, i) + CAP]; }
      }
    }
  }
  workgroupBarrier();
  // Unused entries sort last (key 0 is below every candidate's).
  let taken = atomicLoad(&n_out);
  for (var e = lid; e < CAP; e += WG) {
    if (e >= taken) {
      cand_k[e] = 0u;
      cand_r[e] = 0xffffffffu;
    }
  }
  workgroupBarrier();

  if (PHASE == 1u) {
    // The slice's part: its candidates as taken (phase 2 selects among all slices' and sorts), unused keys 0.
    let p = (jj * S + wid.x) * PART;
    for (var e = lid; e < CAP; e += WG) {
      parts[p + 4u + e] = cand_k[e];
      parts[p + 4u + CAP + e] = cand_r[e];
    }
    if (lid == 0u) {
      parts[p] = taken;
      parts[p + 1u] = bitcast<u32>(red_m[0]);
      parts[p + 2u] = bitcast<u32>(red_s[0]);
      parts[p + 3u] = atomicLoad(&n_valid);
    }
    return;
  }

  // A bitonic sort into best-first order.
  for (var size = 2u; size <= CAP; size <<= 1u) {
    for (var half = size >> 1u; half > 0u; half >>= 1u) {
      for (var e = lid; e < CAP; e += WG) {
        let p = e ^ half;
        if (p > e) {
          // In blocks with bit `size` clear the pair goes best first, in the others worst first.
          let p_first = cand_k[p] > cand_k[e] || (cand_k[p] == cand_k[e] && cand_r[p] < cand_r[e]);
          if (p_first == ((e & size) == 0u)) {
            let k = cand_k[e];
            let r = cand_r[e];
            cand_k[e] = cand_k[p];
            cand_r[e] = cand_r[p];
            cand_k[p] = k;
            cand_r[p] = r;
          }
        }
      }
      workgroupBarrier();
    }
  }
  let out0 = job.out * STRIDE;
  for (var e = lid; e < taken; e += WG) {
    let k = cand_k[e];
    top[out0 + 4u + 2u * e] = cand_r[e];
    // sort_key inverted: the value's own bits.
    top[out0 + 5u + 2u * e] = select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u);
  }
  if (lid == 0u) {
    top[out0] = taken;
    top[out0 + 1u] = bitcast<u32>(red_m[0]);
    top[out0 + 2u] = bitcast<u32>(red_s[0]);
    top[out0 + 3u] = atomicLoad(&n_finite);
  }
}
