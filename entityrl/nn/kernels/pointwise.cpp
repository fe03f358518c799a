// LayerNorm over the last dimension and the exact (erf) GELU, forward and backward, on the CPU.
//
// Built at run time by entityrl/nn/kernels/build.py and called through ctypes; the Python side
// (contracts, autograd, fallbacks) is entityrl/nn/kernels/pointwise.py. Elements are float32
// or bfloat16 (dtype code 0 or 1); everything is computed in float32 and bfloat16 results are
// rounded to nearest even.
//
// LayerNorm keeps rows in registers (they are d_model wide: 32-256 floats), a few at a time
// so that their horizontal sums share shuffles, and makes two passes over them, mean then
// variance, so that large means do not cancel; its output may be bfloat16 directly, which
// saves the cast before the next matrix product. The backward sums the weight and bias
// gradients per thread, in blocks of rows, and adds the threads' sums in a fixed order:
// results depend on the thread count, not on the scheduling.
//
// GELU uses gelu(x) = max(x, 0) - c Q(c) and gelu'(x) = 1/2 + sign(x) T(c) with c = |x|,
// Q(c) = erfc(c / sqrt 2) / 2 (the normal upper tail) and T(c) = 1/2 - Q(c) + c phi(c) (phi:
// the normal density); the small term c Q(c) keeps the tiny outputs of negative x accurate.
// Q and T are smooth on [0, RANGE]: they are tabulated as 2W polynomials in the position
// within 2W equal intervals, each interpolating the function at Chebyshev nodes (computed in
// double precision when the library loads; error below 4e-8). A vector of arguments picks
// its coefficients with two-register permutes (one instruction each with AVX-512), so the
// whole function is some 16 vector instructions: no division, exponential or gather (gathers
// from a table of all 65536 bfloat16 values are slower than this). Beyond RANGE, c Q(c) < 6e-9
// and |T(c) - 1/2| < 4e-8: the position is clamped to the end of the range, where the tables
// give exactly 0 and 1/2 (the last polynomials are shifted by that little), so that
// gelu(x) = max(x, 0) and gelu'(x) = 1 or 0 there.

#include <type_traits>

#include "simd.h"

// Element access by type: float32 or bfloat16 (stored as its 16 bits).
INL vf ld(const float* p) { return load<W>(p); }
INL vf ld(const uint16_t* p) { return load_bf16(p); }
INL void st(float* p, vf x) { store<W>(p, x); }
INL void st(uint16_t* p, vf x) { store_bf16(p, x); }

// Two vectors to consecutive places: for bfloat16 with AVX512-BF16, one conversion and one
// full 64-byte store rather than two halves (which this CPU writes markedly slower).
INL void st2(float* p, vf a, vf b) {
    st(p, a);
    st(p + W, b);
}
INL void st2(uint16_t* p, vf a, vf b) {
#if W == 16 && defined(__AVX512BF16__)
    _mm512_storeu_si512(p, (__m512i)_mm512_cvtne2ps_pbh(b, a));
#else
    st(p, a);
    st(p + W, b);
#endif
}

// The first n < W elements at p, zeros after them.
template <class E>
INL vf ld_part(const E* p, int64_t n) {
    E buf[W] = {};
    memcpy(buf, p, n * sizeof(E));
    return ld(buf);
}
template <class E>
INL void st_part(E* p, vf x, int64_t n) {
    E buf[W];
    st(buf, x);
    memcpy(p, buf, n * sizeof(E));
}

// Calls of fewer elements than this run on one thread (a thread's start costs microseconds).
#define MIN_PER_THREAD 32768

static int64_t threads_for(int64_t elements, int64_t nthreads) {
    int64_t nt = elements / MIN_PER_THREAD;
    if (nt > nthreads) nt = nthreads;
    return nt < 1 ? 1 : nt;
}

// ---------------------------------------------------------------------------------------
// GELU.

#define RANGE 6.0
#define INTERVALS (2 * W)
#if W == 16
#define DEGREE 4
#elif W == 8
#define DEGREE 5
#else
#define DEGREE 7
#endif

