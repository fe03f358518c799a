// Multi-head self-attention within ragged rows: forward and backward on the CPU.
//
// Built at run time by entityrl/nn/kernels/build.py (g++ -O3 -march=native, OpenMP when
// available) and called through ctypes; the contract is documented in
// entityrl/nn/kernels/__init__.py. Written with GCC vector extensions (plus a few AVX-512
// intrinsics in the exponential), so the same source compiles on any x86-64 (vectors of 16
// floats with AVX-512, 8 with AVX, 4 otherwise) and on aarch64; the vector types and helpers
// shared with the other kernels are in simd.h.
//
// The work, per row of n tokens and per head (features padded to DP, a power of two):
//   forward   S = Q K^T in tiles of TI queries x all keys, vectorised over keys (K is
//             transposed once per row, W x W blocks in registers); softmax over the keys;
//             O = P V vectorised over features (V read in place), 8 queries at a time.
//   backward  dP = dO V^T (V transposed like K), dS = P * (dP - rowsum(P * dP)) * scale,
//             dQ = dS K (tiles of queries), dK = dS^T Q and dV = P^T dO (tiles of keys, no
//             transposes). The forward saves P, rows and columns padded as the tiles are.
// Rows of up to SHORT tokens skip the tiles (dot products over features, scalar softmax);
// a one-token row's output is its value. Rows are split between threads by estimated work.
// Accumulation is always in float32; bfloat16 rows are widened into per-thread scratch first
// (as are heads whose width needs padding) and results are rounded to nearest even.

#include "simd.h"

#define MAX_DP 128  // widest head
#define TI 4  // queries per tile
#define TJ 4  // keys per tile (dK, dV)
#define SHORT 4  // rows up to this long skip the tiles: dot products over features instead

// Lane permutations for the transpose: interleaves of floats and of float pairs within
// 128-bit lanes (unpcklps/unpcklpd) and moves of whole 128-bit lanes, which all compile to
// single immediate-operand shuffles.
#if W == 16
#define PS_LO (vi){0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29}
#define PS_HI (vi){2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31}
#define PD_LO (vi){0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29}
#define PD_HI (vi){2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31}
#define LANES_EVEN (vi){0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27}
#define LANES_ODD (vi){4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31}
#elif W == 8
#define PS_LO (vi){0, 8, 1, 9, 4, 12, 5, 13}
#define PS_HI (vi){2, 10, 3, 11, 6, 14, 7, 15}
#define PD_LO (vi){0, 1, 8, 9, 4, 5, 12, 13}
#define PD_HI (vi){2, 3, 10, 11, 6, 7, 14, 15}
#define LANES_EVEN (vi){0, 1, 2, 3, 8, 9, 10, 11}
#define LANES_ODD (vi){4, 5, 6, 7, 12, 13, 14, 15}
#else
#define PS_LO (vi){0, 4, 1, 5}
#define PS_HI (vi){2, 6, 3, 7}
#define PD_LO (vi){0, 1, 4, 5}
#define PD_HI (vi){2, 3, 6, 7}
#endif

INL vf vmax(vf a, vf b) { return a > b ? a : b; }

// Horizontal sums of the feature vectors (whatever their width).
typedef int32_t vi4 __attribute__((vector_size(16)));
typedef int32_t vi8 __attribute__((vector_size(32)));
typedef int32_t vi16 __attribute__((vector_size(64)));
INL float hsum_v(V<4>::T a) {
    a += __builtin_shuffle(a, (vi4){2, 3, 0, 1});
    a += __builtin_shuffle(a, (vi4){1, 0, 3, 2});
    return a[0];
}
INL float hsum_v(V<8>::T a) {
    a += __builtin_shuffle(a, (vi8){4, 5, 6, 7, 0, 1, 2, 3});
    a += __builtin_shuffle(a, (vi8){2, 3, 0, 1, 6, 7, 4, 5});
    a += __builtin_shuffle(a, (vi8){1, 0, 3, 2, 5, 4, 7, 6});
    return a[0];
}
INL float hsum_v(V<16>::T a) {
    a += __builtin_shuffle(a, (vi16){8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7});
    a += __builtin_shuffle(a, (vi16){4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11});
    a += __builtin_shuffle(a, (vi16){2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13});
    a += __builtin_shuffle(a, (vi16){1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14});
    return a[0];
}

INL float hmax(vf a) {
#if W >= 16
    a = vmax(a, __builtin_shuffle(a, XM(8)));
#endif
#if W >= 8
    a = vmax(a, __builtin_shuffle(a, XM(4)));
#endif
    a = vmax(a, __builtin_shuffle(a, XM(2)));
    a = vmax(a, __builtin_shuffle(a, XM(1)));
    return a[0];
}

// 2^t for t <= 0 (scores minus their row maximum, times log2 e): 2^k * p(f) with
// k = round(t), |f| <= 1/2 and the Cephes exp2f polynomial (relative error ~1e-7). -inf and
// anything below 2^-126 give exactly 0 (no denormals); NaN stays NaN.
#define LOG2E 1.44269504088896341f
INL vf vexp2(vf t) {
#ifdef __AVX512F__
    const __mmask16 keep = _mm512_cmp_ps_mask(t, _mm512_set1_ps(-126.f), _CMP_NLT_UQ);
    t = _mm512_max_ps(_mm512_set1_ps(-126.f), t);
    const vf k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    const vi low = t < splat(-126.f);
    t = low ? splat(-126.f) : t;
    const vf k = (t + 12582912.f) - 12582912.f;  // round to nearest
#endif
    const vf f = t - k;
    vf p = splat(1.535336188319500e-4f);
    p = p * f + 1.339887440266574e-3f;
    p = p * f + 9.618437357674640e-3f;
    p = p * f + 5.550332471162809e-2f;
    p = p * f + 2.402264791363012e-1f;
    p = p * f + 6.931472028550421e-1f;
    p = p * f + 1.0f;
#ifdef __AVX512F__
    return _mm512_maskz_scalef_ps(keep, p, k);
#else
    const vi e = (__builtin_convertvector(k, vi) + 127) << 23;
    return low ? splat(0.f) : p * (vf)e;
#endif
}

