// The static token shift of RWKV-4 and RWKV-5: xx*mix + prev*(1 - mix) = xx + (prev - xx)*(1 - mix). The shift
// kernels (GPU ln_shift, CPU lnShift) compute the right-hand form, so both backends store 1 - mix.

/** 1 - mix for each channel: what the shift kernels read for a static mix vector. */
export function oneMinus(mix: Float32Array): Float32Array {
  return Float32Array.from(mix, (m) => 1 - m);
}
