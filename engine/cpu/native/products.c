// Native x86-64 AVX2 matrix products for the CPU backend's integer panels (int8: kind 2, i16: kind 3) and f16
// panels (kind 0), loaded as a Node-API addon (engine/cpu/native-products.ts) beside the WebAssembly kernels, which
// stay the path everywhere else. Why: WebAssembly SIMD is 128 bits wide and its only integer dot product does 8
// multiply-adds (i32x4.dot_i16x8_s); a prefill's products ran at 19-22 GMAC per CPU second on the project's 2-core
// Zen 3, while the same tiles with 256-bit vpmaddwd do 16 (README, CPU backend, "Native integer products on x86-64
// Linux"). f16 panels: WebAssembly widens 4 halves in 3 instructions, and that bound a decode step.
//
// Same bits as the WebAssembly kernels (engine/cpu/kernels/kernels.ts, matmulQuantized; f16 below): the inputs are the ones
// its quantizeProductInputs wrote into the thread's scratch; int8 sums are exact i32 sums; i16 sums add each
// quad's exact i32 sum as an f32 in input order; the epilogue multiplies by the token's scale, then the row's,
// then activates (none or relu squared: callers keep tanh and sigmoid on WebAssembly) and adds to y, in that
// order. Built with -ffp-contract=off, so no multiply and add fuse. Every (token, row) sum is one tile's in input
// order, so tiles of 6 tokens here against 4 there change nothing.
//
// Built without the C library (-nostdlib): nothing here calls it, so the one file loads on glibc and musl (n8n's
// Alpine image). Only the functions with the avx2 target use AVX2, and the module refuses to load without it; the
// f16 tiles' fused form also needs FMA, which the module reports (`fma`).

#include <node_api.h>
#include <immintrin.h>
#include <cpuid.h>
#include <stddef.h>
#include <stdint.h>

#define AVX2 __attribute__((target("avx2")))
#define INLINE static inline __attribute__((always_inline))

/** Whether the CPU and the OS (saved YMM state) support AVX2. */
static int hasAvx2(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  if (!(c & bit_OSXSAVE) || !(c & bit_AVX)) return 0;
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 6) != 6) return 0;
  if (__get_cpuid_max(0, 0) < 7) return 0;
  __cpuid_count(7, 0, a, b, c, d);
  return (b & bit_AVX2) != 0;
}

/** Quantized inputs per block of tokens that stays in a core's L2 across the panels (kernels.ts TOKEN_BLOCK_BYTES). */
#define TOKEN_BLOCK_BYTES 131072

/** The arguments of one call, addresses resolved. */
typedef struct {
  const uint8_t *w;     /* the matrix's panels */
  size_t panelBytes;
  int n;                /* the matrix's real rows */
  size_t groups;        /* int8: input pairs; i16: input quads */
  const uint8_t *q;     /* quantized inputs, qRow bytes a token (int8, i16) */
  const float *x;       /* f16: the inputs, xStride floats apart; groups is k */
  size_t xStride;
  size_t qRow;
  const float *ts;      /* the tokens' scales */
  float *y;
  size_t yStride;       /* floats between tokens' outputs */
  int act, accum;
} Call;

INLINE AVX2 __m256i bcast32(const uint8_t *p) { return _mm256_set1_epi32(*(const int32_t *)p); }

/** The 8 rows from `row` of token t, scaled: activated (0 none, 3 relu squared), into y (+ y when accum); fewer past the matrix's last row. */
INLINE AVX2 void activateStore8(const Call *c, int t, int row, __m256 v) {
  if (c->act == 3) {
    // max(0, v) keeps a NaN (as WebAssembly's f32x4.max); a -0 stays -0 where f32x4.max gives +0: squared, both +0.
    const __m256 r = _mm256_max_ps(_mm256_setzero_ps(), v);
    v = _mm256_mul_ps(r, r);
  }
  float *y = c->y + (size_t)t * c->yStride + row;
  const int valid = c->n - row;
  if (valid >= 8) {
    if (c->accum) v = _mm256_add_ps(v, _mm256_loadu_ps(y));
    _mm256_storeu_ps(y, v);
    return;
  }
  float lanes[8] __attribute__((aligned(32)));
  _mm256_store_ps(lanes, v);
  for (int r = 0; r < valid; r++) y[r] = c->accum ? lanes[r] + y[r] : lanes[r];
}