// Scalar 2^t (t <= 0), as vexp2.
INL float sexp2(float t) {
    if (!(t >= -126.f)) return t != t ? t : 0.f;
    const float k = (t + 12582912.f) - 12582912.f;
    const float f = t - k;
    float p = 1.535336188319500e-4f;
    p = p * f + 1.339887440266574e-3f;
    p = p * f + 9.618437357674640e-3f;
    p = p * f + 5.550332471162809e-2f;
    p = p * f + 2.402264791363012e-1f;
    p = p * f + 6.931472028550421e-1f;
    p = p * f + 1.0f;
    const int32_t e = ((int32_t)k + 127) << 23;
    float scale;
    memcpy(&scale, &e, 4);
    return p * scale;
}

// In-place transpose of a W x W block held in registers. Each group of 4 rows is transposed
// within 128-bit lanes (u[4g + c] lane L = rows 4g..4g+3 of column 4L + c); then, for each c,
// the W/4 x W/4 matrix of lanes is transposed.
INL void transpose(vf r[W]) {
    for (int g = 0; g < W / 4; g++) {
        vf* x = r + 4 * g;
        const vf t0 = __builtin_shuffle(x[0], x[1], PS_LO), t1 = __builtin_shuffle(x[0], x[1], PS_HI);
        const vf t2 = __builtin_shuffle(x[2], x[3], PS_LO), t3 = __builtin_shuffle(x[2], x[3], PS_HI);
        x[0] = __builtin_shuffle(t0, t2, PD_LO);
        x[1] = __builtin_shuffle(t0, t2, PD_HI);
        x[2] = __builtin_shuffle(t1, t3, PD_LO);
        x[3] = __builtin_shuffle(t1, t3, PD_HI);
    }
#if W == 16
    vf o[W];
    for (int c = 0; c < 4; c++) {
        const vf v0 = __builtin_shuffle(r[c], r[4 + c], LANES_EVEN);
        const vf v1 = __builtin_shuffle(r[c], r[4 + c], LANES_ODD);
        const vf v2 = __builtin_shuffle(r[8 + c], r[12 + c], LANES_EVEN);
        const vf v3 = __builtin_shuffle(r[8 + c], r[12 + c], LANES_ODD);
        o[c] = __builtin_shuffle(v0, v2, LANES_EVEN);
        o[8 + c] = __builtin_shuffle(v0, v2, LANES_ODD);
        o[4 + c] = __builtin_shuffle(v1, v3, LANES_EVEN);
        o[12 + c] = __builtin_shuffle(v1, v3, LANES_ODD);
    }
    for (int i = 0; i < W; i++) r[i] = o[i];
#elif W == 8
    vf o[W];
    for (int c = 0; c < 4; c++) {
        o[c] = __builtin_shuffle(r[c], r[4 + c], LANES_EVEN);
        o[4 + c] = __builtin_shuffle(r[c], r[4 + c], LANES_ODD);
    }
    for (int i = 0; i < W; i++) r[i] = o[i];
#endif
}

// Floats of saved probabilities per row: (H, n, n) for short rows, (H, round_up(n, TI),
// round_up(n, W)) otherwise (padded rows and columns, as the tiles compute them).
static inline int64_t probs_of(int64_t n, int64_t H) {
    return n <= 1 ? 0 : n <= SHORT ? H * n * n : H * round_up(n, TI) * round_up(n, W);
}

// Asks for the next row's data while this row is computed: rows are visited in order but read
// in short strided pieces, which the hardware prefetchers follow poorly.
static inline void prefetch(const void* p, int64_t bytes) {
    const char* c = (const char*)p;
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, 0, 3);
}
static inline void prefetch_write(void* p, int64_t bytes) {
    char* c = (char*)p;
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, 1, 3);
}

// ---------------------------------------------------------------------------------------
// Element conversion (dtype 0: float32, 1: bfloat16).

static void widen(const void* src, int64_t dtype, int64_t off, float* dst, int64_t n) {
    if (dtype == 0) {
        memcpy(dst, (const float*)src + off, sizeof(float) * n);
        return;
    }
    const uint16_t* s = (const uint16_t*)src + off;
    int64_t i = 0;
    for (; i + W <= n; i += W) store<W>(dst + i, load_bf16(s + i));
    for (; i < n; i++) dst[i] = bf16_value(s[i]);
}

static void narrow(const float* src, void* dst, int64_t dtype, int64_t off, int64_t n) {
    if (dtype == 0) {
        memcpy((float*)dst + off, src, sizeof(float) * n);
        return;
    }
    uint16_t* d = (uint16_t*)dst + off;
    int64_t i = 0;
    for (; i + W <= n; i += W) store_bf16(d + i, load<W>(src + i));
    for (; i < n; i++) d[i] = bf16_round(src[i]);
}

// ---------------------------------------------------------------------------------------
// Per-call context and per-thread scratch.

struct Ctx {
    const void* qkv;
    void* out;         // forward output (slots, H*D)
    float* probs;      // saved probabilities (NULL: not saved / not needed)
    const void* dout;  // backward: gradient of the output
    void* dqkv;        // backward: gradient of qkv
    const int64_t* row_slot;
    const int64_t* row_len;
    const uint8_t* visible;
    const uint8_t* covered;  // NULL when rows are sorted by slot
    int64_t R, slots, H, D, DP, HD, HPp, dtype, esize, maxn, probs_len;
    float scale;
    bool direct;  // float32 and no padding of heads: read and write the caller's rows in place
};

// Grows as needed and is kept for the thread's next calls (OpenMP threads persist).
struct Scratch {
    float* buf = nullptr;
    size_t cap = 0;
    ~Scratch() { free(buf); }
    float* get(size_t n) {  // NULL when out of memory
        if (n > cap) {
            free(buf);
            cap = n + n / 4;
            buf = (float*)aligned_alloc(64, round_up((int64_t)(cap * sizeof(float)), 64));
            if (!buf) cap = 0;
        }
        return buf;
    }
};
static thread_local Scratch tls_scratch;

// Lays out 64-byte aligned arrays in one buffer: add() returns each one's offset (floats).
struct Carver {
    size_t total = 0;
    size_t add(int64_t n) {
        const size_t at = total;
        total += (size_t)round_up(n, 16);
        return at;
    }
};

