// Multi-head self-attention within ragged rows: forward and backward on the CPU.
//
// Built at run time by entityrl/nn/kernels/build.py (g++ or clang++ -O3 -march=native, OpenMP
// when available) and called through ctypes; the contract is documented in
// entityrl/nn/kernels/__init__.py. Written with the vector extensions of GCC and clang (plus a
// few AVX-512 intrinsics in the exponential), so the same source compiles on any x86-64
// (vectors of 16 floats with AVX-512, 8 with AVX, 4 otherwise) and on aarch64; the vector
// types and helpers shared with the other kernels are in simd.h.
//
// The work, per row of n tokens and per head (features padded to DP, a power of two):
//   forward   S = Q K^T in tiles of TI queries x all keys, vectorised over keys (K is
//             transposed once per row, W x W blocks in registers); softmax over the keys, in
//             registers for rows of up to NB_MAX vectors of keys; O = P V vectorised over
//             features (V read in place; interleaved for pairs, below), 8 queries at a time.
//   backward  dP = dO V^T (V transposed like K), dS = P * (dP - rowsum(P * dP)) * scale,
//             dQ = dS K (tiles of queries), dK = dS^T Q and dV = P^T dO (tiles of keys, no
//             transposes).
// With AVX512-BF16, the dot products of S and dP take bfloat16 rows as pairs (vdpbf16ps: two
// exact products per lane and instruction); the forward then saves only each query's largest
// score and 1 / sum of exponentials, and the backward recomputes P from them tile by tile
// (K transposed too), which costs less than writing the whole P (padded to the tiles, twice
// the size of qkv at 34 tokens) and reading it back. The products O = P V, dQ, dK and dV take
// pairs too: P and dS are rounded to bfloat16 (one more rounding of each term, of the order of
// that of the bfloat16 result) and paired over keys for O and dQ, over queries for dK and dV,
// whose other operands are the rows interleaved two by two; that rounding also lets the
// exponentials of P take a cheaper polynomial (see exp_shifted). With float dot products
// recomputing costs more, and the forward saves P. Rows of up to SHORT tokens skip the tiles
// (dot products over features, scalar softmax); a one-token row's output is its value. Rows
// are split between threads by estimated work. Accumulation is always in float32; bfloat16 rows are
// widened into per-thread scratch first (as are heads whose width needs padding; pairs read
// unpadded bfloat16 rows as they are) and results are rounded to nearest even.

#include <type_traits>

#include "simd.h"

#define MAX_DP 128  // widest head
#define TI 4  // queries per tile
#define TJ 4  // keys per tile (dK, dV)
#define SHORT 4  // rows up to this long skip the tiles: dot products over features instead
// Rows of up to NB_MAX vectors of keys keep a tile's scores in registers (TI * NB_MAX
// accumulators and NB_MAX vectors of keys: 20 of AVX-512's 32 registers, 10 of AVX's 16).
// With AVX-512, GCC needs two nudges not to spill such tiles: the loops over the tiles of a
// head are compiled on their own, each with its own register allocation (NOINL), and the
// vectors of keys loaded for the dot products stay in registers (IN_REGISTER) instead of
// being folded into each FMA as a memory operand, which loads them TI times. With AVX's 16
// registers both cost a few percent.
#if W == 16
#define NB_MAX 4
#define NOINL static __attribute__((noinline))
#define IN_REGISTER(x) asm("" : "+v"(x))
#else
#define NB_MAX 2
#define NOINL INL
#define IN_REGISTER(x) (void)(x)
#endif

// Lane permutations for the transpose: interleaves of floats and of float pairs within
// 128-bit lanes (unpcklps/unpcklpd) and moves of whole 128-bit lanes, which all compile to
// single immediate-operand shuffles.
#if W == 16
#define PS_LO 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29
#define PS_HI 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31
#define PD_LO 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define PD_HI 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define LANES_EVEN 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27
#define LANES_ODD 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31
#elif W == 8
#define PS_LO 0, 8, 1, 9, 4, 12, 5, 13
#define PS_HI 2, 10, 3, 11, 6, 14, 7, 15
#define PD_LO 0, 1, 8, 9, 4, 5, 12, 13
#define PD_HI 2, 3, 10, 11, 6, 7, 14, 15
#define LANES_EVEN 0, 1, 2, 3, 8, 9, 10, 11
#define LANES_ODD 4, 5, 6, 7, 12, 13, 14, 15
#else
#define PS_LO 0, 4, 1, 5
#define PS_HI 2, 6, 3, 7
#define PD_LO 0, 1, 4, 5
#define PD_HI 2, 3, 6, 7
#endif

INL vf vmax(vf a, vf b) { return a > b ? a : b; }