// coef[d][j / W][j % W]: the coefficient of u^d in interval j, where u = s - j, s = c * SCALE
// being the position in the range and u the position in the interval, in [-1/2, 1/2].
struct Table {
    vf coef[DEGREE + 1][2];
};
static const float SCALE = (float)((INTERVALS - 1) / RANGE);

// Interpolates f on every interval at the Chebyshev nodes (nearly the best polynomial of the
// degree) by solving the Vandermonde system in double precision; the last polynomial is
// shifted to give exactly `limit` at the end of the range (u = 0).
template <class F>
static Table tabulate(F f, double limit) {
    Table t;
    const int n = DEGREE + 1;
    for (int j = 0; j < INTERVALS; j++) {
        double a[DEGREE + 1][DEGREE + 2];
        for (int i = 0; i < n; i++) {
            const double u = 0.5 * cos((2 * i + 1) * M_PI / (2 * n));
            double p = 1.0;
            for (int d = 0; d < n; d++, p *= u) a[i][d] = p;
            a[i][n] = f((j + u) / (double)SCALE);
        }
        for (int c = 0; c < n; c++) {  // Gaussian elimination, partial pivoting
            int best = c;
            for (int i = c + 1; i < n; i++)
                if (fabs(a[i][c]) > fabs(a[best][c])) best = i;
            for (int k = 0; k <= n; k++) {
                const double tmp = a[c][k];
                a[c][k] = a[best][k];
                a[best][k] = tmp;
            }
            for (int i = 0; i < n; i++) {
                if (i == c) continue;
                const double r = a[i][c] / a[c][c];
                for (int k = c; k <= n; k++) a[i][k] -= r * a[c][k];
            }
        }
        for (int d = 0; d < n; d++) t.coef[d][j / W][j % W] = (float)(a[d][n] / a[d][d]);
    }
    t.coef[0][1][W - 1] = (float)limit;
    return t;
}

static double upper_tail(double c) { return 0.5 * erfc(c * M_SQRT1_2); }
// Q / SCALE: multiplied by the position s rather than by c, the term stays finite for
// infinite x.
static const Table Q_TABLE = tabulate([](double c) { return upper_tail(c) / SCALE; }, 0.0);
static const Table T_TABLE = tabulate(
    [](double c) {
        return 0.5 - upper_tail(c) + c * exp(-0.5 * c * c) * (0.5 * M_2_SQRTPI * M_SQRT1_2);
    },
    0.5);

// The position s of |x| in the range, clamped to its end (NaN stays NaN).
INL vf position(vf x) {
    const vf s = (vf)((vu)x & 0x7fffffffu) * SCALE;
#if W == 16
    return _mm512_min_ps(splat(INTERVALS - 1), s);  // what the expression below means, in one step
#else
    return (float)(INTERVALS - 1) < s ? splat(INTERVALS - 1) : s;
#endif
}

// The tabulated function at position s (NaN gives NaN).
INL vf interpolate(const Table& t, vf s) {
    const vf r = s + 12582912.f;  // 1.5 * 2^23: the low bits of r are round(s)
    const vf u = s - (r - 12582912.f);
    const vi j = (vi)r;  // the permute reads only the low bits of each lane
    vf p = __builtin_shuffle(t.coef[DEGREE][0], t.coef[DEGREE][1], j);
    for (int d = DEGREE - 1; d >= 0; d--)
        p = p * u + __builtin_shuffle(t.coef[d][0], t.coef[d][1], j);
    return p;
}

INL vf gelu(vf x) {
    const vf s = position(x);
#if W == 16
    const vf positive = _mm512_max_ps(vf{}, x);  // NaN stays NaN
#else
    const vf positive = 0.f > x ? vf{} : x;
#endif
    return positive - s * interpolate(Q_TABLE, s);
}

INL vf gelu_grad(vf x) {
    const vu sign = (vu){} + 0x80000000u;
    const vu t = (vu)interpolate(T_TABLE, position(x));
    return 0.5f + (vf)((t & ~sign) | ((vu)x & sign));
}

// Elements [begin, end) of thread t of nt, in whole vectors but for the last thread.
static void share(int64_t n, int64_t t, int64_t nt, int64_t* begin, int64_t* end) {
    *begin = round_up(n * t / nt, W);
    *end = t + 1 == nt ? n : round_up(n * (t + 1) / nt, W);
    if (*end > n) *end = n;
}