// Copies `parts` column blocks of H heads of D elements (source row stride ld elements,
// block stride H*D) of n rows into float rows of stride parts*HPp: block p at p*HPp, head h
// at h*DP, zeros in the padding columns.
static void copy_in(const Ctx& c, const void* src, int64_t base, int64_t ld, int parts,
                    int64_t n, float* dst) {
    const int64_t ldx = parts * c.HPp;
    const bool pad = c.D != c.DP || c.H * c.DP != c.HPp;
    for (int64_t j = 0; j < n; j++) {
        float* row = dst + j * ldx;
        if (pad) memset(row, 0, sizeof(float) * ldx);
        for (int p = 0; p < parts; p++) {
            const int64_t off = (base + j) * ld + p * c.HD;
            if (c.D == c.DP) {
                widen(src, c.dtype, off, row + p * c.HPp, c.HD);
            } else {
                for (int64_t h = 0; h < c.H; h++)
                    widen(src, c.dtype, off + h * c.D, row + p * c.HPp + h * c.DP, c.D);
            }
        }
    }
}

// The inverse of copy_in: float rows (stride parts*HPp) to the caller's dtype and layout.
static void copy_out(const Ctx& c, const float* src, int parts, int64_t n, void* dst,
                     int64_t base, int64_t ld) {
    const int64_t ldx = parts * c.HPp;
    for (int64_t j = 0; j < n; j++) {
        const float* row = src + j * ldx;
        for (int p = 0; p < parts; p++) {
            const int64_t off = (base + j) * ld + p * c.HD;
            if (c.D == c.DP) {
                narrow(row + p * c.HPp, dst, c.dtype, off, c.HD);
            } else {
                for (int64_t h = 0; h < c.H; h++)
                    narrow(row + p * c.HPp + h * c.DP, dst, c.dtype, off + h * c.D, c.D);
            }
        }
    }
}

// T[col][j] = X[j][col0 + col] for col < ncols (a multiple of W), j < np (rows j >= n are 0).
static void transpose_rows(const float* X, int64_t ldx, int64_t col0, int64_t ncols, int64_t n,
                           int64_t np, float* T) {
    for (int64_t jb = 0; jb < np; jb += W) {
        const float* rows = X + jb * ldx + col0;
        const int64_t valid = n - jb;
        for (int64_t cb = 0; cb < ncols; cb += W) {
            vf r[W];
            if (valid >= W) {
                for (int t = 0; t < W; t++) r[t] = load<W>(rows + t * ldx + cb);
            } else {
                for (int t = 0; t < W; t++) r[t] = t < valid ? load<W>(rows + t * ldx + cb) : vf{};
            }
            transpose(r);
            for (int t = 0; t < W; t++) store<W>(T + (cb + t) * np + jb, r[t]);
        }
    }
}

// S[t][:] = (A_t . B^T) * scale + bias_t for a tile of TI rows A_t (DP features each) against
// all np columns of B^T (BT: DP rows of np). bias NULL: no scale or bias.
template <int DP>
INL void score_tile(const float* const a[TI], const float* BT, int64_t np, float scale,
                    const float* const bias[TI], float* S) {
    const int64_t nb = np / W;
    int64_t jb = 0;
    for (; jb + 2 <= nb; jb += 2) {
        vf acc[TI][2];
        for (int t = 0; t < TI; t++) acc[t][0] = acc[t][1] = vf{};
#pragma GCC unroll 16
        for (int d = 0; d < DP; d++) {
            const vf k0 = load<W>(BT + d * np + jb * W);
            const vf k1 = load<W>(BT + d * np + jb * W + W);
            for (int t = 0; t < TI; t++) {
                const float x = a[t][d];
                acc[t][0] += k0 * x;
                acc[t][1] += k1 * x;
            }
        }
        for (int t = 0; t < TI; t++)
            for (int b = 0; b < 2; b++) {
                float* s = S + t * np + (jb + b) * W;
                if (bias)
                    store<W>(s, acc[t][b] * scale + load<W>(bias[t] + (jb + b) * W));
                else
                    store<W>(s, acc[t][b]);
            }
    }
    if (jb < nb) {
        vf acc[TI];
        for (int t = 0; t < TI; t++) acc[t] = vf{};
        for (int d = 0; d < DP; d++) {
            const vf k0 = load<W>(BT + d * np + jb * W);
            for (int t = 0; t < TI; t++) acc[t] += k0 * a[t][d];
        }
        for (int t = 0; t < TI; t++) {
            float* s = S + t * np + jb * W;
            if (bias)
                store<W>(s, acc[t] * scale + load<W>(bias[t] + jb * W));
            else
                store<W>(s, acc[t]);
        }
    }
}

// Softmax of each of the TI rows of S (np columns; -inf entries get weight 0). The rows are
// processed side by side so that their reductions and exponentials overlap.
INL void softmax_tile(float* S, int64_t np) {
    vf m[TI], z[TI];
    float mx[TI];
    for (int t = 0; t < TI; t++) m[t] = load<W>(S + t * np);
    for (int64_t j = W; j < np; j += W)
        for (int t = 0; t < TI; t++) m[t] = vmax(m[t], load<W>(S + t * np + j));
    for (int t = 0; t < TI; t++) {
        mx[t] = hmax(m[t]);
        if (mx[t] == -INFINITY) mx[t] = 0.f;  // no visible key: all-zero weights
        z[t] = vf{};
    }
    for (int64_t j = 0; j < np; j += W)
        for (int t = 0; t < TI; t++) {
            const vf e = vexp2(load<W>(S + t * np + j) * LOG2E + (-mx[t] * LOG2E));
            store<W>(S + t * np + j, e);
            z[t] += e;
        }
    for (int t = 0; t < TI; t++) {
        const float sum = hsum(z[t]);
        m[t] = splat(sum > 0.f ? 1.f / sum : 0.f);
    }
    for (int64_t j = 0; j < np; j += W)
        for (int t = 0; t < TI; t++) store<W>(S + t * np + j, load<W>(S + t * np + j) * m[t]);
}

// Rows of at most 2W keys: scores, softmax and the backward's dS of a tile stay in registers.

