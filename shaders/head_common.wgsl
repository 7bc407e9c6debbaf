// Per-head workgroup helpers shared by the RWKV-7 time-mix kernels (one workgroup = one head, N lanes).
// The time-mix activations live in one buffer `tm` of TMAX*C-float regions, so a kernel needs few bindings.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
const C: u32 = {{C}}u;
const N: u32 = {{N}}u;
const REG: u32 = {{TMAX}}u * {{C}}u;
const R_: u32 = 0u;
const W_: u32 = 1u;
const K_: u32 = 2u;
const V_: u32 = 3u;
const A_: u32 = 4u;  // after prep: kk * a, the state's removal weight
const G_: u32 = 5u;
const KK_: u32 = 6u;
const Y_: u32 = 7u;
const VL_: u32 = 8u; // v LoRA output (layers > 0)
// Sums over a head's lanes: wg_sum (wg_sum.wgsl, with WG = N).

fn sigmoid(v: f32) -> f32 { return 1.0 / (1.0 + exp(-v)); }