template <class E>
static void gelu_forward(const E* __restrict__ x, E* __restrict__ y, int64_t n, int64_t nthreads) {
    const int64_t nt = threads_for(n, nthreads);
    run_threads(nt, [=](int64_t t) {
        int64_t i, end;
        share(n, t, nt, &i, &end);
        for (; i + 2 * W <= end; i += 2 * W) st2(y + i, gelu(ld(x + i)), gelu(ld(x + i + W)));
        for (; i + W <= end; i += W) st(y + i, gelu(ld(x + i)));
        if (i < end) st_part(y + i, gelu(ld_part(x + i, end - i)), end - i);
    });
}

template <class E>
static void gelu_backward(const E* __restrict__ x, const E* __restrict__ dy, E* __restrict__ dx,
                          int64_t n, int64_t nthreads) {
    const int64_t nt = threads_for(n, nthreads);
    run_threads(nt, [=](int64_t t) {
        int64_t i, end;
        share(n, t, nt, &i, &end);
        auto grad = [&](int64_t i) { return ld(dy + i) * gelu_grad(ld(x + i)); };
        for (; i + 2 * W <= end; i += 2 * W) st2(dx + i, grad(i), grad(i + W));
        for (; i + W <= end; i += W) st(dx + i, grad(i));
        if (i < end) {
            const int64_t k = end - i;
            st_part(dx + i, ld_part(dy + i, k) * gelu_grad(ld_part(x + i, k)), k);
        }
    });
}

// ---------------------------------------------------------------------------------------
// LayerNorm.

// Vector v of a row of D elements; the last vector may be partial (zero-padded on reads).
// NV > 0: rows of exactly NV whole vectors, known when compiling (loops unrolled, the row kept
// in registers); NV = 0: any width.
template <int NV>
struct Row {
    int64_t n, tail;  // vectors, elements of the partial last one (0: none)
    explicit Row(int64_t D) : n(NV ? NV : (D + W - 1) / W), tail(NV ? 0 : D % W) {}
    bool partial(int64_t v) const { return !NV && tail && v + 1 == n; }
    template <class E>
    vf get(const E* p, int64_t v) const {
        return partial(v) ? ld_part(p + v * W, tail) : ld(p + v * W);
    }
    template <class E>
    void put(E* p, int64_t v, vf x) const {
        if (partial(v))
            st_part(p + v * W, x, tail);
        else
            st(p + v * W, x);
    }
    vf valid(int64_t v, vf x) const {  // x with the lanes past the row's end zeroed
        if (!partial(v)) return x;
        vi lane;
        for (int l = 0; l < W; l++) lane[l] = l;
        return lane < (int32_t)tail ? x : vf{};
    }
};

// Rows are normalised GROUP at a time: their sums are reduced together, which takes about as
// many shuffles as two rows reduced one by one, and their computations overlap.
#define GROUP (W >= 8 ? 4 : W / 2)  // the backward reduces 2 GROUP vectors: at most W

// Vector literals (constants, so that shuffles by them compile to immediate-operand
// instructions) whose lane l is F(p, l).
#if W == 16
#define LANE_LIST(F, p)                                                                    \
    (vi){F(p, 0), F(p, 1), F(p, 2),  F(p, 3),  F(p, 4),  F(p, 5),  F(p, 6),  F(p, 7),      \
         F(p, 8), F(p, 9), F(p, 10), F(p, 11), F(p, 12), F(p, 13), F(p, 14), F(p, 15)}
#elif W == 8
#define LANE_LIST(F, p) (vi){F(p, 0), F(p, 1), F(p, 2), F(p, 3), F(p, 4), F(p, 5), F(p, 6), F(p, 7)}
#else
#define LANE_LIST(F, p) (vi){F(p, 0), F(p, 1), F(p, 2), F(p, 3)}
#endif
// Of two vectors side by side cut into groups of 2h lanes: the first (LO) or second (HI) h
// lanes of every group.
#define HALF_LO(h, l) ((l) / (h) * 2 * (h) + (l) % (h))
#define HALF_HI(h, l) (HALF_LO(h, l) + (h))