// S[t][:] = softmax((q_t . K^T) * scale + bias_t) for np = NB * W keys.
template <int DP, int NB>
INL void attend_tile(const float* const q[TI], const float* KT, int64_t np, float scale,
                     const float* const bias[TI], float* S) {
    vf a[TI][NB];
    for (int t = 0; t < TI; t++)
        for (int b = 0; b < NB; b++) a[t][b] = vf{};
#pragma GCC unroll 16
    for (int d = 0; d < DP; d++) {
        vf k[NB];
        for (int b = 0; b < NB; b++) k[b] = load<W>(KT + d * np + b * W);
        for (int t = 0; t < TI; t++) {
            const float x = q[t][d];
            for (int b = 0; b < NB; b++) a[t][b] += k[b] * x;
        }
    }
    vf m[TI], z[TI];
    for (int t = 0; t < TI; t++) {
        for (int b = 0; b < NB; b++) a[t][b] = a[t][b] * scale + load<W>(bias[t] + b * W);
        m[t] = a[t][0];
        for (int b = 1; b < NB; b++) m[t] = vmax(m[t], a[t][b]);
    }
    for (int t = 0; t < TI; t++) {
        float mx = hmax(m[t]);
        if (mx == -INFINITY) mx = 0.f;  // no visible key: all-zero weights
        z[t] = vf{};
        for (int b = 0; b < NB; b++) {
            a[t][b] = vexp2(a[t][b] * LOG2E + (-mx * LOG2E));
            z[t] += a[t][b];
        }
    }
    for (int t = 0; t < TI; t++) {
        const float sum = hsum(z[t]);
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        for (int b = 0; b < NB; b++) store<W>(S + t * np + b * W, a[t][b] * inv);
    }
}

// dS[t][:] = P_t * (dP_t - sum(P_t * dP_t)) * scale with dP_t = g_t . V^T, for np = NB * W.
template <int DP, int NB>
INL void grad_scores_tile(const float* const g[TI], const float* VT, int64_t np,
                          const float* P, float scale, float* dS) {
    vf a[TI][NB];
    for (int t = 0; t < TI; t++)
        for (int b = 0; b < NB; b++) a[t][b] = vf{};
#pragma GCC unroll 16
    for (int d = 0; d < DP; d++) {
        vf v[NB];
        for (int b = 0; b < NB; b++) v[b] = load<W>(VT + d * np + b * W);
        for (int t = 0; t < TI; t++) {
            const float x = g[t][d];
            for (int b = 0; b < NB; b++) a[t][b] += v[b] * x;
        }
    }
    for (int t = 0; t < TI; t++) {
        vf p[NB], acc = vf{};
        for (int b = 0; b < NB; b++) {
            p[b] = load<W>(P + t * np + b * W);
            acc += p[b] * a[t][b];
        }
        const float delta = hsum(acc);
        for (int b = 0; b < NB; b++) store<W>(dS + t * np + b * W, p[b] * (a[t][b] - delta) * scale);
    }
}

// out[t] = sum_j w[t][j] * rows[j] for MT weight rows w (stride ldw) and n rows of DP features
// (row j at R + j*ldr); stored for t < valid. Enough independent accumulators (MT * NV, times
// two keys per step for narrow tiles) keep the FMA units busy despite their latency.
template <int DP, int MT>
INL void mix_tile(const float* w, int64_t ldw, const float* R, int64_t ldr, int64_t n,
                  float* out, int64_t ldo, int valid) {
    constexpr int DW = DP < W ? DP : W;
    constexpr int NV = DP / DW;
    constexpr int U = MT * NV >= 8 ? 1 : 2;
    typedef typename V<DW>::T vd;
    vd o[U][MT][NV];
    for (int u = 0; u < U; u++)
        for (int t = 0; t < MT; t++)
            for (int c = 0; c < NV; c++) o[u][t][c] = vd{};
    int64_t j = 0;
    for (; j + U <= n; j += U) {
        for (int u = 0; u < U; u++) {
            vd v[NV];
            for (int c = 0; c < NV; c++) v[c] = load<DW>(R + (j + u) * ldr + c * DW);
            for (int t = 0; t < MT; t++) {
                const float p = w[t * ldw + j + u];
                for (int c = 0; c < NV; c++) o[u][t][c] += v[c] * p;
            }
        }
    }
    for (; j < n; j++) {
        vd v[NV];
        for (int c = 0; c < NV; c++) v[c] = load<DW>(R + j * ldr + c * DW);
        for (int t = 0; t < MT; t++) {
            const float p = w[t * ldw + j];
            for (int c = 0; c < NV; c++) o[0][t][c] += v[c] * p;
        }
    }
    for (int t = 0; t < valid; t++)
        for (int c = 0; c < NV; c++) {
            vd x = o[0][t][c];
            for (int u = 1; u < U; u++) x += o[u][t][c];
            store<DW>(out + t * ldo + c * DW, x);
        }
}

// mix_tile over all n rows of w (which has round_up(n, TI) rows): tiles of 2 TI rows where
// they fit in registers and in w, TI otherwise.
template <int DP>
INL void mix_rows(const float* w, int64_t ldw, const float* R, int64_t ldr, int64_t n,
                  float* out, int64_t ldo) {
    constexpr int NV = DP / (DP < W ? DP : W);
    int64_t i = 0;
    if (NV <= 2)
        for (; i + 2 * TI <= round_up(n, TI); i += 2 * TI) {
            const int valid = n - i < 2 * TI ? (int)(n - i) : 2 * TI;
            mix_tile<DP, 2 * TI>(w + i * ldw, ldw, R, ldr, n, out + i * ldo, ldo, valid);
        }
    for (; i < n; i += TI) {
        const int valid = n - i < TI ? (int)(n - i) : TI;
        mix_tile<DP, TI>(w + i * ldw, ldw, R, ldr, n, out + i * ldo, ldo, valid);
    }
}

// ---------------------------------------------------------------------------------------
// Short rows (2..SHORT tokens): a tile would be mostly padding, so each score is a dot product
// over the features and the softmax is scalar. P: (H, n, n) or NULL.