/** The 8 rows from `row` of token t: v (sums as f32) times the token's scale, times the rows' scales sc, then stored. */
INLINE AVX2 void store8(const Call *c, int t, int row, __m256 v, const float *sc) {
  v = _mm256_mul_ps(v, _mm256_set1_ps(c->ts[t]));
  activateStore8(c, t, row, _mm256_mul_ps(v, _mm256_loadu_ps(sc)));
}

// ---- int8: per input pair j a panel holds 16 bytes, [q[row][2j], q[row][2j+1]] for rows 0..7, then the 8 row
// scales. Widened to 16 i16, one vpmaddwd against the token's pair (an i32 broadcast) gives rows 0..7's sums.

/** NP panels (1 or 2) from panel p against NT tokens (1..6) from token t. */
INLINE AVX2 void int8Tile(const Call *c, int p, int t, const int NP, const int NT) {
  // Named sums rather than an array: with an array the compiler spilled them to the stack.
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  __m256i b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
  const uint8_t *w0 = c->w + (size_t)p * c->panelBytes;
  const uint8_t *w1 = w0 + c->panelBytes;
  const uint8_t *q = c->q + (size_t)t * c->qRow;
  const size_t qRow = c->qRow, groups = c->groups;
  for (size_t j = 0; j < groups; j++) {
    const __m256i u = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w0 + (j << 4))));
    const __m256i v = NP == 2 ? _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w1 + (j << 4)))) : u;
    if (NT == 1 && (j & 3) == 0) {
      // One token is bound by memory: each weight stream prefetched 64 pairs (16 cache lines) ahead.
      _mm_prefetch((const char *)(w0 + (j << 4) + 1024), _MM_HINT_T0);
      if (NP == 2) _mm_prefetch((const char *)(w1 + (j << 4) + 1024), _MM_HINT_T0);
    }
    const uint8_t *qj = q + (j << 2);
#define INT8_STEP(B, A, BB) \
    if (NT > B) { \
      const __m256i s = bcast32(qj + B * qRow); \
      A = _mm256_add_epi32(A, _mm256_madd_epi16(u, s)); \
      if (NP == 2) BB = _mm256_add_epi32(BB, _mm256_madd_epi16(v, s)); \
    }
    INT8_STEP(0, a0, b0) INT8_STEP(1, a1, b1) INT8_STEP(2, a2, b2) INT8_STEP(3, a3, b3) INT8_STEP(4, a4, b4) INT8_STEP(5, a5, b5)
#undef INT8_STEP
  }
  // The sums leave their registers first: finished in place, the epilogue's values made the compiler spill them
  // inside the loop, at half the speed.
  __m256i sums[2][6];
  sums[0][0] = a0; sums[0][1] = a1; sums[0][2] = a2; sums[0][3] = a3; sums[0][4] = a4; sums[0][5] = a5;
  sums[1][0] = b0; sums[1][1] = b1; sums[1][2] = b2; sums[1][3] = b3; sums[1][4] = b4; sums[1][5] = b5;
  __asm__ volatile("" ::: "memory");
  for (int a = 0; a < NP; a++) {
    const float *sc = (const float *)(w0 + (size_t)a * c->panelBytes + (groups << 4));
    for (int b = 0; b < NT; b++) store8(c, t + b, (p + a) << 3, _mm256_cvtepi32_ps(sums[a][b]), sc);
  }
}

// ---- i16: per input quad j a panel holds 64 bytes: pair 2j for rows 0..3 and for rows 4..7 (32 bytes: rows 0..7's
// pairs in order), then pair 2j+1 the same; after the quads the 8 row scales, padded to 64 bytes. Per quad and
// token: two vpmaddwd, their i32 sum converted and added to the f32 sums (as the WebAssembly tiles do).