// The sums of the lanes of each of the G vectors a[0..G) (G a power of two, at most W), in
// lanes k * (W / G) of the result; a is overwritten. While there are several vectors, pairs
// are merged: the two halves of each group of WIDTH lanes (one vector's sum so far) added,
// the first vector's halved groups then the second's. Costs about as many shuffles as two
// single sums.
template <int G, int WIDTH = W>
INL vf hsum_each(vf* a) {
    static_assert(G <= WIDTH, "more vectors than lanes");
    if constexpr (G > 1) {
        for (int i = 0; i < G / 2; i++)
            a[i] = __builtin_shuffle(a[2 * i], a[2 * i + 1], LANE_LIST(HALF_LO, WIDTH / 2)) +
                   __builtin_shuffle(a[2 * i], a[2 * i + 1], LANE_LIST(HALF_HI, WIDTH / 2));
        return hsum_each<G / 2, WIDTH / 2>(a);
    } else {
        vf r = a[0];
        if constexpr (WIDTH > 8) r += __builtin_shuffle(r, XM(8));
        if constexpr (WIDTH > 4) r += __builtin_shuffle(r, XM(4));
        if constexpr (WIDTH > 2) r += __builtin_shuffle(r, XM(2));
        if constexpr (WIDTH > 1) r += __builtin_shuffle(r, XM(1));
        return r;
    }
}

// The square roots of the lanes (non-negative), in one instruction where there is one.
INL vf vsqrt(vf x) {
#if W == 16
    return _mm512_sqrt_ps(x);
#elif W == 8
    return _mm256_sqrt_ps(x);
#else
    for (int l = 0; l < W; l++) x[l] = sqrtf(x[l]);
    return x;
#endif
}

// Lane l of x in every lane.
INL vf lane(vf x, int l) { return __builtin_shuffle(x, (vi){} + l); }

// Rows [r0, r1), G at a time (r1 - r0 a multiple of G); mean and rstd NULL: not saved.
template <class E, int NV, int G>
static void ln_forward_rows(const float* __restrict__ x, const float* __restrict__ w,
                            const float* __restrict__ b, float eps, E* __restrict__ out,
                            float* __restrict__ mean, float* __restrict__ rstd, int64_t D,
                            int64_t r0, int64_t r1) {
    constexpr int S = W / G;  // lanes between the rows' sums
    const Row<NV> row(D);
    const float inv_d = 1.f / (float)D;
    for (int64_t r = r0; r < r1; r += G) {
        const float* xr = x + r * D;
        vf acc[G];
        for (int k = 0; k < G; k++) {
            acc[k] = vf{};
            for (int64_t v = 0; v < row.n; v++) acc[k] += row.get(xr + k * D, v);
        }
        const vf m = hsum_each<G>(acc) * inv_d;
        for (int k = 0; k < G; k++) {
            acc[k] = vf{};
            for (int64_t v = 0; v < row.n; v++) {
                const vf d = row.valid(v, row.get(xr + k * D, v) - lane(m, k * S));
                acc[k] += d * d;
            }
        }
        const vf rsv = 1.f / vsqrt(hsum_each<G>(acc) * inv_d + eps);
        for (int k = 0; k < G; k++) {
            const float rs = rsv[k * S];
            const vf mk = lane(m, k * S);
            auto y = [&](int64_t v) {
                return (row.get(xr + k * D, v) - mk) * rs * row.get(w, v) + row.get(b, v);
            };
            int64_t v = 0;
            for (; v + 1 < row.n && !row.partial(v + 1); v += 2)
                st2(out + (r + k) * D + v * W, y(v), y(v + 1));
            for (; v < row.n; v++) row.put(out + (r + k) * D, v, y(v));
            if (mean) {
                mean[r + k] = m[k * S];
                rstd[r + k] = rs;
            }
        }
    }
}

// Rows of the weight and bias gradients summed before their sum joins the thread's total:
// sums of thousands of float32 terms in one accumulator would lose digits.
#define LN_BLOCK 64