template <int DP>
static void forward_short(const float* X, int64_t ldx, int64_t ko, int64_t vo, int64_t H,
                          int64_t n, const uint8_t* vis, float* O, int64_t ldo, float* P,
                          float scale) {
    constexpr int DW = DP < W ? DP : W;
    constexpr int NV = DP / DW;
    typedef typename V<DW>::T vd;
    for (int64_t h = 0; h < H; h++) {
        vd k[SHORT][NV], v[SHORT][NV];
        for (int64_t j = 0; j < n; j++)
            for (int c = 0; c < NV; c++) {
                k[j][c] = load<DW>(X + j * ldx + ko + h * DP + c * DW);
                v[j][c] = load<DW>(X + j * ldx + vo + h * DP + c * DW);
            }
        for (int64_t i = 0; i < n; i++) {
            vd q[NV];
            for (int c = 0; c < NV; c++) q[c] = load<DW>(X + i * ldx + h * DP + c * DW);
            float s[SHORT], mx = -INFINITY, sum = 0.f;
            for (int64_t j = 0; j < n; j++) {
                vd acc = q[0] * k[j][0];
                for (int c = 1; c < NV; c++) acc += q[c] * k[j][c];
                s[j] = vis && vis[i] && !vis[j] ? -INFINITY : hsum_v(acc) * scale;
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int64_t j = 0; j < n; j++) {
                s[j] = sexp2((s[j] - mx) * LOG2E);  // mx is finite: a query always sees itself
                sum += s[j];
            }
            const float inv = 1.f / sum;
            vd o[NV];
            for (int c = 0; c < NV; c++) o[c] = vd{};
            for (int64_t j = 0; j < n; j++) {
                const float pj = s[j] * inv;
                if (P) P[(h * n + i) * n + j] = pj;
                for (int c = 0; c < NV; c++) o[c] += v[j][c] * pj;
            }
            for (int c = 0; c < NV; c++) store<DW>(O + i * ldo + h * DP + c * DW, o[c]);
        }
    }
}