/** NP panels (1 or 2) from panel p against NT tokens (1..4) from token t. */
INLINE AVX2 void i16Tile(const Call *c, int p, int t, const int NP, const int NT) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  const uint8_t *w0 = c->w + (size_t)p * c->panelBytes;
  const uint8_t *w1 = w0 + c->panelBytes;
  const uint8_t *q = c->q + (size_t)t * c->qRow;
  const size_t qRow = c->qRow, groups = c->groups;
  for (size_t j = 0; j < groups; j++) {
    const __m256i u0 = _mm256_loadu_si256((const __m256i *)(w0 + (j << 6)));
    const __m256i u1 = _mm256_loadu_si256((const __m256i *)(w0 + (j << 6) + 32));
    const __m256i v0 = NP == 2 ? _mm256_loadu_si256((const __m256i *)(w1 + (j << 6))) : u0;
    const __m256i v1 = NP == 2 ? _mm256_loadu_si256((const __m256i *)(w1 + (j << 6) + 32)) : u1;
    if (NT == 1) {
      // One token is bound by memory: each weight stream prefetched 16 quads (a cache line each) ahead.
      _mm_prefetch((const char *)(w0 + (j << 6) + 1024), _MM_HINT_T0);
      if (NP == 2) _mm_prefetch((const char *)(w1 + (j << 6) + 1024), _MM_HINT_T0);
    }
    const uint8_t *qj = q + (j << 3);
#define I16_STEP(B, A, BB) \
    if (NT > B) { \
      const __m256i s0 = bcast32(qj + B * qRow), s1 = bcast32(qj + B * qRow + 4); \
      A = _mm256_add_ps(A, _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_madd_epi16(u0, s0), _mm256_madd_epi16(u1, s1)))); \
      if (NP == 2) BB = _mm256_add_ps(BB, _mm256_cvtepi32_ps(_mm256_add_epi32(_mm256_madd_epi16(v0, s0), _mm256_madd_epi16(v1, s1)))); \
    }
    I16_STEP(0, a0, b0) I16_STEP(1, a1, b1) I16_STEP(2, a2, b2) I16_STEP(3, a3, b3)
#undef I16_STEP
  }
  // Out of their registers before the epilogue (see int8Tile).
  __m256 sums[2][4];
  sums[0][0] = a0; sums[0][1] = a1; sums[0][2] = a2; sums[0][3] = a3;
  sums[1][0] = b0; sums[1][1] = b1; sums[1][2] = b2; sums[1][3] = b3;
  __asm__ volatile("" ::: "memory");
  for (int a = 0; a < NP; a++) {
    const float *sc = (const float *)(w0 + (size_t)a * c->panelBytes + (groups << 6));
    for (int b = 0; b < NT; b++) store8(c, t + b, (p + a) << 3, sums[a][b], sc);
  }
}

// ---- f16: per input i a panel holds 16 bytes, rows 0..7's halves (kernels.ts, kind 0). Each is widened as the
// WebAssembly kernels widen it (halfLo/halfHi): sign-extended to 32 bits, shifted left by 13, the sign's copies
// in the exponent cleared: the f16's value times 2^-112, exactly, for every bit pattern. Each (token, row) sum is
// then the same operations in input order (fused multiply-add where the WebAssembly build fuses, else a product
// and a sum), and 2^112 applies once to the finished sum: the same bits. 3 instructions widen 8 weights here
// against 6 there, and one multiply-add takes 8 rows against 4: a decode step was bound by those instructions.

#define HALF_FMA __attribute__((target("avx2,fma")))

/** Rows 0..7 of the panel entry at p, as f32 times 2^-112. */
INLINE HALF_FMA __m256 half8(const uint8_t *p) {
  const __m256i wide = _mm256_slli_epi32(_mm256_cvtepi16_epi32(_mm_loadu_si128((const __m128i *)p)), 13);
  return _mm256_castsi256_ps(_mm256_and_si256(wide, _mm256_set1_epi32((int)0x8fffffff)));
}

/** acc + w * s: fused as relaxed SIMD's f32x4.relaxed_madd, or rounded twice as f32x4.add(acc, f32x4.mul(w, s)). */
INLINE HALF_FMA __m256 halfMadd(__m256 w, __m256 s, __m256 acc, const int fused) {
  return fused ? _mm256_fmadd_ps(w, s, acc) : _mm256_add_ps(acc, _mm256_mul_ps(w, s));
}

/** The 8 finished sums of token t from `row`: times 2^112, then stored as store8 stores. */
INLINE HALF_FMA void halfStore8(const Call *c, int t, int row, __m256 v) {
  activateStore8(c, t, row, _mm256_mul_ps(v, _mm256_set1_ps(0x1p112f)));
}