// Rows [r0, r1), G at a time (r1 - r0 a multiple of G). dx NULL: not wanted. sums NULL: no
// weight and bias gradients; else 4 * n * W floats: the thread's totals of dweight and dbias,
// then its block sums (zero between calls).
template <class E, int NV, int G>
static void ln_backward_rows(const E* __restrict__ dy, const float* __restrict__ x,
                             const float* __restrict__ mean, const float* __restrict__ rstd,
                             const float* __restrict__ w, float* __restrict__ dx,
                             float* __restrict__ sums, int64_t D, int64_t r0, int64_t r1) {
    constexpr int S = W / (2 * G);
    const Row<NV> row(D);
    const float inv_d = 1.f / (float)D;
    const int64_t width = row.n * W;
    float* total = sums;
    float* block = sums ? sums + 2 * width : nullptr;
    for (int64_t r = r0; r < r1; r += G) {
        vf acc[2 * G];  // per row: sum of dy * w, sum of dy * w * xhat (padded lanes add 0)
        for (int k = 0; k < 2 * G; k++) acc[k] = vf{};
        for (int64_t v = 0; v < row.n; v++) {
            vf gx = vf{}, gs = vf{};  // the group's part of dweight, dbias
            for (int k = 0; k < G; k++) {
                const vf xh = (row.get(x + (r + k) * D, v) - mean[r + k]) * rstd[r + k];
                const vf g = row.get(dy + (r + k) * D, v), gw = g * row.get(w, v);
                acc[2 * k] += gw;
                acc[2 * k + 1] += gw * xh;
                gx += g * xh;
                gs += g;
            }
            if (block) {
                store<W>(block + v * W, load<W>(block + v * W) + gx);
                store<W>(block + width + v * W, load<W>(block + width + v * W) + gs);
            }
        }
        if (block && ((r - r0) % LN_BLOCK + G >= LN_BLOCK || r + G >= r1)) {
            for (int64_t i = 0; i < 2 * width; i += W) {
                store<W>(total + i, load<W>(total + i) + load<W>(block + i));
                store<W>(block + i, vf{});
            }
        }
        if (!dx) continue;
        const vf c = hsum_each<2 * G>(acc) * inv_d;
        for (int k = 0; k < G; k++) {
            const float* xr = x + (r + k) * D;
            const E* gr = dy + (r + k) * D;
            const float m = mean[r + k], rs = rstd[r + k];
            const vf c1 = lane(c, 2 * k * S), c2 = lane(c, (2 * k + 1) * S);
            for (int64_t v = 0; v < row.n; v++) {
                const vf xh = (row.get(xr, v) - m) * rs;
                const vf gw = row.get(gr, v) * row.get(w, v);
                row.put(dx + (r + k) * D, v, (gw - c1 - xh * c2) * rs);
            }
        }
    }
}

// Runs f(std::integral_constant<int, NV>) with the NV that serves rows of D elements: the
// widths compiled unrolled (1, 2, 4 or 8 whole vectors), else 0 (any width).
template <class F>
static void with_width(int64_t D, F f) {
    switch (D % W ? 0 : D / W) {
        case 1: return f(std::integral_constant<int, 1>{});
        case 2: return f(std::integral_constant<int, 2>{});
        case 4: return f(std::integral_constant<int, 4>{});
        case 8: return f(std::integral_constant<int, 8>{});
        default: return f(std::integral_constant<int, 0>{});
    }
}

template <class E>
static int64_t layer_norm_forward(const float* x, const float* w, const float* b, float eps,
                                  E* out, float* mean, float* rstd, int64_t N, int64_t D,
                                  int64_t nthreads) {
    const int64_t nt = threads_for(N * D, nthreads);
    with_width(D, [&](auto nv) {
        run_threads(nt, [=](int64_t t) {
            constexpr int NV = decltype(nv)::value;
            const int64_t r0 = N * t / nt, r1 = N * (t + 1) / nt;
            const int64_t bulk = r0 + (r1 - r0) / GROUP * GROUP;
            ln_forward_rows<E, NV, GROUP>(x, w, b, eps, out, mean, rstd, D, r0, bulk);
            ln_forward_rows<E, NV, 1>(x, w, b, eps, out, mean, rstd, D, bulk, r1);
        });
    });
    return 0;
}

