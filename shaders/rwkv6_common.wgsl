// Shared by the RWKV-5/6 kernels: the time-mix activations live in one buffer `tm` of TMAX*C-float regions.
struct Batch { T: u32, J: u32, R: u32, pad: u32 }
const C: u32 = {{C}}u;
const N: u32 = {{N}}u;
const REG: u32 = {{TMAX}}u * {{C}}u;
const R_: u32 = 0u;
const K_: u32 = 1u;
const V_: u32 = 2u;
const G_: u32 = 3u;
const W_: u32 = 4u;  // RWKV-6: the decay LoRA's output, added to time_decay
const Y_: u32 = 5u;  // the WKV output
const ML_: u32 = 6u; // RWKV-6: the 5 mix LoRA outputs (w, k, v, r, g)

fn sigmoid(v: f32) -> f32 { return 1.0 / (1.0 + exp(-v)); }