template <int DP>
static void backward_short(const float* X, int64_t ldx, int64_t ko, int64_t vo, int64_t H,
                           int64_t n, const float* P, const float* G, int64_t ldg, float* dX,
                           int64_t lddx, int64_t dko, int64_t dvo, float scale) {
    constexpr int DW = DP < W ? DP : W;
    constexpr int NV = DP / DW;
    typedef typename V<DW>::T vd;
    for (int64_t h = 0; h < H; h++) {
        vd q[SHORT][NV], k[SHORT][NV], v[SHORT][NV], g[SHORT][NV];
        for (int64_t j = 0; j < n; j++)
            for (int c = 0; c < NV; c++) {
                q[j][c] = load<DW>(X + j * ldx + h * DP + c * DW);
                k[j][c] = load<DW>(X + j * ldx + ko + h * DP + c * DW);
                v[j][c] = load<DW>(X + j * ldx + vo + h * DP + c * DW);
                g[j][c] = load<DW>(G + j * ldg + h * DP + c * DW);
            }
        const float* Ph = P + h * n * n;
        float ds[SHORT][SHORT];
        for (int64_t i = 0; i < n; i++) {
            float dp[SHORT], delta = 0.f;
            for (int64_t j = 0; j < n; j++) {
                vd acc = g[i][0] * v[j][0];
                for (int c = 1; c < NV; c++) acc += g[i][c] * v[j][c];
                dp[j] = hsum_v(acc);
                delta += Ph[i * n + j] * dp[j];
            }
            vd dq[NV];
            for (int c = 0; c < NV; c++) dq[c] = vd{};
            for (int64_t j = 0; j < n; j++) {
                ds[i][j] = Ph[i * n + j] * (dp[j] - delta) * scale;
                for (int c = 0; c < NV; c++) dq[c] += k[j][c] * ds[i][j];
            }
            for (int c = 0; c < NV; c++) store<DW>(dX + i * lddx + h * DP + c * DW, dq[c]);
        }
        for (int64_t j = 0; j < n; j++) {
            vd dk[NV], dv[NV];
            for (int c = 0; c < NV; c++) dk[c] = dv[c] = vd{};
            for (int64_t i = 0; i < n; i++) {
                const float pij = Ph[i * n + j];
                for (int c = 0; c < NV; c++) {
                    dk[c] += q[i][c] * ds[i][j];
                    dv[c] += g[i][c] * pij;
                }
            }
            for (int c = 0; c < NV; c++) {
                store<DW>(dX + j * lddx + dko + h * DP + c * DW, dk[c]);
                store<DW>(dX + j * lddx + dvo + h * DP + c * DW, dv[c]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Forward.

template <int DP>
static void forward_head(const float* X, int64_t ldx, int64_t vo, int64_t h, int64_t n,
                         int64_t np, const float* KT, const float* bpad, const float* bvis,
                         const uint8_t* vis, float* P, float* stile, float* O, int64_t ldo,
                         const float* zero, float scale) {
    // All the weights of the head first, then the outputs: the mixing loads single weights
    // that were just stored as vectors, which stalls when it follows the store too closely.
    float* Sh = P ? P : stile;
    for (int64_t i = 0; i < n; i += TI) {
        const float* q[TI];
        const float* bias[TI];
        for (int t = 0; t < TI; t++) {
            const bool real = i + t < n;
            q[t] = real ? X + (i + t) * ldx + h * DP : zero;
            bias[t] = real && vis && vis[i + t] ? bvis : bpad;
        }
        float* S = Sh + i * np;
        if (np == W) {
            attend_tile<DP, 1>(q, KT, np, scale, bias, S);
        } else if (np == 2 * W) {
            attend_tile<DP, 2>(q, KT, np, scale, bias, S);
        } else {
            score_tile<DP>(q, KT, np, scale, bias, S);
            softmax_tile(S, np);
        }
    }
    mix_rows<DP>(Sh, np, X + vo + h * DP, ldx, n, O + h * DP, ldo);
}

template <int DP>
static bool forward_rows(const Ctx& c, int64_t r0, int64_t r1, int64_t poff) {
    const int64_t HD = c.HD, HPp = c.HPp, ld = 3 * HD;
    const int64_t npmax = round_up(c.maxn > 0 ? c.maxn : 1, W);
    Carver cv;
    const size_t o_x = c.direct ? 0 : cv.add(npmax * 3 * HPp);
    const size_t o_kt = cv.add(HPp * npmax);
    const size_t o_bias = cv.add(2 * npmax);
    const size_t o_s = cv.add(round_up(npmax, TI) * npmax);
    const size_t o_o = c.direct ? 0 : cv.add(npmax * HPp);
    const size_t o_zero = cv.add(3 * HPp + W);
    float* buf = tls_scratch.get(cv.total);
    if (!buf) return false;
    float* kt = buf + o_kt;
    float* bpad = buf + o_bias;
    float* bvis = bpad + npmax;
    float* zero = buf + o_zero;
    memset(zero, 0, sizeof(float) * (3 * HPp + W));
    const size_t esize = c.esize;

    for (int64_t r = r0; r < r1; r++) {
        const int64_t n = c.row_len[r], base = c.row_slot[r];
        if (n == 0) continue;
        if (r + 1 < r1 && c.row_len[r + 1] > 1) {
            const int64_t n1 = c.row_len[r + 1], b1 = c.row_slot[r + 1];
            prefetch((const char*)c.qkv + b1 * ld * esize, n1 * ld * esize);
            prefetch_write((char*)c.out + b1 * HD * esize, n1 * HD * esize);
        }
        if (n == 1) {  // one key: the output is the value
            memcpy((char*)c.out + base * HD * esize, (const char*)c.qkv + (base * ld + 2 * HD) * esize,
                   HD * esize);
            continue;
        }
        const int64_t np = round_up(n, W), nq = round_up(n, TI);
        const float* X;
        float* O;
        int64_t ldx, ko, vo, ldo;
        if (c.direct) {
            X = (const float*)c.qkv + base * ld;
            ldx = ld, ko = HD, vo = 2 * HD;
            O = (float*)c.out + base * HD;
            ldo = HD;
        } else {
            copy_in(c, c.qkv, base, ld, 3, n, buf + o_x);
            X = buf + o_x;
            ldx = 3 * HPp, ko = HPp, vo = 2 * HPp;
            O = buf + o_o;
            ldo = HPp;
        }
        const uint8_t* vis = c.visible ? c.visible + base : nullptr;
        if (n <= SHORT) {
            forward_short<DP>(X, ldx, ko, vo, c.H, n, vis, O, ldo,
                              c.probs ? c.probs + poff : nullptr, c.scale);
        } else {
            for (int64_t j = 0; j < np; j++) {
                bpad[j] = j < n ? 0.f : -INFINITY;
                bvis[j] = j < n && (!vis || vis[j]) ? 0.f : -INFINITY;
            }
            transpose_rows(X, ldx, ko, HPp, n, np, kt);
            for (int64_t h = 0; h < c.H; h++) {
                float* P = c.probs ? c.probs + poff + h * nq * np : nullptr;
                forward_head<DP>(X, ldx, vo, h, n, np, kt + h * DP * np, bpad, bvis, vis, P,
                                 buf + o_s, O, ldo, zero, c.scale);
            }
        }
        if (!c.direct) copy_out(c, O, 1, n, c.out, base, HD);
        poff += probs_of(n, c.H);
    }
    return true;
}

// ---------------------------------------------------------------------------------------
// Backward.

// dK[j] = sum_i dS[i][j] Q[i] and dV[j] = sum_i P[i][j] dO[i] for the KT keys j0..j0+KT-1
// (stored for the first `valid`).
template <int DP, int KT>
INL void key_grads_tile(const float* X, int64_t ldx, const float* G, int64_t ldg,
                        const float* P, const float* DS, int64_t np, int64_t n, int64_t j0,
                        float* dK, float* dV, int64_t lddx, int valid) {
    constexpr int DW = DP < W ? DP : W;
    constexpr int NV = DP / DW;
    typedef typename V<DW>::T vd;
    vd dk[KT][NV], dv[KT][NV];
    for (int t = 0; t < KT; t++)
        for (int c = 0; c < NV; c++) dk[t][c] = dv[t][c] = vd{};
    for (int64_t i = 0; i < n; i++) {
        vd gv[NV], qv[NV];
        for (int c = 0; c < NV; c++) {
            gv[c] = load<DW>(G + i * ldg + c * DW);
            qv[c] = load<DW>(X + i * ldx + c * DW);
        }
        const float* p = P + i * np + j0;
        const float* s = DS + i * np + j0;
        for (int t = 0; t < KT; t++) {
            const float pt = p[t], st = s[t];
            for (int c = 0; c < NV; c++) {
                dv[t][c] += gv[c] * pt;
                dk[t][c] += qv[c] * st;
            }
        }
    }
    for (int t = 0; t < valid; t++)
        for (int c = 0; c < NV; c++) {
            store<DW>(dK + (j0 + t) * lddx + c * DW, dk[t][c]);
            store<DW>(dV + (j0 + t) * lddx + c * DW, dv[t][c]);
        }
}

template <int DP>
static void backward_head(const float* X, int64_t ldx, int64_t ko, int64_t h, int64_t n,
                          int64_t np, const float* VT, const float* P, const float* G,
                          int64_t ldg, float* dX, int64_t lddx, int64_t dko, int64_t dvo,
                          float* DS, const float* zero, float scale) {
    constexpr int NV = DP / (DP < W ? DP : W);
    for (int64_t i = 0; i < n; i += TI) {
        const float* g[TI];
        for (int t = 0; t < TI; t++) g[t] = i + t < n ? G + (i + t) * ldg + h * DP : zero;
        float* dS = DS + i * np;
        const float* Pi = P + i * np;
        if (np == W) {
            grad_scores_tile<DP, 1>(g, VT, np, Pi, scale, dS);
        } else if (np == 2 * W) {
            grad_scores_tile<DP, 2>(g, VT, np, Pi, scale, dS);
        } else {
            score_tile<DP>(g, VT, np, 1.f, nullptr, dS);  // dP
            for (int t = 0; t < TI; t++) {
                const float* p = Pi + t * np;
                float* s = dS + t * np;
                vf acc = vf{};
                for (int64_t j = 0; j < np; j += W) acc += load<W>(p + j) * load<W>(s + j);
                const vf delta = splat(hsum(acc));
                for (int64_t j = 0; j < np; j += W)
                    store<W>(s + j, load<W>(p + j) * (load<W>(s + j) - delta) * scale);
            }
        }
    }
    mix_rows<DP>(DS, np, X + ko + h * DP, ldx, n, dX + h * DP, lddx);  // dQ
    const float* Xq = X + h * DP;
    const float* Gh = G + h * DP;
    float* dK = dX + dko + h * DP;
    float* dV = dX + dvo + h * DP;
    int64_t j = 0;
    if (NV == 1)
        for (; j + 2 * TJ <= n; j += 2 * TJ)
            key_grads_tile<DP, 2 * TJ>(Xq, ldx, Gh, ldg, P, DS, np, n, j, dK, dV, lddx, 2 * TJ);
    for (; j < n; j += TJ) {
        const int valid = n - j < TJ ? (int)(n - j) : TJ;
        key_grads_tile<DP, TJ>(Xq, ldx, Gh, ldg, P, DS, np, n, j, dK, dV, lddx, valid);
    }
}

template <int DP>
static bool backward_rows(const Ctx& c, int64_t r0, int64_t r1, int64_t poff) {
    const int64_t HD = c.HD, HPp = c.HPp, ld = 3 * HD;
    const int64_t npmax = round_up(c.maxn > 0 ? c.maxn : 1, W);
    Carver cv;
    const size_t o_x = c.direct ? 0 : cv.add(npmax * 3 * HPp);
    const size_t o_g = c.direct ? 0 : cv.add(npmax * HPp);
    const size_t o_dx = c.direct ? 0 : cv.add(npmax * 3 * HPp);
    const size_t o_vt = cv.add(HPp * npmax);
    const size_t o_ds = cv.add(npmax * npmax);
    const size_t o_zero = cv.add(3 * HPp + W);
    float* buf = tls_scratch.get(cv.total);
    if (!buf) return false;
    float* vt = buf + o_vt;
    float* zero = buf + o_zero;
    memset(zero, 0, sizeof(float) * (3 * HPp + W));
    const size_t esize = c.esize;

    for (int64_t r = r0; r < r1; r++) {
        const int64_t n = c.row_len[r], base = c.row_slot[r];
        if (n == 0) continue;
        if (r + 1 < r1 && c.row_len[r + 1] > 1) {
            const int64_t n1 = c.row_len[r + 1], b1 = c.row_slot[r + 1];
            prefetch((const char*)c.qkv + b1 * ld * esize, n1 * ld * esize);
            prefetch((const char*)c.dout + b1 * HD * esize, n1 * HD * esize);
            prefetch(c.probs + poff + probs_of(n, c.H), probs_of(n1, c.H) * sizeof(float));
            prefetch_write((char*)c.dqkv + b1 * ld * esize, n1 * ld * esize);
        }
        if (n == 1) {  // dQ = dK = 0, dV = dO
            char* d = (char*)c.dqkv + base * ld * esize;
            memset(d, 0, 2 * HD * esize);
            memcpy(d + 2 * HD * esize, (const char*)c.dout + base * HD * esize, HD * esize);
            continue;
        }
        const int64_t np = round_up(n, W), nq = round_up(n, TI);
        const float *X, *G;
        float* dX;
        int64_t ldx, ko, vo, ldg, lddx, dko, dvo;
        if (c.direct) {
            X = (const float*)c.qkv + base * ld;
            ldx = ld, ko = HD, vo = 2 * HD;
            G = (const float*)c.dout + base * HD;
            ldg = HD;
            dX = (float*)c.dqkv + base * ld;
            lddx = ld, dko = HD, dvo = 2 * HD;
        } else {
            copy_in(c, c.qkv, base, ld, 3, n, buf + o_x);
            X = buf + o_x;
            ldx = 3 * HPp, ko = HPp, vo = 2 * HPp;
            copy_in(c, c.dout, base, HD, 1, n, buf + o_g);
            G = buf + o_g;
            ldg = HPp;
            dX = buf + o_dx;
            lddx = 3 * HPp, dko = HPp, dvo = 2 * HPp;
        }
        if (n <= SHORT) {
            backward_short<DP>(X, ldx, ko, vo, c.H, n, c.probs + poff, G, ldg, dX, lddx, dko, dvo,
                               c.scale);
        } else {
            transpose_rows(X, ldx, vo, HPp, n, np, vt);
            for (int64_t h = 0; h < c.H; h++) {
                backward_head<DP>(X, ldx, ko, h, n, np, vt + h * DP * np,
                                  c.probs + poff + h * nq * np, G, ldg, dX, lddx, dko, dvo,
                                  buf + o_ds, zero, c.scale);
            }
        }
        if (!c.direct) copy_out(c, dX, 3, n, c.dqkv, base, ld);
        poff += probs_of(n, c.H);
    }
    return true;
}

// ---------------------------------------------------------------------------------------
// Planning, padding and threads.

typedef bool (*RowsFn)(const Ctx&, int64_t, int64_t, int64_t);  // false: out of memory

template <bool Fwd, int DP>
static RowsFn pick_dp(int64_t dp) {
    if (dp == DP) return Fwd ? forward_rows<DP> : backward_rows<DP>;
    if constexpr (2 * DP <= MAX_DP) return pick_dp<Fwd, 2 * DP>(dp);
    return nullptr;
}

template <bool Fwd>
static RowsFn rows_fn(int64_t dp) {
    constexpr int first = W < 8 ? W : 8;
    return pick_dp<Fwd, first>(dp);
}

// Heads are padded (with zero features) to a power of two of at least min(W, 8) features:
// one compiled variant per width keeps the library small and quick to build.
static int64_t padded_head_dim(int64_t D) {
    int64_t dp = W < 8 ? W : 8;
    while (dp < D) dp *= 2;
    return dp;
}


// Rough cost of a row (about 2000 units per microsecond on one core).
static inline int64_t cost_of(int64_t n, int64_t H, int64_t DP) {
    if (n <= 1) return 16 * n;
    if (n <= SHORT) return 32 + H * n * (n * DP / 4 + 40);
    return 64 + H * round_up(n, TI) * round_up(n, W) * (DP + 12) / 16;
}

// Work of one call below this (in cost_of units) runs on one thread.
#define MIN_COST_PER_THREAD 60000

// Validates the rows (and the saved probabilities' size) and finds the longest; returns 0 or
// an error code. covered: set when rows are not sorted by slot (caller frees).
static int plan(Ctx& c, uint8_t** covered, int64_t* total_cost) {
    int64_t maxn = 0, end = 0, cost = 0, probs = 0;
    bool sorted = true;
    *covered = nullptr;
    for (int64_t r = 0; r < c.R; r++) {
        const int64_t s = c.row_slot[r], n = c.row_len[r];
        if (n < 0 || s < 0 || s > c.slots || n > c.slots - s) return -1;
        if (n == 0) continue;
        if (s < end) sorted = false;
        end = s + n;
        if (n > maxn) maxn = n;
        cost += cost_of(n, c.H, c.DP);
        probs += probs_of(n, c.H);
    }
    if ((c.probs || c.dqkv) && probs != c.probs_len) return -4;
    if (c.dqkv && !c.probs && probs > 0) return -4;
    c.maxn = maxn;
    *total_cost = cost;
    if (!sorted) {
        uint8_t* m = (uint8_t*)calloc(c.slots > 0 ? c.slots : 1, 1);
        if (!m) return -5;
        for (int64_t r = 0; r < c.R; r++) {
            const int64_t s = c.row_slot[r], n = c.row_len[r];
            if (n == 0) continue;
            if (memchr(m + s, 1, n)) {
                free(m);
                return -2;
            }
            memset(m + s, 1, n);
        }
        *covered = m;
    }
    c.covered = *covered;
    return 0;
}

// Zeroes the rows of slots no row covers: with sorted rows, the gaps that follow this
// thread's rows (thread 0 also the leading gap); otherwise this thread's share of all slots.
static void zero_gaps(const Ctx& c, int t, int nt, int64_t r0, int64_t r1, char* dst,
                      int64_t row_bytes) {
    if (c.covered) {
        const int64_t s0 = c.slots * t / nt, s1 = c.slots * (t + 1) / nt;
        for (int64_t s = s0; s < s1;) {
            if (c.covered[s]) {
                s++;
                continue;
            }
            int64_t e = s + 1;
            while (e < s1 && !c.covered[e]) e++;
            memset(dst + s * row_bytes, 0, (e - s) * row_bytes);
            s = e;
        }
        return;
    }
    int64_t prev_end = t == 0 ? 0 : -1;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t n = c.row_len[r], s = c.row_slot[r];
        if (n == 0) continue;
        if (prev_end >= 0 && s > prev_end) memset(dst + prev_end * row_bytes, 0, (s - prev_end) * row_bytes);
        prev_end = s + n;
    }
    if (prev_end < 0) return;
    int64_t next = c.slots;
    for (int64_t r = r1; r < c.R; r++)
        if (c.row_len[r] > 0) {
            next = c.row_slot[r];
            break;
        }
    if (next > prev_end) memset(dst + prev_end * row_bytes, 0, (next - prev_end) * row_bytes);
}

#define MAX_THREADS 256

static int64_t run(Ctx& c, bool fwd, int64_t nthreads) {
    uint8_t* covered;
    int64_t total;
    const int err = plan(c, &covered, &total);
    if (err) return err;
    const RowsFn fn = fwd ? rows_fn<true>(c.DP) : rows_fn<false>(c.DP);
    if (!fn) {
        free(covered);
        return -3;
    }
    int64_t nt = total / MIN_COST_PER_THREAD;
    if (nt > nthreads) nt = nthreads;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt < 1) nt = 1;
    // Rows [bound[t], bound[t+1]) of similar total cost, and the offset of their probabilities.
    int64_t bound[MAX_THREADS + 1], poff[MAX_THREADS + 1];
    bound[0] = poff[0] = 0;
    {
        int64_t t = 1, cum = 0, off = 0;
        for (int64_t r = 0; r < c.R && t < nt; r++) {
            const int64_t n = c.row_len[r];
            cum += n > 0 ? cost_of(n, c.H, c.DP) : 0;
            off += probs_of(n, c.H);
            while (t < nt && cum * nt >= total * t) {
                bound[t] = r + 1;
                poff[t] = off;
                t++;
            }
        }
        for (; t <= nt; t++) {
            bound[t] = c.R;
            poff[t] = off;
        }
        bound[nt] = c.R;
    }
    char* dst = (char*)(fwd ? c.out : c.dqkv);
    const int64_t row_bytes = (fwd ? 1 : 3) * c.HD * c.esize;
    int failed = 0;
    run_threads(nt, [&](int64_t t) {
        if (!fn(c, bound[t], bound[t + 1], poff[t])) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
        zero_gaps(c, (int)t, (int)nt, bound[t], bound[t + 1], dst, row_bytes);
    });
    free(covered);
    return failed ? -5 : 0;
}

static Ctx make_ctx(const void* qkv, const int64_t* row_slot, const int64_t* row_len,
                    int64_t R, int64_t slots, int64_t H, int64_t D, int64_t dtype) {
    Ctx c;
    memset(&c, 0, sizeof(c));
    c.qkv = qkv;
    c.row_slot = row_slot;
    c.row_len = row_len;
    c.R = R, c.slots = slots, c.H = H, c.D = D, c.dtype = dtype;
    c.esize = dtype == 0 ? 4 : 2;
    c.DP = padded_head_dim(D);
    c.HD = H * D;
    c.HPp = round_up(H * c.DP, W);
    c.scale = 1.0f / sqrtf((float)D);
    c.direct = dtype == 0 && c.D == c.DP && c.HD % W == 0;
    return c;
}

// ---------------------------------------------------------------------------------------
// Exported functions. All return 0 on success or a negative error code:
// -1 a row outside [0, slots), -2 overlapping rows, -3 unsupported head width, -4 saved
// probabilities that do not match the rows, -5 out of memory.

extern "C" {

// info[0] = vector width in floats, info[1] = largest head width, info[2] = 1 with OpenMP.
void ra_info(int64_t* info) {
    info[0] = W;
    info[1] = MAX_DP;
#ifdef _OPENMP
    info[2] = 1;
#else
    info[2] = 0;
#endif
}

// Number of floats of saved probabilities for these rows (or -1 for a negative length).
int64_t ra_probs_size(const int64_t* row_len, int64_t R, int64_t H) {
    int64_t total = 0;
    for (int64_t r = 0; r < R; r++) {
        if (row_len[r] < 0) return -1;
        total += probs_of(row_len[r], H);
    }
    return total;
}

// probs: NULL (nothing saved) or room for exactly probs_len = ra_probs_size(...) floats.
int64_t ra_forward(const void* qkv, void* out, float* probs, int64_t probs_len,
                   const int64_t* row_slot, const int64_t* row_len, const uint8_t* visible,
                   int64_t R, int64_t slots, int64_t H, int64_t D, int64_t dtype,
                   int64_t nthreads) {
    Ctx c = make_ctx(qkv, row_slot, row_len, R, slots, H, D, dtype);
    c.out = out;
    c.probs = probs;
    c.probs_len = probs_len;
    c.visible = visible;
    return run(c, true, nthreads);
}

// probs, probs_len: what the forward saved (checked against the rows).
int64_t ra_backward(const void* qkv, const void* dout, const float* probs, int64_t probs_len,
                    void* dqkv, const int64_t* row_slot, const int64_t* row_len, int64_t R,
                    int64_t slots, int64_t H, int64_t D, int64_t dtype, int64_t nthreads) {
    Ctx c = make_ctx(qkv, row_slot, row_len, R, slots, H, D, dtype);
    c.probs = (float*)probs;
    c.probs_len = probs_len;
    c.dout = dout;
    c.dqkv = dqkv;
    return run(c, false, nthreads);
}

}  // extern "C"