template <class E>
static int64_t layer_norm_backward(const E* dy, const float* x, const float* mean,
                                   const float* rstd, const float* w, float* dx, float* dw,
                                   float* db, int64_t N, int64_t D, int64_t nthreads) {
    const int64_t nt = threads_for(N * D, nthreads);
    const int64_t width = round_up(D, W), per_thread = 4 * width;
    float* sums = nullptr;
    if (dw) {
        const size_t bytes = sizeof(float) * nt * per_thread;  // a multiple of 64
        sums = (float*)aligned_alloc(64, bytes);
        if (!sums) return -5;
        memset(sums, 0, bytes);
    }
    with_width(D, [&](auto nv) {
        run_threads(nt, [=](int64_t t) {
            constexpr int NV = decltype(nv)::value;
            const int64_t r0 = N * t / nt, r1 = N * (t + 1) / nt;
            const int64_t bulk = r0 + (r1 - r0) / GROUP * GROUP;
            float* mine = sums ? sums + t * per_thread : nullptr;
            ln_backward_rows<E, NV, GROUP>(dy, x, mean, rstd, w, dx, mine, D, r0, bulk);
            ln_backward_rows<E, NV, 1>(dy, x, mean, rstd, w, dx, mine, D, bulk, r1);
        });
    });
    if (sums) {
        for (int64_t d = 0; d < D; d++) {
            float sw = 0.f, sb = 0.f;
            for (int64_t t = 0; t < nt; t++) {
                sw += sums[t * per_thread + d];
                sb += sums[t * per_thread + width + d];
            }
            dw[d] = sw;
            db[d] = sb;
        }
        free(sums);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// Exported functions. dtype: 0 float32, 1 bfloat16. All return 0 on success or a negative
// error code: -1 unknown dtype, -2 bad sizes, -5 out of memory. Tensors are contiguous.

extern "C" {

// x, w, b float32 (N, D), (D), (D); out (N, D) in dtype; mean, rstd (N) float32 or both NULL.
int64_t pw_layer_norm_forward(const float* x, const float* w, const float* b, double eps,
                              void* out, int64_t dtype, float* mean, float* rstd, int64_t N,
                              int64_t D, int64_t nthreads) {
    if (N < 0 || D < 1) return -2;
    if (dtype == 0)
        return layer_norm_forward(x, w, b, (float)eps, (float*)out, mean, rstd, N, D, nthreads);
    if (dtype == 1)
        return layer_norm_forward(x, w, b, (float)eps, (uint16_t*)out, mean, rstd, N, D,
                                  nthreads);
    return -1;
}

// dy (N, D) in dtype; x, mean, rstd, w as the forward had them; writes dx (N, D) unless NULL
// and dw, db (D) unless NULL (both or neither), all float32.
int64_t pw_layer_norm_backward(const void* dy, int64_t dtype, const float* x, const float* mean,
                               const float* rstd, const float* w, float* dx, float* dw,
                               float* db, int64_t N, int64_t D, int64_t nthreads) {
    if (N < 0 || D < 1) return -2;
    if (dtype == 0)
        return layer_norm_backward((const float*)dy, x, mean, rstd, w, dx, dw, db, N, D,
                                   nthreads);
    if (dtype == 1)
        return layer_norm_backward((const uint16_t*)dy, x, mean, rstd, w, dx, dw, db, N, D,
                                   nthreads);
    return -1;
}

// y = gelu(x), n elements of dtype.
int64_t pw_gelu_forward(const void* x, void* y, int64_t n, int64_t dtype, int64_t nthreads) {
    if (n < 0) return -2;
    if (dtype == 0) gelu_forward((const float*)x, (float*)y, n, nthreads);
    else if (dtype == 1) gelu_forward((const uint16_t*)x, (uint16_t*)y, n, nthreads);
    else return -1;
    return 0;
}

// dx = dy * gelu'(x), n elements of dtype.
int64_t pw_gelu_backward(const void* x, const void* dy, void* dx, int64_t n, int64_t dtype,
                         int64_t nthreads) {
    if (n < 0) return -2;
    if (dtype == 0)
        gelu_backward((const float*)x, (const float*)dy, (float*)dx, n, nthreads);
    else if (dtype == 1)
        gelu_backward((const uint16_t*)x, (const uint16_t*)dy, (uint16_t*)dx, n, nthreads);
    else return -1;
    return 0;
}

}  // extern "C"
