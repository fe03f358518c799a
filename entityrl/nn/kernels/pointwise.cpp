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
// GELU is evaluated by the vector functions of gelu.h (how, and how accurately: see there).

#include <type_traits>

#include "gelu.h"
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
// GELU (the vector functions are in gelu.h).

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

// Each thread's rows go LN_BLOCK at a time, so that a block's sums (x + res, when a residual
// is added first) and gradients are still in the cache when the next step reads them.
template <class E, class R>
static int64_t layer_norm_forward(const float* x, const R* res, float* sum, const float* w,
                                  const float* b, float eps, E* out, float* mean, float* rstd,
                                  int64_t N, int64_t D, int64_t nthreads) {
    const int64_t nt = threads_for(N * D, nthreads);
    with_width(D, [&](auto nv) {
        run_threads(nt, [=](int64_t t) {
            constexpr int NV = decltype(nv)::value;
            const Row<NV> row(D);
            const int64_t r1 = N * (t + 1) / nt;
            for (int64_t a = N * t / nt; a < r1; a += LN_BLOCK) {
                const int64_t z = a + LN_BLOCK < r1 ? a + LN_BLOCK : r1;
                if (res)
                    for (int64_t r = a; r < z; r++)
                        for (int64_t v = 0; v < row.n; v++)
                            row.put(sum + r * D, v, row.get(x + r * D, v) + row.get(res + r * D, v));
                const float* in = res ? sum : x;
                const int64_t bulk = a + (z - a) / GROUP * GROUP;
                ln_forward_rows<E, NV, GROUP>(in, w, b, eps, out, mean, rstd, D, a, bulk);
                ln_forward_rows<E, NV, 1>(in, w, b, eps, out, mean, rstd, D, bulk, z);
            }
        });
    });
    return 0;
}

// dsum NULL: the plain layer norm's backward. Else the layer norm of a sum x + res, whose sum
// was also an output (or x reached the loss by another path too): dx = dsum + the layer
// norm's gradient, and dres (unless NULL) its copy in res's type.
template <class E, class R>
static int64_t layer_norm_backward(const E* dy, const float* dsum, const float* x,
                                   const float* mean, const float* rstd, const float* w,
                                   float* dx, R* dres, float* dw, float* db, int64_t N, int64_t D,
                                   int64_t nthreads) {
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
            const Row<NV> row(D);
            const int64_t r1 = N * (t + 1) / nt;
            float* mine = sums ? sums + t * per_thread : nullptr;
            for (int64_t a = N * t / nt; a < r1; a += LN_BLOCK) {
                const int64_t z = a + LN_BLOCK < r1 ? a + LN_BLOCK : r1;
                const int64_t bulk = a + (z - a) / GROUP * GROUP;
                ln_backward_rows<E, NV, GROUP>(dy, x, mean, rstd, w, dx, mine, D, a, bulk);
                ln_backward_rows<E, NV, 1>(dy, x, mean, rstd, w, dx, mine, D, bulk, z);
                if (dsum && dx)
                    for (int64_t r = a; r < z; r++)
                        for (int64_t v = 0; v < row.n; v++) {
                            const vf g = row.get(dx + r * D, v) + row.get(dsum + r * D, v);
                            row.put(dx + r * D, v, g);
                            if (dres) row.put(dres + r * D, v, g);
                        }
            }
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
// res NULL: the layer norm of x. Else the layer norm of x + res, res (N, D) in res_dtype, the
// float32 sum written to sum (N, D).
int64_t pw_layer_norm_forward(const float* x, const void* res, int64_t res_dtype, float* sum,
                              const float* w, const float* b, double eps, void* out,
                              int64_t dtype, float* mean, float* rstd, int64_t N, int64_t D,
                              int64_t nthreads) {
    if (N < 0 || D < 1) return -2;
    if ((dtype != 0 && dtype != 1) || (res && res_dtype != 0 && res_dtype != 1)) return -1;
    const float e = (float)eps;
    if (dtype == 0 && res_dtype != 1)
        return layer_norm_forward(x, (const float*)res, sum, w, b, e, (float*)out, mean, rstd,
                                  N, D, nthreads);
    if (dtype == 0)
        return layer_norm_forward(x, (const uint16_t*)res, sum, w, b, e, (float*)out, mean,
                                  rstd, N, D, nthreads);
    if (res_dtype != 1)
        return layer_norm_forward(x, (const float*)res, sum, w, b, e, (uint16_t*)out, mean,
                                  rstd, N, D, nthreads);
    return layer_norm_forward(x, (const uint16_t*)res, sum, w, b, e, (uint16_t*)out, mean,
                              rstd, N, D, nthreads);
}

// dy (N, D) in dtype; x (the sum, for a layer norm of a sum), mean, rstd, w as the forward had
// them; writes dx (N, D) unless NULL and dw, db (D) unless NULL (both or neither), all
// float32. dsum NULL: a plain layer norm. Else the gradient of the sum output (N, D) float32
// (or of x by another path), added to dx, which is also written to dres (N, D) in res_dtype
// unless dres is NULL.
int64_t pw_layer_norm_backward(const void* dy, int64_t dtype, const float* dsum,
                               const float* x, const float* mean, const float* rstd,
                               const float* w, float* dx, void* dres, int64_t res_dtype,
                               float* dw, float* db, int64_t N, int64_t D, int64_t nthreads) {
    if (N < 0 || D < 1) return -2;
    if ((dtype != 0 && dtype != 1) || (dsum && res_dtype != 0 && res_dtype != 1)) return -1;
    if (dtype == 0 && res_dtype != 1)
        return layer_norm_backward((const float*)dy, dsum, x, mean, rstd, w, dx, (float*)dres,
                                   dw, db, N, D, nthreads);
    if (dtype == 0)
        return layer_norm_backward((const float*)dy, dsum, x, mean, rstd, w, dx,
                                   (uint16_t*)dres, dw, db, N, D, nthreads);
    if (res_dtype != 1)
        return layer_norm_backward((const uint16_t*)dy, dsum, x, mean, rstd, w, dx,
                                   (float*)dres, dw, db, N, D, nthreads);
    return layer_norm_backward((const uint16_t*)dy, dsum, x, mean, rstd, w, dx,
                               (uint16_t*)dres, dw, db, N, D, nthreads);
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