/** NP panels (1, 2 or 4) from panel p against NT tokens from token t (NP × NT <= 12 sums in registers). */
INLINE HALF_FMA void halfTile(const Call *c, int p, int t, const int NP, const int NT, const int fused) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
  __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
  const uint8_t *w0 = c->w + (size_t)p * c->panelBytes;
  const size_t pb = c->panelBytes;
  const float *x = c->x + (size_t)t * c->xStride;
  const size_t xs = c->xStride, k = c->groups;
  for (size_t i = 0; i < k; i++) {
    const uint8_t *wi = w0 + (i << 4);
    if (NP == 4) {
      // One token, four panels: four weight streams and four independent sums. Each stream is prefetched 64
      // inputs ahead, a cache line every 4 inputs: a one-token step is bound by memory, and on the 65,536-row head
      // (42 MB) this drew 24 GB/s against 17-20 without (one Zen 3 core). A prefetch never faults.
      if ((i & 3) == 0) {
        _mm_prefetch((const char *)(wi + 1024), _MM_HINT_T0);
        _mm_prefetch((const char *)(wi + pb + 1024), _MM_HINT_T0);
        _mm_prefetch((const char *)(wi + 2 * pb + 1024), _MM_HINT_T0);
        _mm_prefetch((const char *)(wi + 3 * pb + 1024), _MM_HINT_T0);
      }
      const __m256 s = _mm256_broadcast_ss(x + i);
      a0 = halfMadd(half8(wi), s, a0, fused);
      a1 = halfMadd(half8(wi + pb), s, a1, fused);
      a2 = halfMadd(half8(wi + 2 * pb), s, a2, fused);
      a3 = halfMadd(half8(wi + 3 * pb), s, a3, fused);
      continue;
    }
    const __m256 u = half8(wi);
    const __m256 v = NP == 2 ? half8(wi + pb) : u;
#define HALF_STEP(B, A, BB) \
    if (NT > B) { \
      const __m256 s = _mm256_broadcast_ss(x + B * xs + i); \
      A = halfMadd(u, s, A, fused); \
      if (NP == 2) BB = halfMadd(v, s, BB, fused); \
    }
    HALF_STEP(0, a0, b0) HALF_STEP(1, a1, b1) HALF_STEP(2, a2, b2) HALF_STEP(3, a3, b3) HALF_STEP(4, a4, b4) HALF_STEP(5, a5, b5)
#undef HALF_STEP
  }
  // Out of their registers before the epilogue (see int8Tile).
  __m256 sums[2][6];
  sums[0][0] = a0; sums[0][1] = a1; sums[0][2] = a2; sums[0][3] = a3; sums[0][4] = a4; sums[0][5] = a5;
  sums[1][0] = b0; sums[1][1] = b1; sums[1][2] = b2; sums[1][3] = b3; sums[1][4] = b4; sums[1][5] = b5;
  __asm__ volatile("" ::: "memory");
  if (NP == 4) {
    for (int a = 0; a < 4; a++) halfStore8(c, t, (p + a) << 3, sums[0][a]);
    return;
  }
  for (int a = 0; a < NP; a++)
    for (int b = 0; b < NT; b++) halfStore8(c, t + b, (p + a) << 3, sums[a][b]);
}

// Tiles with constant shapes, each its own function: its sums stay in registers (inlined into one large function,
// the compiler spilled them, at half the speed).
#define TILE(KIND, NP, NT) \
  static AVX2 __attribute__((noinline)) void KIND##_##NP##x##NT(const Call *c, int p, int t) { KIND##Tile(c, p, t, NP, NT); }
TILE(int8, 1, 1) TILE(int8, 1, 2) TILE(int8, 1, 3) TILE(int8, 1, 4) TILE(int8, 1, 5) TILE(int8, 1, 6)
TILE(int8, 2, 1) TILE(int8, 2, 2) TILE(int8, 2, 3) TILE(int8, 2, 4) TILE(int8, 2, 5) TILE(int8, 2, 6)
TILE(i16, 1, 1) TILE(i16, 1, 2) TILE(i16, 1, 3) TILE(i16, 1, 4)
TILE(i16, 2, 1) TILE(i16, 2, 2) TILE(i16, 2, 3) TILE(i16, 2, 4)

