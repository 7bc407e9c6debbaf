// Per-output-row int8 quantization of the CPU backend's matrices (precision 'int8', issue #15's scheme): each
// row r keeps scale[r] = max|w[r][i]| / 127 and q[r][i] = round(w[r][i] / scale[r]), so w ≈ q * scale with an
// error of at most scale[r] / 2 per weight. A row of zeros keeps scale 0 and q 0.

/** Quantizes rows of k values; `at(r, i)` reads w[r][i] (the caller's storage may be [out, in] or [in, out]). */
export function quantizeRowsInt8(n: number, k: number, at: (r: number, i: number) => number): { q: Int8Array; scales: Float32Array } {
  const q = new Int8Array(n * k);
  const scales = new Float32Array(n);
  for (let r = 0; r < n; r++) {
    let max = 0;
    for (let i = 0; i < k; i++) max = Math.max(max, Math.abs(at(r, i)));
    // The scale as stored (f32), so the quantized values are computed against what the kernel multiplies by.
    const scale = Math.fround(max / 127);
    scales[r] = scale;
    if (scale === 0) continue;
    for (let i = 0; i < k; i++) q[r * k + i] = Math.max(-127, Math.min(127, Math.round(at(r, i) / scale)));
  }
  return { q, scales };
}

/** w[r][i] as the kernels see it: q * scale. */
export function dequantizeRowsInt8(q: Int8Array, scales: Float32Array, k: number): Float32Array {
  const out = new Float32Array(q.length);
  for (let r = 0; r < scales.length; r++) for (let i = 0; i < k; i++) out[r * k + i] = q[r * k + i] * scales[r];
  return out;
}

/**
 * An int8 matrix in the kernels' layout (kernels.ts `matmulInt8`): per panel of 8 rows, for each pair of inputs
 * (2j, 2j+1) 16 bytes (rows 0..7, each [q[row][2j], q[row][2j+1]]; an odd k's last pair padded with 0), then
 * the 8 rows' f32 scales; rows past n are zero.
 */
export function int8Panels(n: number, k: number, at: (r: number, i: number) => number): Uint8Array {
  const { q, scales } = quantizeRowsInt8(n, k, at);
  const panels = Math.ceil(n / 8);
  const kp = (k + 1) >> 1;
  const panelBytes = kp * 16 + 32;
  const out = new Uint8Array(panels * panelBytes);
  const bytes = new Int8Array(out.buffer);
  const floats = new Float32Array(out.buffer);
  for (let o = 0; o < n; o++) {
    const base = (o >> 3) * panelBytes + (o & 7) * 2;
    for (let i = 0; i < k; i++) bytes[base + (i >> 1) * 16 + (i & 1)] = q[o * k + i];
    floats[((o >> 3) * panelBytes + kp * 16) / 4 + (o & 7)] = scales[o];
  }
  return out;
}

/** Bytes of thread scratch the int8 products need for T tokens of at most k inputs (kernels.ts `matmulInt8`). */
export function int8ScratchBytes(T: number, k: number): number {
  return T * (((k + 1) >> 1) * 4 + 4) + 64;
}