// Horizontal sums of the feature vectors (whatever their width).
INL float hsum_v(V<4>::T a) {
    a += SHUFFLE(a, a, 2, 3, 0, 1);
    a += SHUFFLE(a, a, 1, 0, 3, 2);
    return a[0];
}
INL float hsum_v(V<8>::T a) {
    a += SHUFFLE(a, a, 4, 5, 6, 7, 0, 1, 2, 3);
    a += SHUFFLE(a, a, 2, 3, 0, 1, 6, 7, 4, 5);
    a += SHUFFLE(a, a, 1, 0, 3, 2, 5, 4, 7, 6);
    return a[0];
}
INL float hsum_v(V<16>::T a) {
    a += SHUFFLE(a, a, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    a += SHUFFLE(a, a, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    a += SHUFFLE(a, a, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    a += SHUFFLE(a, a, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    return a[0];
}

INL float hmax(vf a) {
#if W >= 16
    a = vmax(a, SHUFFLE(a, a, XM(8)));
#endif
#if W >= 8
    a = vmax(a, SHUFFLE(a, a, XM(4)));
#endif
    a = vmax(a, SHUFFLE(a, a, XM(2)));
    a = vmax(a, SHUFFLE(a, a, XM(1)));
    return a[0];
}

// Polynomials p(f) ~ 2^f for |f| <= 1/2 with p(0) = 1 exactly, coefficients of f^DEG down to
// f^1: Cephes' exp2f (degree 6, relative error ~1e-7, float32 accuracy), and a fit of degree 3
// minimising the relative error (1.03e-4, 19 times below the 2^-9 of rounding to bfloat16).
template <int DEG>
constexpr float EXP2_POLY[DEG] = {};
template <>
constexpr float EXP2_POLY<6>[6] = {1.535336188319500e-4f, 1.339887440266574e-3f,
                                   9.618437357674640e-3f, 5.550332471162809e-2f,
                                   2.402264791363012e-1f, 6.931472028550421e-1f};
template <>
constexpr float EXP2_POLY<3>[3] = {5.500667169690132e-2f, 2.422056347131729e-1f,
                                   6.932826042175293e-1f};

// 2^t for t <= 0 (scores minus their row maximum, times log2 e): 2^k * p(f) with
// k = round(t), |f| <= 1/2 and p = EXP2_POLY<DEG>. -inf and anything below 2^-126 give
// exactly 0 (no denormals); NaN stays NaN.
#define LOG2E 1.44269504088896341f
template <int DEG>
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
    vf p = splat(EXP2_POLY<DEG>[0]);
    for (int d = 1; d < DEG; d++) p = p * f + EXP2_POLY<DEG>[d];
    p = p * f + 1.0f;
#ifdef __AVX512F__
    return _mm512_maskz_scalef_ps(keep, p, k);
#else
    const vi e = (__builtin_convertvector(k, vi) + 127) << 23;
    return low ? splat(0.f) : p * (vf)e;
#endif
}

// Scalar 2^t (t <= 0), as vexp2<6>.
INL float sexp2(float t) {
    if (!(t >= -126.f)) return t != t ? t : 0.f;
    const float k = (t + 12582912.f) - 12582912.f;
    const float f = t - k;
    float p = EXP2_POLY<6>[0];
    for (int d = 1; d < 6; d++) p = p * f + EXP2_POLY<6>[d];
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
        const vf t0 = SHUFFLE(x[0], x[1], PS_LO), t1 = SHUFFLE(x[0], x[1], PS_HI);
        const vf t2 = SHUFFLE(x[2], x[3], PS_LO), t3 = SHUFFLE(x[2], x[3], PS_HI);
        x[0] = SHUFFLE(t0, t2, PD_LO);
        x[1] = SHUFFLE(t0, t2, PD_HI);
        x[2] = SHUFFLE(t1, t3, PD_LO);
        x[3] = SHUFFLE(t1, t3, PD_HI);
    }
#if W == 16
    vf o[W];
    for (int c = 0; c < 4; c++) {
        const vf v0 = SHUFFLE(r[c], r[4 + c], LANES_EVEN);
        const vf v1 = SHUFFLE(r[c], r[4 + c], LANES_ODD);
        const vf v2 = SHUFFLE(r[8 + c], r[12 + c], LANES_EVEN);
        const vf v3 = SHUFFLE(r[8 + c], r[12 + c], LANES_ODD);
        o[c] = SHUFFLE(v0, v2, LANES_EVEN);
        o[8 + c] = SHUFFLE(v0, v2, LANES_ODD);
        o[4 + c] = SHUFFLE(v1, v3, LANES_EVEN);
        o[12 + c] = SHUFFLE(v1, v3, LANES_ODD);
    }
    for (int i = 0; i < W; i++) r[i] = o[i];
#elif W == 8
    vf o[W];
    for (int c = 0; c < 4; c++) {
        o[c] = SHUFFLE(r[c], r[4 + c], LANES_EVEN);
        o[4 + c] = SHUFFLE(r[c], r[4 + c], LANES_ODD);
    }
    for (int i = 0; i < W; i++) r[i] = o[i];
#endif
}

// Floats the forward saves per row for the backward: the weights P, (H, n, n) for short rows
// and (H, round_up(n, TI), round_up(n, W)) for tiled ones (padded like the tiles); or, when the
// backward recomputes them (recompute: RECOMPUTE<E>), only the softmax statistics of each
// query (the tiles' padding queries included), its largest score and the reciprocal of its
// sum of exponentials, (H, 2, round_up(n, TI)).
static inline int64_t saved_of(int64_t n, int64_t H, bool recompute) {
    if (n <= 1) return 0;
    if (recompute) return 2 * H * round_up(n, TI);
    return n <= SHORT ? H * n * n : H * round_up(n, TI) * round_up(n, W);
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
    float* saved;      // what the forward saves for the backward (see saved_of; NULL: nothing)
    const void* dout;  // backward: gradient of the output
    void* dqkv;        // backward: gradient of qkv
    const int64_t* row_slot;
    const int64_t* row_len;
    const uint8_t* visible;
    const uint8_t* covered;  // NULL when rows are sorted by slot
    int64_t R, slots, H, D, DP, HD, HPp, dtype, esize, maxn, saved_len;
    float scale;
    bool pairs;   // the dot products take bfloat16 pairs (and the backward recomputes P)
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

// Copies `parts` column blocks of H heads of D elements (source row stride ld = parts*H*D
// elements) of n rows into float rows of stride parts*HPp: block p at p*HPp, head h
// at h*DP, zeros in the padding columns.
static void copy_in(const Ctx& c, const void* src, int64_t base, int64_t ld, int parts,
                    int64_t n, float* dst) {
    const int64_t ldx = parts * c.HPp;
    const bool pad = c.D != c.DP || c.H * c.DP != c.HPp;
    if (!pad) {  // the same layout: one block
        widen(src, c.dtype, base * ld, dst, n * ld);
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        float* row = dst + j * ldx;
        if (pad) memset(row, 0, sizeof(float) * ldx);
        for (int p = 0; p < parts; p++) {
            const int64_t off = (base + j) * ld + p * c.HD;
            for (int64_t h = 0; h < c.H; h++)
                widen(src, c.dtype, off + h * c.D, row + p * c.HPp + h * c.DP, c.D);
        }
    }
}

// The inverse of copy_in: float rows (stride parts*HPp) to the caller's dtype and layout.
static void copy_out(const Ctx& c, const float* src, int parts, int64_t n, void* dst,
                     int64_t base, int64_t ld) {
    const int64_t ldx = parts * c.HPp;
    if (c.D == c.DP && c.H * c.DP == c.HPp) {  // the same layout: one block
        narrow(src, dst, c.dtype, base * ld, n * ld);
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        const float* row = src + j * ldx;
        for (int p = 0; p < parts; p++) {
            const int64_t off = (base + j) * ld + p * c.HD;
            for (int64_t h = 0; h < c.H; h++)
                narrow(row + p * c.HPp + h * c.DP, dst, c.dtype, off + h * c.D, c.D);
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

// Elements E of the dot products of scores and of their gradients: floats, or (with
// AVX512-BF16, for bfloat16 inputs) pairs of bfloat16 features in a uint32_t, which
// vdpbf16ps multiplies and adds two at a time: half the instructions, and the same float32
// result up to the order of the sums (bfloat16 products are exact in float32).
template <class E>
constexpr int PACK = std::is_same<E, float>::value ? 1 : 2;  // features per element

// Whether the backward recomputes the weights P from the saved softmax statistics rather than
// reading them saved whole: with pairs, whose dot products cost half as much; with floats,
// recomputing costs more than writing and reading P.
template <class E>
constexpr bool RECOMPUTE = PACK<E> == 2;

// acc + k * x, for vectors of floats of any width.
template <class T>
INL T madd(T acc, T k, float x) {
    return acc + k * x;
}
#if W == 16 && defined(__AVX512BF16__) && defined(__AVX512VL__)
#define BF16_DOTS
// acc plus, in each lane, the two products of its pair of bfloat16 in k with the pair x.
INL V<16>::T madd(V<16>::T acc, V<16>::T k, uint32_t x) {
    return (V<16>::T)_mm512_dpbf16_ps((__m512)acc, (__m512bh)k, (__m512bh)_mm512_set1_epi32(x));
}
INL V<8>::T madd(V<8>::T acc, V<8>::T k, uint32_t x) {
    return (V<8>::T)_mm256_dpbf16_ps((__m256)acc, (__m256bh)k, (__m256bh)_mm256_set1_epi32(x));
}

// The `parts` column blocks of HPp features of n rows as bfloat16 (as pairs, *ld their stride
// in pairs): the caller's rows (src, stride *ld bfloat16) when heads are not padded, else the
// padded rows of floats (X, stride ldx) narrowed again (exactly) into dst.
static const uint32_t* pairs_of(const Ctx& c, const void* src, int64_t* ld, const float* X,
                                int64_t ldx, int parts, int64_t n, float* dst) {
    if (c.D == c.DP && c.H * c.DP == c.HPp) {
        *ld /= 2;
        return (const uint32_t*)src;
    }
    for (int64_t j = 0; j < n; j++) narrow(X + j * ldx, dst, 1, j * parts * c.HPp, parts * c.HPp);
    *ld = parts * c.HPp / 2;
    return (const uint32_t*)dst;
}

// Rows 2p and 2p + 1 of n rows of bfloat16 (Y, stride ld) interleaved feature by feature,
// from column col0: Z[p][f] holds feature f of row 2p in its low half and of row 2p + 1 in its
// high half (0 past row n), for nf features (a multiple of W) and p < (n + 1) / 2 (rows of
// stride nf). This is how a product that sums over rows takes them as pairs (see madd): a
// vector of Z holds two rows.
static void interleave_rows(const uint16_t* Y, int64_t ld, int64_t col0, int64_t nf, int64_t n,
                            uint32_t* Z) {
    for (int64_t p = 0; 2 * p < n; p++) {
        const uint16_t* a = Y + 2 * p * ld + col0;
        const uint16_t* b = a + ld;
        const bool second = 2 * p + 1 < n;
        for (int64_t f = 0; f < nf; f += W) {
            const vu lo = __builtin_convertvector(*(const vhu*)(a + f), vu);
            const vu hi = second ? __builtin_convertvector(*(const vhu*)(b + f), vu) << 16 : vu{};
            store<W>((float*)(Z + p * nf + f), (vf)(lo | hi));
        }
    }
}

#endif

// Where the backward with pairs keeps the bfloat16 operands of dQ = dS K, which sums over
// pairs of keys (dsb: dS row by row, rows of np bfloat16), and of dK = dS^T Q and dV = P^T dO,
// which sum over pairs of queries (dsp, pp: dS and P with the queries paired, row p of np
// pairs holding queries 2p and 2p + 1).
struct PairGrads {
    uint16_t* dsb;
    uint32_t* dsp;
    uint32_t* pp;
};

#ifdef BF16_DOTS
// Packs a vector of weights and of score gradients of queries i and i + 1 (p0, s0 and p1, s1;
// i even) for the same W keys into PairGrads rows (sb: row i of dsb; sp, pp: row i / 2 of dsp
// and pp; all from the first of those keys), rounded to bfloat16.
INL void pack_pair(vf p0, vf p1, vf s0, vf s1, uint16_t* sb, int64_t np, uint32_t* sp,
                   uint32_t* pp) {
    // Both rows in one vector (s0's bfloat16 in the low half), then interleaved.
    const __m512i pairs = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                           24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                           16, 0);
    const __m512i s = (__m512i)_mm512_cvtne2ps_pbh((__m512)s1, (__m512)s0);
    _mm256_storeu_si256((__m256i*)sb, _mm512_castsi512_si256(s));
    _mm256_storeu_si256((__m256i*)(sb + np), _mm512_extracti64x4_epi64(s, 1));
    _mm512_storeu_si512(sp, _mm512_permutexvar_epi16(pairs, s));
    const __m512i w = (__m512i)_mm512_cvtne2ps_pbh((__m512)p1, (__m512)p0);
    _mm512_storeu_si512(pp, _mm512_permutexvar_epi16(pairs, w));
}

// Packs the weights P and score gradients dS (TI rows of np floats) of the tile of TI queries
// from i (a multiple of TI) into o.
INL void pack_tile(const float* P, const float* dS, int64_t np, int64_t i, const PairGrads& o) {
    for (int t = 0; t < TI; t += 2)
        for (int64_t j = 0; j < np; j += W)
            pack_pair(load<W>(P + t * np + j), load<W>(P + (t + 1) * np + j),
                      load<W>(dS + t * np + j), load<W>(dS + (t + 1) * np + j),
                      o.dsb + (i + t) * np + j, np, o.dsp + (i + t) / 2 * np + j,
                      o.pp + (i + t) / 2 * np + j);
}
#endif

// Whether rows of this dtype take pairs (and so whether the backward recomputes the weights).
static bool takes_pairs(int64_t dtype) {
#ifdef BF16_DOTS
    return dtype == 1;
#else
    (void)dtype;  // bfloat16 rows take float dot products too
    return false;
#endif
}

// acc[t][b] = a_t . B^T[:, j0 + b W .. j0 + (b + 1) W) for a tile of TI rows a_t of DP
// features and NB vectors of columns of B^T (BT: DP / PACK rows of np elements).
template <int DP, int NB, class E>
INL void dots_tile(const E* const a[TI], const E* BT, int64_t np, int64_t j0, vf acc[TI][NB]) {
    for (int t = 0; t < TI; t++)
        for (int b = 0; b < NB; b++) acc[t][b] = vf{};
#pragma GCC unroll 16
    for (int d = 0; d < DP / PACK<E>; d++) {
        vf k[NB];
        for (int b = 0; b < NB; b++) {
            k[b] = load<W>((const float*)(BT + d * np + j0 + b * W));
            IN_REGISTER(k[b]);
        }
        for (int t = 0; t < TI; t++) {
            const E x = a[t][d];
            for (int b = 0; b < NB; b++) acc[t][b] = madd(acc[t][b], k[b], x);
        }
    }
}

// s[t][b] = (q_t . K^T) * scale + bias_t over the NB vectors of keys from j0 (bias NULL: the
// plain dot products).
template <int DP, int NB, class E>
INL void scores_tile(const E* const q[TI], const E* KT, int64_t np, int64_t j0, float scale,
                     const float* const bias[TI], vf s[TI][NB]) {
    dots_tile<DP, NB>(q, KT, np, j0, s);
    if (bias)
        for (int t = 0; t < TI; t++)
            for (int b = 0; b < NB; b++) s[t][b] = s[t][b] * scale + load<W>(bias[t] + j0 + b * W);
}

// Calls f(std::integral_constant<int, NB>()) for NB = nb, From <= nb <= NB_MAX.
template <int From, class F>
INL void with_nb(int64_t nb, F f) {
    if constexpr (From <= NB_MAX) {
        if (nb == From)
            f(std::integral_constant<int, From>());
        else
            with_nb<From + 1>(nb, f);
    }
}

// The vectors of keys of a row whose tiles keep their scores in registers, or 0 for a longer
// row (tiles of scores in memory, NB_MAX vectors of keys at a time).
static inline int64_t nb_of(int64_t np) { return np <= NB_MAX * W ? np / W : 0; }

// Calls f(j0, std::integral_constant<int, NB>()) for the pieces of np keys, NB_MAX vectors at a
// time.
template <class F>
INL void for_key_blocks(int64_t np, F f) {
    for (int64_t j0 = 0; j0 < np; j0 += NB_MAX * W) {
        const int64_t nb = (np - j0) / W < NB_MAX ? (np - j0) / W : NB_MAX;
        with_nb<1>(nb, [&](auto NBc) { f(j0, NBc); });
    }
}

// S[t][:] = (q_t . K^T) * scale + bias_t for all np keys, NB_MAX vectors at a time.
template <int DP, class E>
INL void score_tile(const E* const q[TI], const E* KT, int64_t np, float scale,
                    const float* const bias[TI], float* S) {
    for_key_blocks(np, [&](int64_t j0, auto NBc) {
        constexpr int NB = decltype(NBc)::value;
        vf s[TI][NB];
        scores_tile<DP, NB>(q, KT, np, j0, scale, bias, s);
        for (int t = 0; t < TI; t++)
            for (int b = 0; b < NB; b++) store<W>(S + t * np + j0 + b * W, s[t][b]);
    });
}

// exp(s - mx) for scores s of a query whose largest is mx: the same arithmetic in the forward
// and in the backward's recomputation, so that both see the same weights. With pairs the
// weights are rounded to bfloat16 for all their uses but the softmax's sums (O = P V, dQ, dK,
// dV; and dS, from P * dP), so the degree-3 polynomial's error is lost in that rounding.
template <class E>
INL vf exp_shifted(vf s, float mx) {
    return vexp2<PACK<E> == 2 ? 3 : 6>(s * LOG2E + (-mx * LOG2E));
}

// The largest of a query's scores (0 when all are -inf: no visible key, all-zero weights).
INL float finite_max(vf m) {
    const float mx = hmax(m);
    return mx == -INFINITY ? 0.f : mx;
}

// Softmax of each of the TI rows of S (np columns; -inf entries get weight 0), in place, and
// their statistics (largest score, 1 / sum of exponentials), for dot products of elements E.
// The rows are processed side by side so that their reductions and exponentials overlap.
template <class E>
INL void softmax_tile(float* S, int64_t np, float* mx_out, float* inv_out) {
    vf m[TI], z[TI];
    float mx[TI];
    for (int t = 0; t < TI; t++) m[t] = load<W>(S + t * np);
    for (int64_t j = W; j < np; j += W)
        for (int t = 0; t < TI; t++) m[t] = vmax(m[t], load<W>(S + t * np + j));
    for (int t = 0; t < TI; t++) {
        mx[t] = finite_max(m[t]);
        z[t] = vf{};
    }
    for (int64_t j = 0; j < np; j += W)
        for (int t = 0; t < TI; t++) {
            const vf e = exp_shifted<E>(load<W>(S + t * np + j), mx[t]);
            store<W>(S + t * np + j, e);
            z[t] += e;
        }
    for (int t = 0; t < TI; t++) {
        const float sum = hsum(z[t]);
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        m[t] = splat(inv);
        mx_out[t] = mx[t];
        inv_out[t] = inv;
    }
    for (int64_t j = 0; j < np; j += W)
        for (int t = 0; t < TI; t++) store<W>(S + t * np + j, load<W>(S + t * np + j) * m[t]);
}

// A vector of weights stored as floats, or rounded to bfloat16 (for O = P V with pairs).
INL void store_weights(float* p, vf x) { store<W>(p, x); }
INL void store_weights(uint16_t* p, vf x) { store_bf16(p, x); }

// softmax_tile for np = NB * W keys, the scores computed and kept in registers and the weights
// stored into S (floats or bfloat16). (The loops over the tile's scores are unrolled by force:
// GCC's limits leave the exponentials' loop rolled, and the scores in memory.)
template <int DP, int NB, class E, class Out>
INL void attend_tile(const E* const q[TI], const E* KT, float scale, const float* const bias[TI],
                     Out* S, float* mx_out, float* inv_out) {
    constexpr int64_t np = NB * W;
    vf a[TI][NB];
    scores_tile<DP, NB>(q, KT, np, 0, scale, bias, a);
    vf m[TI], z[TI];
    for (int t = 0; t < TI; t++) {
        m[t] = a[t][0];
        for (int b = 1; b < NB; b++) m[t] = vmax(m[t], a[t][b]);
    }
#pragma GCC unroll 16
    for (int t = 0; t < TI; t++) {
        const float mx = finite_max(m[t]);
        mx_out[t] = mx;
        z[t] = vf{};
#pragma GCC unroll 16
        for (int b = 0; b < NB; b++) {
            a[t][b] = exp_shifted<E>(a[t][b], mx);
            z[t] += a[t][b];
        }
    }
    for (int t = 0; t < TI; t++) {
        const float sum = hsum(z[t]);
        const float inv = sum > 0.f ? 1.f / sum : 0.f;
        inv_out[t] = inv;
        for (int b = 0; b < NB; b++) store_weights(S + t * np + b * W, a[t][b] * inv);
    }
}

// The weights P[t][j0 + b W ..] of a tile of queries for NB vectors of keys, recomputed from
// their scores and the saved statistics (loops unrolled by force, as attend_tile's).
template <int DP, int NB, class E>
INL void probs_tile(const E* const q[TI], const E* KT, int64_t np, int64_t j0, float scale,
                    const float* const bias[TI], const float* mx, const float* inv, float* P) {
    vf s[TI][NB];
    scores_tile<DP, NB>(q, KT, np, j0, scale, bias, s);
#pragma GCC unroll 16
    for (int t = 0; t < TI; t++)
#pragma GCC unroll 16
        for (int b = 0; b < NB; b++)
            store<W>(P + t * np + j0 + b * W, exp_shifted<E>(s[t][b], mx[t]) * inv[t]);
}

// dS[t][:] = P_t * (dP_t - sum(P_t * dP_t)) * scale with dP_t = g_t . V^T, for np = NB * W.
template <int DP, int NB, class E>
INL void grad_scores_tile(const E* const g[TI], const E* VT, const float* P, float scale,
                          float* dS) {
    constexpr int64_t np = NB * W;
    vf a[TI][NB];
    dots_tile<DP, NB>(g, VT, np, 0, a);
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

#ifdef BF16_DOTS
// With pairs, for np = NB * W, all in registers: the tile's weights P recomputed (as
// probs_tile), dS (as grad_scores_tile), both packed into pg (as pack_tile).
template <int DP, int NB, class E>
INL void grad_pairs_tile(const E* const q[TI], const E* const g[TI], const E* KT, const E* VT,
                         float scale, const float* const bias[TI], const float* mx,
                         const float* inv, int64_t i, const PairGrads& pg) {
    constexpr int64_t np = NB * W;
    vf p[TI][NB], d[TI][NB];
    scores_tile<DP, NB>(q, KT, np, 0, scale, bias, p);
#pragma GCC unroll 16
    for (int t = 0; t < TI; t++)
#pragma GCC unroll 16
        for (int b = 0; b < NB; b++) p[t][b] = exp_shifted<E>(p[t][b], mx[t]) * inv[t];
    dots_tile<DP, NB>(g, VT, np, 0, d);
    for (int t = 0; t < TI; t++) {
        vf acc = vf{};
        for (int b = 0; b < NB; b++) acc += p[t][b] * d[t][b];
        const float delta = hsum(acc);
        for (int b = 0; b < NB; b++) d[t][b] = p[t][b] * (d[t][b] - delta) * scale;
    }
    for (int t = 0; t < TI; t += 2)
        for (int b = 0; b < NB; b++)
            pack_pair(p[t][b], p[t + 1][b], d[t][b], d[t + 1][b], pg.dsb + (i + t) * np + b * W,
                      np, pg.dsp + (i + t) / 2 * np + b * W, pg.pp + (i + t) / 2 * np + b * W);
}
#endif

// out[t] = sum_j w[t][j] * rows[j] for MT weight rows w (stride ldw) and nk rows of DP features
// (row j at R + j*ldr); stored for t < valid. Elements E as dots_tile's: with pairs, w[t][j]
// holds two weights and rows[j] two rows interleaved (see interleave_rows). Enough independent
// accumulators (MT * NV, times two rows per step for narrow tiles) keep the FMA units busy
// despite their latency.
template <int DP, int MT, class E>
INL void mix_tile(const E* w, int64_t ldw, const E* R, int64_t ldr, int64_t nk, float* out,
                  int64_t ldo, int valid) {
    constexpr int DW = DP < W ? DP : W;
    constexpr int NV = DP / DW;
    constexpr int U = MT * NV >= 8 ? 1 : 2;
    typedef typename V<DW>::T vd;
    vd o[U][MT][NV];
    for (int u = 0; u < U; u++)
        for (int t = 0; t < MT; t++)
            for (int c = 0; c < NV; c++) o[u][t][c] = vd{};
    int64_t j = 0;
    for (; j + U <= nk; j += U) {
        for (int u = 0; u < U; u++) {
            vd v[NV];
            for (int c = 0; c < NV; c++) v[c] = load<DW>((const float*)(R + (j + u) * ldr + c * DW));
            for (int t = 0; t < MT; t++) {
                const E p = w[t * ldw + j + u];
                for (int c = 0; c < NV; c++) o[u][t][c] = madd(o[u][t][c], v[c], p);
            }
        }
    }
    for (; j < nk; j++) {
        vd v[NV];
        for (int c = 0; c < NV; c++) v[c] = load<DW>((const float*)(R + j * ldr + c * DW));
        for (int t = 0; t < MT; t++) {
            const E p = w[t * ldw + j];
            for (int c = 0; c < NV; c++) o[0][t][c] = madd(o[0][t][c], v[c], p);
        }
    }
    for (int t = 0; t < valid; t++)
        for (int c = 0; c < NV; c++) {
            vd x = o[0][t][c];
            for (int u = 1; u < U; u++) x += o[u][t][c];
            store<DW>(out + t * ldo + c * DW, x);
        }
}

// mix_tile over all n rows of w (which has round_up(n, TI) rows) and nk rows of R: tiles of
// 2 TI rows where they fit in registers and in w, TI otherwise.
template <int DP, class E>
INL void mix_rows(const E* w, int64_t ldw, const E* R, int64_t ldr, int64_t nk, int64_t n,
                  float* out, int64_t ldo) {
    constexpr int NV = DP / (DP < W ? DP : W);
    int64_t i = 0;
    if (NV <= 2)
        for (; i + 2 * TI <= round_up(n, TI); i += 2 * TI) {
            const int valid = n - i < 2 * TI ? (int)(n - i) : 2 * TI;
            mix_tile<DP, 2 * TI>(w + i * ldw, ldw, R, ldr, nk, out + i * ldo, ldo, valid);
        }
    for (; i < n; i += TI) {
        const int valid = n - i < TI ? (int)(n - i) : TI;
        mix_tile<DP, TI>(w + i * ldw, ldw, R, ldr, nk, out + i * ldo, ldo, valid);
    }
}

// ---------------------------------------------------------------------------------------
// Short rows (2..SHORT tokens): a tile would be mostly padding, so each score is a dot product
// over the features and the softmax is scalar.

// The scores s[j] of query i against the n keys of a short row, and their largest.
template <int DP>
INL float short_scores(const typename V<(DP < W ? DP : W)>::T* q,
                       const typename V<(DP < W ? DP : W)>::T k[SHORT][DP / (DP < W ? DP : W)],
                       int64_t i, int64_t n, const uint8_t* vis, float scale, float s[SHORT]) {
    constexpr int DW = DP < W ? DP : W;
    constexpr int NV = DP / DW;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        typename V<DW>::T acc = q[0] * k[j][0];
        for (int c = 1; c < NV; c++) acc += q[c] * k[j][c];
        s[j] = vis && vis[i] && !vis[j] ? -INFINITY : hsum_v(acc) * scale;
        mx = s[j] > mx ? s[j] : mx;
    }
    return mx;  // finite: a query always sees itself
}

// Saves (unless NULL) the weights P, (H, n, n), or the statistics, (H, 2, round_up(n, TI)): see
// saved_of.
template <int DP>
static void forward_short(const float* X, int64_t ldx, int64_t ko, int64_t vo, int64_t H,
                          int64_t n, const uint8_t* vis, float* O, int64_t ldo, float* P,
                          float* stats, float scale) {
    constexpr int DW = DP < W ? DP : W;
    constexpr int NV = DP / DW;
    typedef typename V<DW>::T vd;
    const int64_t nq = round_up(n, TI);
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
            float s[SHORT], sum = 0.f;
            const float mx = short_scores<DP>(q, k, i, n, vis, scale, s);
            for (int64_t j = 0; j < n; j++) {
                s[j] = sexp2((s[j] - mx) * LOG2E);
                sum += s[j];
            }
            const float inv = 1.f / sum;
            if (stats) {
                stats[2 * h * nq + i] = mx;
                stats[2 * h * nq + nq + i] = inv;
            }
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

// P: the saved weights, or NULL to recompute them from the saved statistics (see saved_of).
template <int DP>
static void backward_short(const float* X, int64_t ldx, int64_t ko, int64_t vo, int64_t H,
                           int64_t n, const uint8_t* vis, const float* P, const float* stats,
                           const float* G, int64_t ldg, float* dX, int64_t lddx, int64_t dko,
                           int64_t dvo, float scale) {
    constexpr int DW = DP < W ? DP : W;
    constexpr int NV = DP / DW;
    typedef typename V<DW>::T vd;
    const int64_t nq = round_up(n, TI);
    for (int64_t h = 0; h < H; h++) {
        vd q[SHORT][NV], k[SHORT][NV], v[SHORT][NV], g[SHORT][NV];
        for (int64_t j = 0; j < n; j++)
            for (int c = 0; c < NV; c++) {
                q[j][c] = load<DW>(X + j * ldx + h * DP + c * DW);
                k[j][c] = load<DW>(X + j * ldx + ko + h * DP + c * DW);
                v[j][c] = load<DW>(X + j * ldx + vo + h * DP + c * DW);
                g[j][c] = load<DW>(G + j * ldg + h * DP + c * DW);
            }
        float p[SHORT][SHORT], ds[SHORT][SHORT];
        for (int64_t i = 0; i < n; i++) {
            float dp[SHORT], delta = 0.f;
            if (P) {
                for (int64_t j = 0; j < n; j++) p[i][j] = P[(h * n + i) * n + j];
            } else {
                short_scores<DP>(q[i], k, i, n, vis, scale, p[i]);  // the forward's weights again
                const float mx = stats[2 * h * nq + i], inv = stats[2 * h * nq + nq + i];
                for (int64_t j = 0; j < n; j++) p[i][j] = sexp2((p[i][j] - mx) * LOG2E) * inv;
            }
            for (int64_t j = 0; j < n; j++) {
                vd acc = g[i][0] * v[j][0];
                for (int c = 1; c < NV; c++) acc += g[i][c] * v[j][c];
                dp[j] = hsum_v(acc);
                delta += p[i][j] * dp[j];
            }
            vd dq[NV];
            for (int c = 0; c < NV; c++) dq[c] = vd{};
            for (int64_t j = 0; j < n; j++) {
                ds[i][j] = p[i][j] * (dp[j] - delta) * scale;
                for (int c = 0; c < NV; c++) dq[c] += k[j][c] * ds[i][j];
            }
            for (int c = 0; c < NV; c++) store<DW>(dX + i * lddx + h * DP + c * DW, dq[c]);
        }
        for (int64_t j = 0; j < n; j++) {
            vd dk[NV], dv[NV];
            for (int c = 0; c < NV; c++) dk[c] = dv[c] = vd{};
            for (int64_t i = 0; i < n; i++)
                for (int c = 0; c < NV; c++) {
                    dk[c] += q[i][c] * ds[i][j];
                    dv[c] += g[i][c] * p[i][j];
                }
            for (int c = 0; c < NV; c++) {
                store<DW>(dX + j * lddx + dko + h * DP + c * DW, dk[c]);
                store<DW>(dX + j * lddx + dvo + h * DP + c * DW, dv[c]);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Rows of more than SHORT tokens: tiles.

// Additive masks of the keys of a row: bpad hides the padding keys (for padding and hidden
// queries), bvis the hidden keys too (for visible queries).
static void key_masks(int64_t n, int64_t np, const uint8_t* vis, float* bpad, float* bvis) {
    for (int64_t j = 0; j < np; j++) {
        bpad[j] = j < n ? 0.f : -INFINITY;
        bvis[j] = j < n && (!vis || vis[j]) ? 0.f : -INFINITY;
    }
}

// The rows of the tile of TI queries from i (Xh: the first of the n real ones; past them, a
// row of zeros) and the key masks of those queries.
template <class E>
INL void tile_rows(const E* Xh, int64_t ldx, int64_t i, int64_t n, const float* zero,
                   const E* x[TI]) {
    for (int t = 0; t < TI; t++) x[t] = i + t < n ? Xh + (i + t) * ldx : (const E*)zero;
}
INL void tile_masks(int64_t i, int64_t n, const uint8_t* vis, const float* bpad,
                    const float* bvis, const float* bias[TI]) {
    for (int t = 0; t < TI; t++) bias[t] = i + t < n && vis && vis[i + t] ? bvis : bpad;
}

// The weights P of all the queries of a head (Q: rows of stride ldq, KT: its keys transposed)
// and their statistics ((2, nq), see saved_of), with NB = nb_of(np). With floats, P holds the
// weights (rows of np); with pairs, they are rounded to bfloat16 into Pb (rows of np) as each
// tile is done, and P holds only a tile's (TI rows) when NB = 0.
template <int DP, int NB, class E>
NOINL void weights_head(const E* Q, int64_t ldq, const E* KT, int64_t n, int64_t np,
                        const float* bpad, const float* bvis, const uint8_t* vis, float* stats,
                        float* P, [[maybe_unused]] uint16_t* Pb, const float* zero, float scale) {
    constexpr bool pairs = PACK<E> == 2;
    if constexpr (NB > 0) np = NB * W;  // known at compile time
    const int64_t nq = round_up(n, TI);
    for (int64_t i = 0; i < n; i += TI) {
        const E* q[TI];
        const float* bias[TI];
        tile_rows(Q, ldq, i, n, zero, q);
        tile_masks(i, n, vis, bpad, bvis, bias);
        if constexpr (NB > 0) {
            if constexpr (pairs)
                attend_tile<DP, NB>(q, KT, scale, bias, Pb + i * np, stats + i, stats + nq + i);
            else
                attend_tile<DP, NB>(q, KT, scale, bias, P + i * np, stats + i, stats + nq + i);
        } else {
            float* S = pairs ? P : P + i * np;
            score_tile<DP>(q, KT, np, scale, bias, S);
            softmax_tile<E>(S, np, stats + i, stats + nq + i);
            if constexpr (pairs) narrow(S, Pb, 1, i * np, TI * np);
        }
    }
}

// Q: the head's queries (rows of stride ldq), KT: its keys transposed; stats: its (2, nq)
// statistics and P its weights (rows of np floats; with pairs, rounded to bfloat16 into Pb,
// see weights_head), see saved_of. Then O = P V over nk rows of V (stride ldv): with floats,
// the head's values, nk = n; with pairs, its values interleaved by pairs of rows
// (interleave_rows), nk = (n + 1) / 2.
template <int DP, class E>
static void forward_head(const E* Q, int64_t ldq, const E* KT, const E* V, int64_t ldv,
                         int64_t nk, int64_t n, int64_t np, const float* bpad, const float* bvis,
                         const uint8_t* vis, float* stats, float* P, uint16_t* Pb, float* O,
                         int64_t ldo, const float* zero, float scale) {
    // All the weights of the head first, then the outputs: the mixing loads single weights
    // that were just stored as vectors, which stalls when it follows the store too closely.
    with_nb<0>(nb_of(np), [&](auto NBc) {
        weights_head<DP, decltype(NBc)::value>(Q, ldq, KT, n, np, bpad, bvis, vis, stats, P,
                                               Pb, zero, scale);
    });
    if constexpr (PACK<E> == 2) {
        mix_rows<DP>((const E*)Pb, np / 2, V, ldv, nk, n, O, ldo);
    } else {
        mix_rows<DP>(P, np, V, ldv, nk, n, O, ldo);
    }
}

template <int DP, class E>
static bool forward_rows(const Ctx& c, int64_t r0, int64_t r1, int64_t soff) {
    const int64_t HD = c.HD, HPp = c.HPp, ld = 3 * HD;
    const int64_t npmax = round_up(c.maxn > 0 ? c.maxn : 1, W);
    const int64_t nqmax = round_up(npmax, TI);
    constexpr bool pairs = PACK<E> == 2, recompute = RECOMPUTE<E>;
    const bool padded = c.D != c.DP || c.H * c.DP != HPp;
    Carver cv;
    const size_t o_x = c.direct ? 0 : cv.add(npmax * 3 * HPp);
    [[maybe_unused]] const size_t o_qb = pairs ? cv.add(npmax * 3 * HPp / 2) : 0;
    [[maybe_unused]] const size_t o_vi = pairs ? cv.add(npmax / 2 * HPp) : 0;
    const size_t o_pb = pairs ? cv.add(nqmax * npmax / 2) : 0;
    const size_t o_kt = cv.add(HPp * npmax);
    const size_t o_bias = cv.add(2 * npmax);
    const size_t o_p = cv.add((pairs ? TI : nqmax) * npmax);
    const size_t o_o = c.direct ? 0 : cv.add(npmax * HPp);
    const size_t o_stats = cv.add(saved_of(npmax, c.H, true));
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
            if (c.saved)
                prefetch_write(c.saved + soff + saved_of(n, c.H, recompute),
                               saved_of(n1, c.H, recompute) * sizeof(float));
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
            // Pairs take unpadded bfloat16 rows as they are: floats only for short rows.
            if (!pairs || n <= SHORT || padded) copy_in(c, c.qkv, base, ld, 3, n, buf + o_x);
            X = buf + o_x;
            ldx = 3 * HPp, ko = HPp, vo = 2 * HPp;
            O = buf + o_o;
            ldo = HPp;
        }
        const uint8_t* vis = c.visible ? c.visible + base : nullptr;
        float* saved = c.saved ? c.saved + soff : nullptr;
        if (n <= SHORT) {
            forward_short<DP>(X, ldx, ko, vo, c.H, n, vis, O, ldo, recompute ? nullptr : saved,
                              recompute ? saved : nullptr, c.scale);
        } else {
            float* stats = recompute && saved ? saved : buf + o_stats;
            key_masks(n, np, vis, bpad, bvis);
            const E* Q = (const E*)X;
            const E* V = (const E*)(X + vo);
            int64_t ldq = ldx, ldv = ldx, nk = n;
            if constexpr (!pairs) {
                transpose_rows(X, ldx, ko, HPp, n, np, kt);
            } else {
#ifdef BF16_DOTS
                // The rows as bfloat16 pairs, the keys transposed (pairs of features, as
                // dots_tile takes them; whole vectors of columns, so past narrow keys the
                // first values too, unused) and the values interleaved by pairs of rows.
                Q = pairs_of(c, (const uint16_t*)c.qkv + base * ld, &ldq, X, ldx, 3, n,
                             buf + o_qb);
                transpose_rows((const float*)Q, ldq, HPp / 2, round_up(HPp / 2, W), n, np, kt);
                uint32_t* Vi = (uint32_t*)(buf + o_vi);
                interleave_rows((const uint16_t*)Q, 2 * ldq, 2 * HPp, HPp, n, Vi);
                V = Vi, ldv = HPp, nk = (n + 1) / 2;
#endif
            }
            for (int64_t h = 0; h < c.H; h++)
                forward_head<DP, E>(Q + h * DP / PACK<E>, ldq, (const E*)(kt + h * DP / PACK<E> * np),
                                    V + h * DP, ldv, nk, n, np, bpad, bvis, vis,
                                    stats + 2 * h * nq,
                                    !recompute && saved ? saved + h * nq * np : buf + o_p,
                                    (uint16_t*)(buf + o_pb), O + h * DP, ldo, zero, c.scale);
        }
        if (!c.direct) copy_out(c, O, 1, n, c.out, base, HD);
        if (c.saved) soff += saved_of(n, c.H, recompute);
    }
    return true;
}

// ---------------------------------------------------------------------------------------
// Backward.

// dK[j] = sum_i dS[i][j] Q[i] and dV[j] = sum_i P[i][j] dO[i] for the KT keys j0..j0+KT-1
// (stored for the first `valid`), over ni rows i of X (queries), G (output gradients), P and DS
// (rows of np). Elements E as dots_tile's: with pairs, each row holds two queries, interleaved
// in X and G (see interleave_rows).
template <int DP, int KT, class E>
INL void key_grads_tile(const E* X, int64_t ldx, const E* G, int64_t ldg, const E* P,
                        const E* DS, int64_t np, int64_t ni, int64_t j0, float* dK, float* dV,
                        int64_t lddx, int valid) {
    constexpr int DW = DP < W ? DP : W;
    constexpr int NV = DP / DW;
    typedef typename V<DW>::T vd;
    vd dk[KT][NV], dv[KT][NV];
    for (int t = 0; t < KT; t++)
        for (int c = 0; c < NV; c++) dk[t][c] = dv[t][c] = vd{};
    for (int64_t i = 0; i < ni; i++) {
        vd gv[NV], qv[NV];
        for (int c = 0; c < NV; c++) {
            gv[c] = load<DW>((const float*)(G + i * ldg + c * DW));
            qv[c] = load<DW>((const float*)(X + i * ldx + c * DW));
        }
        const E* p = P + i * np + j0;
        const E* s = DS + i * np + j0;
        for (int t = 0; t < KT; t++) {
            const E pt = p[t], st = s[t];
            for (int c = 0; c < NV; c++) {
                dv[t][c] = madd(dv[t][c], gv[c], pt);
                dk[t][c] = madd(dk[t][c], qv[c], st);
            }
        }
    }
    for (int t = 0; t < valid; t++)
        for (int c = 0; c < NV; c++) {
            store<DW>(dK + (j0 + t) * lddx + c * DW, dk[t][c]);
            store<DW>(dV + (j0 + t) * lddx + c * DW, dv[t][c]);
        }
}

// The gradient dS of the scores of all the queries of a head (Ge: the gradients of its outputs,
// rows of stride ldge; VT: its values transposed) from its weights P, with NB = nb_of(np).
// With floats, P is what the forward saved and dS goes to DS (rows of np). With pairs
// (RECOMPUTE<E>), each tile's P is recomputed (Qe, KT and stats as weights_head's) into P and
// its dS computed into DS (TI rows of np floats each), then both are packed into pg.
template <int DP, int NB, class E>
NOINL void grad_scores_head(const E* Qe, int64_t ldqe, const E* Ge, int64_t ldge, const E* KT,
                            const E* VT, int64_t n, int64_t np, const float* bpad,
                            const float* bvis, const uint8_t* vis, const float* stats, float* P,
                            float* DS, [[maybe_unused]] const PairGrads& pg, const float* zero,
                            float scale) {
    if constexpr (NB > 0) np = NB * W;  // known at compile time
    const int64_t nq = round_up(n, TI);
    for (int64_t i = 0; i < n; i += TI) {
        const E *q[TI], *g[TI];
        const float* bias[TI];
        tile_rows(Qe, ldqe, i, n, zero, q);
        tile_rows(Ge, ldge, i, n, zero, g);
        tile_masks(i, n, vis, bpad, bvis, bias);
#ifdef BF16_DOTS
        if constexpr (RECOMPUTE<E> && NB > 0) {
            grad_pairs_tile<DP, NB>(q, g, KT, VT, scale, bias, stats + i, stats + nq + i, i, pg);
            continue;
        }
#endif
        float* Pi = RECOMPUTE<E> ? P : P + i * np;
        float* dS = RECOMPUTE<E> ? DS : DS + i * np;
        if constexpr (RECOMPUTE<E>)
            for_key_blocks(np, [&](int64_t j0, auto NBc) {
                probs_tile<DP, decltype(NBc)::value>(q, KT, np, j0, scale, bias, stats + i,
                                                     stats + nq + i, Pi);
            });
        if constexpr (NB > 0) {
            grad_scores_tile<DP, NB>(g, VT, Pi, scale, dS);
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
#ifdef BF16_DOTS
        if constexpr (RECOMPUTE<E>) pack_tile(Pi, dS, np, i, pg);
#endif
    }
}

// dQ = dS K, dK = dS^T Q and dV = P^T dO for one head, into the rows of dX (stride lddx; dK
// from column dko, dV from dvo), from the head's rows of keys K, queries Q and output
// gradients G. Elements E: floats, over nk = n rows, dSq = DS = dS and P rows of np; or
// pairs, over nk = (n + 1) / 2 pairs of rows, K, Q and G interleaved (interleave_rows), dSq
// holding dS row by row (rows of ldw = np / 2 pairs) and DS and P the queries paired (see
// pack_tile).
template <int DP, class E>
static void weight_grads(const E* dSq, int64_t ldw, const E* K, int64_t ldk, const E* Q,
                         int64_t ldq, const E* G, int64_t ldg, const E* P, const E* DS,
                         int64_t np, int64_t n, int64_t nk, float* dX, int64_t lddx,
                         int64_t dko, int64_t dvo) {
    constexpr int NV = DP / (DP < W ? DP : W);
    mix_rows<DP>(dSq, ldw, K, ldk, nk, n, dX, lddx);  // dQ
    float* dK = dX + dko;
    float* dV = dX + dvo;
    int64_t j = 0;
    if (NV == 1)
        for (; j + 2 * TJ <= n; j += 2 * TJ)
            key_grads_tile<DP, 2 * TJ>(Q, ldq, G, ldg, P, DS, np, nk, j, dK, dV, lddx, 2 * TJ);
    for (; j < n; j += TJ) {
        const int valid = n - j < TJ ? (int)(n - j) : TJ;
        key_grads_tile<DP, TJ>(Q, ldq, G, ldg, P, DS, np, nk, j, dK, dV, lddx, valid);
    }
}

template <int DP, class E>
static bool backward_rows(const Ctx& c, int64_t r0, int64_t r1, int64_t soff) {
    const int64_t HD = c.HD, HPp = c.HPp, ld = 3 * HD;
    const int64_t npmax = round_up(c.maxn > 0 ? c.maxn : 1, W);
    const int64_t nqmax = round_up(npmax, TI);
    constexpr bool pairs = PACK<E> == 2, recompute = RECOMPUTE<E>;
    const bool padded = c.D != c.DP || c.H * c.DP != HPp;
    Carver cv;
    [[maybe_unused]] const size_t o_qb = pairs ? cv.add(npmax * 3 * HPp / 2) : 0;
    [[maybe_unused]] const size_t o_gb = pairs ? cv.add(npmax * HPp / 2) : 0;
    [[maybe_unused]] const size_t o_il = pairs ? cv.add(3 * npmax / 2 * HPp) : 0;
    [[maybe_unused]] const size_t o_dsb = pairs ? cv.add(nqmax * npmax / 2) : 0;
    [[maybe_unused]] const size_t o_dsp = pairs ? cv.add(nqmax / 2 * npmax) : 0;
    [[maybe_unused]] const size_t o_pp = pairs ? cv.add(nqmax / 2 * npmax) : 0;
    const size_t o_x = c.direct ? 0 : cv.add(npmax * 3 * HPp);
    const size_t o_g = c.direct ? 0 : cv.add(npmax * HPp);
    const size_t o_dx = c.direct ? 0 : cv.add(npmax * 3 * HPp);
    const size_t o_kvt = cv.add(2 * HPp * npmax);
    const size_t o_bias = cv.add(2 * npmax);
    [[maybe_unused]] const size_t o_p = recompute ? cv.add(TI * npmax) : 0;
    const size_t o_ds = cv.add((pairs ? TI : nqmax) * npmax);
    const size_t o_zero = cv.add(3 * HPp + W);
    float* buf = tls_scratch.get(cv.total);
    if (!buf) return false;
    float* kvt = buf + o_kvt;
    float* bpad = buf + o_bias;
    float* bvis = bpad + npmax;
    float* zero = buf + o_zero;
    memset(zero, 0, sizeof(float) * (3 * HPp + W));
    [[maybe_unused]] const PairGrads pg = {(uint16_t*)(buf + o_dsb), (uint32_t*)(buf + o_dsp),
                                           (uint32_t*)(buf + o_pp)};
    const size_t esize = c.esize;

    for (int64_t r = r0; r < r1; r++) {
        const int64_t n = c.row_len[r], base = c.row_slot[r];
        if (n == 0) continue;
        if (r + 1 < r1 && c.row_len[r + 1] > 1) {
            const int64_t n1 = c.row_len[r + 1], b1 = c.row_slot[r + 1];
            prefetch((const char*)c.qkv + b1 * ld * esize, n1 * ld * esize);
            prefetch((const char*)c.dout + b1 * HD * esize, n1 * HD * esize);
            prefetch(c.saved + soff + saved_of(n, c.H, recompute),
                     saved_of(n1, c.H, recompute) * sizeof(float));
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
            // Pairs take unpadded bfloat16 rows as they are: floats only for short rows.
            X = buf + o_x;
            ldx = 3 * HPp, ko = HPp, vo = 2 * HPp;
            G = buf + o_g;
            ldg = HPp;
            if (!pairs || n <= SHORT || padded) {
                copy_in(c, c.qkv, base, ld, 3, n, buf + o_x);
                copy_in(c, c.dout, base, HD, 1, n, buf + o_g);
            }
            dX = buf + o_dx;
            lddx = 3 * HPp, dko = HPp, dvo = 2 * HPp;
        }
        const uint8_t* vis = c.visible ? c.visible + base : nullptr;
        float* saved = c.saved + soff;
        if (n <= SHORT) {
            backward_short<DP>(X, ldx, ko, vo, c.H, n, vis, recompute ? nullptr : saved,
                               recompute ? saved : nullptr, G, ldg, dX, lddx, dko, dvo, c.scale);
        } else if constexpr (!pairs) {
            transpose_rows(X, ldx, vo, HPp, n, np, kvt + HPp * np);  // the values
            for (int64_t h = 0; h < c.H; h++) {
                float* P = saved + h * nq * np;
                with_nb<0>(nb_of(np), [&](auto NBc) {
                    grad_scores_head<DP, decltype(NBc)::value>(
                        X + h * DP, ldx, G + h * DP, ldg, kvt + h * DP * np,
                        kvt + (HPp + h * DP) * np, n, np, bpad, bvis, vis, nullptr, P,
                        buf + o_ds, PairGrads{}, zero, c.scale);
                });
                weight_grads<DP>(buf + o_ds, np, X + ko + h * DP, ldx, X + h * DP, ldx,
                                 G + h * DP, ldg, P, buf + o_ds, np, n, n, dX + h * DP, lddx,
                                 dko, dvo);
            }
        } else {
#ifdef BF16_DOTS
            // The rows as bfloat16 pairs (Qb: queries, keys and values; Gb: output gradients),
            // the keys and values transposed (pairs of features, as dots_tile takes them) and
            // the keys, queries and output gradients interleaved by pairs of rows (as
            // weight_grads takes them).
            int64_t ldqb = ld, ldgb = HD;
            const uint32_t* Qb = pairs_of(c, (const uint16_t*)c.qkv + base * ld, &ldqb, X, ldx, 3,
                                          n, buf + o_qb);
            const uint32_t* Gb = pairs_of(c, (const uint16_t*)c.dout + base * HD, &ldgb, G, ldg,
                                          1, n, buf + o_gb);
            transpose_rows((const float*)Qb, ldqb, HPp / 2, HPp, n, np, kvt);
            key_masks(n, np, vis, bpad, bvis);
            const int64_t nk = (n + 1) / 2;
            uint32_t* Qi = (uint32_t*)(buf + o_il);
            uint32_t* Ki = Qi + nk * HPp;
            uint32_t* Gi = Ki + nk * HPp;
            interleave_rows((const uint16_t*)Qb, 2 * ldqb, 0, HPp, n, Qi);
            interleave_rows((const uint16_t*)Qb, 2 * ldqb, HPp, HPp, n, Ki);
            interleave_rows((const uint16_t*)Gb, 2 * ldgb, 0, HPp, n, Gi);
            for (int64_t h = 0; h < c.H; h++) {
                const int64_t e = h * DP / 2;  // the head's first pair of features
                with_nb<0>(nb_of(np), [&](auto NBc) {
                    grad_scores_head<DP, decltype(NBc)::value>(
                        Qb + e, ldqb, Gb + e, ldgb, (const E*)(kvt + e * np),
                        (const E*)(kvt + (HPp / 2 + e) * np), n, np, bpad, bvis, vis,
                        saved + 2 * h * nq, buf + o_p, buf + o_ds, pg, zero, c.scale);
                });
                weight_grads<DP>((const E*)pg.dsb, np / 2, Ki + h * DP, HPp, Qi + h * DP, HPp,
                                 Gi + h * DP, HPp, pg.pp, pg.dsp, np, n, nk, dX + h * DP, lddx,
                                 dko, dvo);
            }
#endif
        }
        if (!c.direct) copy_out(c, dX, 3, n, c.dqkv, base, ld);
        soff += saved_of(n, c.H, recompute);
    }
    return true;
}

// ---------------------------------------------------------------------------------------
// Planning, padding and threads.

typedef bool (*RowsFn)(const Ctx&, int64_t, int64_t, int64_t);  // false: out of memory

template <bool Fwd, int DP, class E>
static RowsFn pick_dp(int64_t dp) {
    if (dp == DP) return Fwd ? forward_rows<DP, E> : backward_rows<DP, E>;
    if constexpr (2 * DP <= MAX_DP) return pick_dp<Fwd, 2 * DP, E>(dp);
    return nullptr;
}

template <bool Fwd>
static RowsFn rows_fn(int64_t dp, bool pairs) {
    constexpr int first = W < 8 ? W : 8;
#ifdef BF16_DOTS
    if (pairs) return pick_dp<Fwd, first, uint32_t>(dp);
#else
    (void)pairs;
#endif
    return pick_dp<Fwd, first, float>(dp);
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

// Validates the rows (and the size of what the forward saves) and finds the longest; returns 0
// or an error code. covered: set when rows are not sorted by slot (caller frees).
static int plan(Ctx& c, uint8_t** covered, int64_t* total_cost) {
    int64_t maxn = 0, end = 0, cost = 0, saved = 0;
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
        saved += saved_of(n, c.H, c.pairs);
    }
    if ((c.saved || c.dqkv) && saved != c.saved_len) return -4;
    if (c.dqkv && !c.saved && saved > 0) return -4;
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
    const RowsFn fn = fwd ? rows_fn<true>(c.DP, c.pairs) : rows_fn<false>(c.DP, c.pairs);
    if (!fn) {
        free(covered);
        return -3;
    }
    int64_t nt = total / MIN_COST_PER_THREAD;
    if (nt > nthreads) nt = nthreads;
    if (nt > MAX_THREADS) nt = MAX_THREADS;
    if (nt < 1) nt = 1;
    // Rows [bound[t], bound[t+1]) of similar total cost, and the offset of their saved data.
    int64_t bound[MAX_THREADS + 1], soff[MAX_THREADS + 1];
    bound[0] = soff[0] = 0;
    {
        int64_t t = 1, cum = 0, off = 0;
        for (int64_t r = 0; r < c.R && t < nt; r++) {
            const int64_t n = c.row_len[r];
            cum += n > 0 ? cost_of(n, c.H, c.DP) : 0;
            off += saved_of(n, c.H, c.pairs);
            while (t < nt && cum * nt >= total * t) {
                bound[t] = r + 1;
                soff[t] = off;
                t++;
            }
        }
        for (; t <= nt; t++) {
            bound[t] = c.R;
            soff[t] = off;
        }
        bound[nt] = c.R;
    }
    char* dst = (char*)(fwd ? c.out : c.dqkv);
    const int64_t row_bytes = (fwd ? 1 : 3) * c.HD * c.esize;
    int failed = 0;
    run_threads(nt, [&](int64_t t) {
        if (!fn(c, bound[t], bound[t + 1], soff[t])) __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
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
    c.pairs = takes_pairs(dtype);
    return c;
}

// ---------------------------------------------------------------------------------------
// Exported functions. All return 0 on success or a negative error code:
// -1 a row outside [0, slots), -2 overlapping rows, -3 unsupported head width, -4 saved data
// that do not match the rows, -5 out of memory.

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

// Number of floats the forward saves for the backward for these rows (or -1 for a negative
// length).
int64_t ra_saved_size(const int64_t* row_len, int64_t R, int64_t H, int64_t dtype) {
    const bool recompute = takes_pairs(dtype);
    int64_t total = 0;
    for (int64_t r = 0; r < R; r++) {
        if (row_len[r] < 0) return -1;
        total += saved_of(row_len[r], H, recompute);
    }
    return total;
}

// saved: NULL (nothing saved) or room for exactly saved_len = ra_saved_size(...) floats.
int64_t ra_forward(const void* qkv, void* out, float* saved, int64_t saved_len,
                   const int64_t* row_slot, const int64_t* row_len, const uint8_t* visible,
                   int64_t R, int64_t slots, int64_t H, int64_t D, int64_t dtype,
                   int64_t nthreads) {
    Ctx c = make_ctx(qkv, row_slot, row_len, R, slots, H, D, dtype);
    c.out = out;
    c.saved = saved;
    c.saved_len = saved_len;
    c.visible = visible;
    return run(c, true, nthreads);
}

// saved, saved_len: what the forward saved (checked against the rows); the other arguments as
// the forward's.
int64_t ra_backward(const void* qkv, const void* dout, const float* saved, int64_t saved_len,
                    void* dqkv, const int64_t* row_slot, const int64_t* row_len,
                    const uint8_t* visible, int64_t R, int64_t slots, int64_t H, int64_t D,
                    int64_t dtype, int64_t nthreads) {
    Ctx c = make_ctx(qkv, row_slot, row_len, R, slots, H, D, dtype);
    c.saved = (float*)saved;
    c.saved_len = saved_len;
    c.visible = visible;
    c.dout = dout;
    c.dqkv = dqkv;
    return run(c, false, nthreads);
}

}  // extern "C"