#define HALF_TILE(NP, NT, FUSED) \
  static HALF_FMA __attribute__((noinline)) void half##FUSED##_##NP##x##NT(const Call *c, int p, int t) { halfTile(c, p, t, NP, NT, FUSED); }
#define HALF_TILES(FUSED) \
  HALF_TILE(1, 1, FUSED) HALF_TILE(1, 2, FUSED) HALF_TILE(1, 3, FUSED) HALF_TILE(1, 4, FUSED) HALF_TILE(1, 5, FUSED) HALF_TILE(1, 6, FUSED) \
  HALF_TILE(2, 1, FUSED) HALF_TILE(2, 2, FUSED) HALF_TILE(2, 3, FUSED) HALF_TILE(2, 4, FUSED) HALF_TILE(2, 5, FUSED) HALF_TILE(2, 6, FUSED) \
  HALF_TILE(4, 1, FUSED)
HALF_TILES(0) HALF_TILES(1)

typedef void (*Tile)(const Call *, int, int);
/** By panels (1, 2) and tokens (1..6). */
static Tile const INT8_TILES[2][6] = {
  { int8_1x1, int8_1x2, int8_1x3, int8_1x4, int8_1x5, int8_1x6 },
  { int8_2x1, int8_2x2, int8_2x3, int8_2x4, int8_2x5, int8_2x6 },
};
static Tile const I16_TILES[2][4] = {
  { i16_1x1, i16_1x2, i16_1x3, i16_1x4 },
  { i16_2x1, i16_2x2, i16_2x3, i16_2x4 },
};

/** By fused (0, 1), panels (1, 2) and tokens (1..6); the four-panel tile of one token apart. */
static Tile const HALF_TILES[2][2][6] = {
  { { half0_1x1, half0_1x2, half0_1x3, half0_1x4, half0_1x5, half0_1x6 },
    { half0_2x1, half0_2x2, half0_2x3, half0_2x4, half0_2x5, half0_2x6 } },
  { { half1_1x1, half1_1x2, half1_1x3, half1_1x4, half1_1x5, half1_1x6 },
    { half1_2x1, half1_2x2, half1_2x3, half1_2x4, half1_2x5, half1_2x6 } },
};
static Tile const HALF_FOUR_PANELS[2] = { half0_4x1, half1_4x1 };

/** f16 panels [p0, p1) for all T tokens: one token four panels at a time, else as products() below. */
static HALF_FMA void halfProducts(const Call *c, int fused, int T, int p0, int p1) {
  if (T == 1) {
    int p = p0;
    for (; p + 4 <= p1; p += 4) HALF_FOUR_PANELS[fused](c, p, 0);
    for (; p < p1; p += 2) HALF_TILES[fused][p + 1 < p1][0](c, p, 0);
    return;
  }
  int block = (int)(TOKEN_BLOCK_BYTES / (c->groups * 4)) / 6 * 6;
  if (block < 6) block = 6;
  for (int t0 = 0; t0 < T; t0 += block) {
    const int t1 = t0 + block < T ? t0 + block : T;
    for (int p = p0; p < p1; p += 2) {
      const int pair = p + 1 < p1;
      for (int t = t0; t < t1; t += 6) {
        const int nt = t1 - t < 6 ? t1 - t : 6;
        HALF_TILES[fused][pair][nt - 1](c, p, t);
      }
    }
  }
}

/** The panels [p0, p1) for all T tokens: blocks of tokens whose inputs stay in L2, each panel pair over a block in tiles. */
static AVX2 void products(const Call *c, int kind, int T, int p0, int p1) {
  const int tileTokens = kind == 2 ? 6 : 4;
  int block = (int)(TOKEN_BLOCK_BYTES / c->qRow) / tileTokens * tileTokens;
  if (block < tileTokens) block = tileTokens;
  for (int t0 = 0; t0 < T; t0 += block) {
    const int t1 = t0 + block < T ? t0 + block : T;
    for (int p = p0; p < p1; p += 2) {
      const int pair = p + 1 < p1;
      for (int t = t0; t < t1; t += tileTokens) {
        const int nt = t1 - t < tileTokens ? t1 - t : tileTokens;
        (kind == 2 ? INT8_TILES[pair] : I16_TILES[pair])[nt - 1](c, p, t);
      }
    }
  }
}

// ---- Node-API ----------------------------------------------------------------------------------------------

#define ARGS 13

static napi_value fail(napi_env env, const char *message) {
  napi_throw_error(env, "ERR_RWKV_NATIVE_PRODUCTS", message);
  return NULL;
}

/** A non-negative integer argument below 2^32 (addresses and sizes in a wasm32 memory). */
static int integer(napi_env env, napi_value v, double *out) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok) return 0;
  if (!(d >= 0 && d <= 4294967295.0) || d != (double)(int64_t)d) return 0;
  *out = d;
  return 1;
}

/**
 * A call's memory (the Uint8Array in its first argument) and the `count` - 1 integers after it, into a. Returns 0
 * after throwing errors[0] (wrong count), errors[1] (no Uint8Array) or errors[2] (not an integer in [0, 2^32)).
 */
static int callArgs(napi_env env, napi_callback_info info, size_t count, const char *const errors[3], uint8_t **base, size_t *length, double *a) {
  size_t argc = count;
  napi_value argv[16];
  if (count > 16 || napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != count) return fail(env, errors[0]), 0;
  napi_typedarray_type type;
  void *data;
  napi_value buffer;
  size_t offset;
  if (napi_get_typedarray_info(env, argv[0], &type, length, &data, &buffer, &offset) != napi_ok || type != napi_uint8_array)
    return fail(env, errors[1]), 0;
  for (size_t i = 1; i < count; i++)
    if (!integer(env, argv[i], &a[i - 1])) return fail(env, errors[2]), 0;
  *base = (uint8_t *)data;
  return 1;
}

/**
 * products(memory: Uint8Array over the kernels' memory, w, n, k, kind, scratch, y, ys, T, act, accum, p0, p1):
 * y[t][row] = act(sum_i W[row][i] x[t][i]) (+ y) for the panels [p0, p1) and T tokens, from the inputs that
 * quantizeProductInputs(kind, k, x, xs, T, scratch) left in scratch. Every range is checked against the memory.
 */
static napi_value Products(napi_env env, napi_callback_info info) {
  static const char *const errors[3] = {
    "products: expected 13 arguments",
    "products: the first argument must be a Uint8Array over the kernels' memory",
    "products: every argument after the memory must be an integer in [0, 2^32)",
  };
  uint8_t *base;
  size_t length;
  double a[ARGS - 1];
  if (!callArgs(env, info, ARGS, errors, &base, &length, a)) return NULL;
  const double w = a[0], n = a[1], k = a[2], kind = a[3], scratch = a[4], y = a[5], ys = a[6], T = a[7], act = a[8], accum = a[9],
               p0 = a[10], p1 = a[11];
  if (kind != 2 && kind != 3) return fail(env, "products: kind must be 2 (int8) or 3 (i16)");
  if (act != 0 && act != 3) return fail(env, "products: act must be 0 (none) or 3 (relu squared)");
  if (!(k >= 1 && n >= 1 && T >= 1 && p0 < p1 && p1 * 8 < n + 8 && ys >= 1))
    return fail(env, "products: bad shape (k, n, T >= 1; p0 < p1 <= panels; ys >= 1)");
  if (n > 2147483647.0 || k > 2147483647.0 || T > 2147483647.0 || ys > 2147483647.0)
    return fail(env, "products: n, k, T and ys must be below 2^31");
  const double groups = kind == 2 ? ((double)(((uint64_t)k + 1) >> 1)) : ((double)(((uint64_t)k + 3) >> 2));
  const double qRow = kind == 2 ? groups * 4 : groups * 8;
  const double panelBytes = kind == 2 ? groups * 16 + 32 : groups * 64 + 64;
  const double lastRow = p1 * 8 < n ? p1 * 8 : n;
  const double end = (double)length;
  if (w + p1 * panelBytes > end || scratch + T * qRow + T * 4 > end || y + ((T - 1) * ys + lastRow) * 4 > end)
    return fail(env, "products: a range lies outside the memory");
  if (((uint64_t)scratch & 3) || ((uint64_t)y & 3) || ((uint64_t)w & 3)) return fail(env, "products: addresses must be 4-byte aligned");
  const Call c = {
    .w = base + (size_t)w,
    .panelBytes = (size_t)panelBytes,
    .n = (int)n,
    .groups = (size_t)groups,
    .q = base + (size_t)scratch,
    .qRow = (size_t)qRow,
    .ts = (const float *)(base + (size_t)(scratch + T * qRow)),
    .y = (float *)(base + (size_t)y),
    .yStride = (size_t)ys,
    .act = (int)act,
    .accum = accum != 0,
  };
  products(&c, (int)kind, (int)T, (int)p0, (int)p1);
  return NULL;
}

static int hasFma(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_FMA) != 0;
}

#define HALF_ARGS 14

/**
 * halfProducts(memory, w, n, k, x, xs, y, ys, T, act, accum, p0, p1, fused): y[t][row] = act(sum_i W[row][i]
 * x[t][i]) (+ y) for the f16 panels [p0, p1) and T tokens, x rows xs floats apart; fused 1 sums with fused
 * multiply-adds (the relaxed-SIMD kernels), 0 with a product and a sum (plain SIMD). Every range is checked.
 */
static napi_value HalfProducts(napi_env env, napi_callback_info info) {
  static const char *const errors[3] = {
    "halfProducts: expected 14 arguments",
    "halfProducts: the first argument must be a Uint8Array over the kernels' memory",
    "halfProducts: every argument after the memory must be an integer in [0, 2^32)",
  };
  uint8_t *base;
  size_t length;
  double a[HALF_ARGS - 1];
  if (!callArgs(env, info, HALF_ARGS, errors, &base, &length, a)) return NULL;
  const double w = a[0], n = a[1], k = a[2], x = a[3], xs = a[4], y = a[5], ys = a[6], T = a[7], act = a[8], accum = a[9],
               p0 = a[10], p1 = a[11], fused = a[12];
  if (act != 0 && act != 3) return fail(env, "halfProducts: act must be 0 (none) or 3 (relu squared)");
  if (fused != 0 && fused != 1) return fail(env, "halfProducts: fused must be 0 or 1");
  if (fused == 1 && !hasFma()) return fail(env, "halfProducts: this CPU has no fused multiply-add");
  if (!(k >= 1 && n >= 1 && T >= 1 && p0 < p1 && p1 * 8 < n + 8 && xs >= k && ys >= 1))
    return fail(env, "halfProducts: bad shape (k, n, T >= 1; p0 < p1 <= panels; xs >= k; ys >= 1)");
  if (n > 2147483647.0 || k > 2147483647.0 || T > 2147483647.0 || ys > 2147483647.0 || xs > 2147483647.0)
    return fail(env, "halfProducts: n, k, T, xs and ys must be below 2^31");
  const double panelBytes = k * 16;
  const double lastRow = p1 * 8 < n ? p1 * 8 : n;
  const double end = (double)length;
  if (w + p1 * panelBytes > end || x + ((T - 1) * xs + k) * 4 > end || y + ((T - 1) * ys + lastRow) * 4 > end)
    return fail(env, "halfProducts: a range lies outside the memory");
  if (((uint64_t)x & 3) || ((uint64_t)y & 3) || ((uint64_t)w & 3)) return fail(env, "halfProducts: addresses must be 4-byte aligned");
  const Call c = {
    .w = base + (size_t)w,
    .panelBytes = (size_t)panelBytes,
    .n = (int)n,
    .groups = (size_t)k,
    .x = (const float *)(base + (size_t)x),
    .xStride = (size_t)xs,
    .y = (float *)(base + (size_t)y),
    .yStride = (size_t)ys,
    .act = (int)act,
    .accum = accum != 0,
  };
  halfProducts(&c, (int)fused, (int)T, (int)p0, (int)p1);
  return NULL;
}

NAPI_MODULE_INIT() {
  if (!hasAvx2()) {
    napi_throw_error(env, "ERR_RWKV_NATIVE_PRODUCTS", "this CPU has no AVX2");
    return NULL;
  }
  napi_value fn;
  if (napi_create_function(env, "products", NAPI_AUTO_LENGTH, Products, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "products", fn) != napi_ok) return NULL;
  if (napi_create_function(env, "halfProducts", NAPI_AUTO_LENGTH, HalfProducts, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "halfProducts", fn) != napi_ok) return NULL;
  napi_value fma;
  if (napi_get_boolean(env, hasFma(), &fma) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "fma", fma) != napi_ok) return NULL;
  return exports;
}
