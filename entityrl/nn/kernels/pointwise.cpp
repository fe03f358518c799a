// LayerNorm over the last dimension and the exact (erf) GELU, forward and backward, on the CPU;
// and the entity embedding, whose projection ends in a layer norm run by the same row code.
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
//
// The entity embedding (its Python side: entityrl/nn/kernels/embedding.py) normalises,
// projects and layer-normalises an entity type's raw features block by block in per-thread
// scratch and writes every entity's row to its slot; its backward recomputes each block from
// the raw features and gathers the slots' gradients (see the section below).

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

// Lane numbers for SHUFFLE (constants, so that shuffles by them compile to immediate-operand
// instructions): lane l is F(p, l).
#if W == 16
#define LANE_LIST(F, p)                                                                    \
    F(p, 0), F(p, 1), F(p, 2),  F(p, 3),  F(p, 4),  F(p, 5),  F(p, 6),  F(p, 7),      \
         F(p, 8), F(p, 9), F(p, 10), F(p, 11), F(p, 12), F(p, 13), F(p, 14), F(p, 15)
#elif W == 8
#define LANE_LIST(F, p) F(p, 0), F(p, 1), F(p, 2), F(p, 3), F(p, 4), F(p, 5), F(p, 6), F(p, 7)
#else
#define LANE_LIST(F, p) F(p, 0), F(p, 1), F(p, 2), F(p, 3)
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
            a[i] = SHUFFLE(a[2 * i], a[2 * i + 1], LANE_LIST(HALF_LO, WIDTH / 2)) +
                   SHUFFLE(a[2 * i], a[2 * i + 1], LANE_LIST(HALF_HI, WIDTH / 2));
        return hsum_each<G / 2, WIDTH / 2>(a);
    } else {
        vf r = a[0];
        // (clang checks the lane numbers even in discarded branches: hence the #if)
#if W > 8
        if constexpr (WIDTH > 8) r += SHUFFLE(r, r, XM(8));
#endif
#if W > 4
        if constexpr (WIDTH > 4) r += SHUFFLE(r, r, XM(4));
#endif
        if constexpr (WIDTH > 2) r += SHUFFLE(r, r, XM(2));
        if constexpr (WIDTH > 1) r += SHUFFLE(r, r, XM(1));
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
INL vf lane(vf x, int l) { return permute(x, vi{} + l); }

// Rows [r0, r1), G at a time (r1 - r0 a multiple of G); mean and rstd NULL: not saved. Row r
// of the output is row at[r] of out (at NULL: row r); out NULL: only the statistics.
template <class E, int NV, int G>
static void ln_forward_rows(const float* __restrict__ x, const float* __restrict__ w,
                            const float* __restrict__ b, float eps, E* __restrict__ out,
                            const int64_t* __restrict__ at, float* __restrict__ mean,
                            float* __restrict__ rstd, int64_t D, int64_t r0, int64_t r1) {
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
            if (out) {
                E* o = out + (at ? at[r + k] : r + k) * D;
                int64_t v = 0;
                for (; v + 1 < row.n && !row.partial(v + 1); v += 2) st2(o + v * W, y(v), y(v + 1));
                for (; v < row.n; v++) row.put(o, v, y(v));
            }
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

// Rows [r0, r1), G at a time (r1 - r0 a multiple of G). Row r of the output's gradient is row
// at[r] of dy (at NULL: row r). dx NULL: not wanted. sums NULL: no weight and bias gradients;
// else 4 * n * W floats: the thread's totals of dweight and dbias, then its block sums (zero
// between calls).
template <class E, int NV, int G>
static void ln_backward_rows(const E* __restrict__ dy, const int64_t* __restrict__ at,
                             const float* __restrict__ x,
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
                const vf g = row.get(dy + (at ? at[r + k] : r + k) * D, v);
                const vf gw = g * row.get(w, v);
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
            const E* gr = dy + (at ? at[r + k] : r + k) * D;
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
                ln_forward_rows<E, NV, GROUP>(in, w, b, eps, out, nullptr, mean, rstd, D, a, bulk);
                ln_forward_rows<E, NV, 1>(in, w, b, eps, out, nullptr, mean, rstd, D, bulk, z);
            }
        });
    });
    return 0;
}

// out[d * step] = the sum over threads t < nt of sums[t * per_thread + d], for d < D, adding
// the threads in order.
static void sum_threads(const float* sums, int64_t nt, int64_t per_thread, int64_t D,
                        float* out, int64_t step = 1) {
    for (int64_t d = 0; d < D; d++) {
        float s = 0.f;
        for (int64_t t = 0; t < nt; t++) s += sums[t * per_thread + d];
        out[d * step] = s;
    }
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
                ln_backward_rows<E, NV, GROUP>(dy, nullptr, x, mean, rstd, w, dx, mine, D, a,
                                               bulk);
                ln_backward_rows<E, NV, 1>(dy, nullptr, x, mean, rstd, w, dx, mine, D, bulk, z);
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
        sum_threads(sums, nt, per_thread, D, dw);
        sum_threads(sums + width, nt, per_thread, D, db);
        free(sums);
    }
    return 0;
}

// ---------------------------------------------------------------------------------------
// Entity embedding: per entity, its raw features x (K of them) normalised by running
// statistics, clamp((x - mean) * scale, -clip, clip), projected by a linear layer (D x K
// weight), ReLU, then the layer norm; the result is written to the entity's slot of the
// (slots, D) output. Rows go LN_BLOCK at a time through per-thread scratch: the normalised
// features and the ReLU outputs of a block stay in the cache, and the backward recomputes
// them instead of reading anything saved by the forward but the raw features.

struct Embedding {
    const float* x;      // (N, K)
    const float* tiles;  // the normalisation's mean then scale, each repeated W times (K * W)
    float clip;
    const float* wt;  // the projection's weight transposed: (K, round_up(D, W)), zero-padded
    const float* b;
    const float* lnw;
    const float* lnb;
    float eps;
    const int64_t* slots;  // (N): each entity's row of the output
    int64_t N, K, D;
};

// A thread's scratch: a block's normalised features, ReLU outputs and their gradients, and the
// layer norm's statistics (each part a multiple of 64 bytes).
static int64_t embed_scratch_floats(int64_t K, int64_t D) {
    return round_up(LN_BLOCK * K, W) + 2 * LN_BLOCK * round_up(D, W) + 2 * LN_BLOCK;
}

// Rows [r, r + R) of h: the ReLU of the projection of those of xn. R rows at a time, so that
// their sums (chains of K dependent additions) overlap: 8 cover the latency of the additions.
template <int R, int NV>
INL void project_rows(const Embedding& e, const Row<NV>& row, const float* __restrict__ xn,
                      float* __restrict__ h, int64_t r) {
    const int64_t width = round_up(e.D, W);
    for (int64_t v = 0; v < row.n; v++) {
        vf acc[R];
        for (int i = 0; i < R; i++) acc[i] = row.get(e.b, v);
        for (int64_t k = 0; k < e.K; k++) {
            const vf w = load<W>(e.wt + k * width + v * W);
            for (int i = 0; i < R; i++) acc[i] += xn[(r + i) * e.K + k] * w;
        }
        for (int i = 0; i < R; i++)  // torch.relu (NaN stays NaN)
            row.put(h + (r + i) * e.D, v, acc[i] < 0 ? vf{} : acc[i]);
    }
}

// out[j * width + v * W] += the sum over rows r < n of c[r * stride + j] * vector v of row r
// of g (D wide), for j < J: J columns of x^T g, or (c a 1, stride 0) the column sums of g.
// Rows go four at a time into separate sums, so that four chains of additions overlap.
template <int J, int NV>
INL void sum_products(const float* __restrict__ c, int64_t stride, const float* __restrict__ g,
                      const Row<NV>& row, int64_t D, int64_t n, float* __restrict__ out) {
    constexpr int U = 4;
    const int64_t width = row.n * W;
    for (int64_t v = 0; v < row.n; v++) {
        vf acc[U][J] = {};
        int64_t r = 0;
        for (; r + U <= n; r += U)
            for (int i = 0; i < U; i++) {
                const vf gv = row.get(g + (r + i) * D, v);
                for (int j = 0; j < J; j++) acc[i][j] += c[(r + i) * stride + j] * gv;
            }
        for (; r < n; r++) {
            const vf gv = row.get(g + r * D, v);
            for (int j = 0; j < J; j++) acc[0][j] += c[r * stride + j] * gv;
        }
        for (int j = 0; j < J; j++) {
            float* o = out + j * width + v * W;
            store<W>(o, load<W>(o) + ((acc[0][j] + acc[1][j]) + (acc[2][j] + acc[3][j])));
        }
    }
}

// Rows [a, z) (at most LN_BLOCK) of the thread whose scratch this is: the normalised features
// into its xn (z - a, K) and the ReLU of their projection into its h (z - a, D).
template <int NV>
static void embed_hidden(const Embedding& e, const Row<NV>& row, float* __restrict__ scratch,
                         int64_t a, int64_t z) {
    // The block's features are contiguous; element i is feature i % K, so the tiles (K * W
    // long) line up with every vector of W elements.
    const int64_t n = (z - a) * e.K, period = e.K * W;
    const float* x = e.x + a * e.K;
    float* xn = scratch;
    const vf lo = splat(-e.clip), hi = splat(e.clip);
    for (int64_t i = 0, j = 0; i < n; i += W, j = j + W == period ? 0 : j + W) {
        const int64_t m = n - i < W ? n - i : W;
        vf v = m < W ? ld_part(x + i, m) : ld(x + i);
        v = (v - ld(e.tiles + j)) * ld(e.tiles + period + j);
        v = v < lo ? lo : v > hi ? hi : v;  // torch.clamp (NaN stays NaN)
        if (m < W)
            st_part(xn + i, v, m);
        else
            st(xn + i, v);
    }
    float* h = scratch + round_up(LN_BLOCK * e.K, W);
    int64_t r = 0;
    for (; r + 8 <= z - a; r += 8) project_rows<8>(e, row, xn, h, r);
    for (; r < z - a; r++) project_rows<1>(e, row, xn, h, r);
}

// Forward of rows [a, z): their layer norms written to their slots of out.
template <int NV>
static void embed_forward_block(const Embedding& e, float* scratch, float* out, int64_t a,
                                int64_t z) {
    const Row<NV> row(e.D);
    embed_hidden(e, row, scratch, a, z);
    const float* h = scratch + round_up(LN_BLOCK * e.K, W);
    const int64_t bulk = (z - a) / GROUP * GROUP;
    const int64_t* at = e.slots + a;
    ln_forward_rows<float, NV, GROUP>(h, e.lnw, e.lnb, e.eps, out, at, nullptr, nullptr, e.D, 0,
                                      bulk);
    ln_forward_rows<float, NV, 1>(h, e.lnw, e.lnb, e.eps, out, at, nullptr, nullptr, e.D, bulk,
                                  z - a);
}

// Backward of rows [a, z) from dy, the gradient of the whole output: adds to the thread's
// sums (see embed_sums_floats) the rows' gradients of the layer norm's weight and bias (through
// its block sums) and of the projection's transposed weight and bias.
template <int NV>
static void embed_backward_block(const Embedding& e, const float* dy, float* scratch,
                                 float* sums, int64_t a, int64_t z) {
    const Row<NV> row(e.D);
    const int64_t n = z - a, bulk = n / GROUP * GROUP, width = round_up(e.D, W);
    embed_hidden(e, row, scratch, a, z);
    const float* xn = scratch;
    float* h = scratch + round_up(LN_BLOCK * e.K, W);
    float* g = h + LN_BLOCK * width;
    float* mean = g + LN_BLOCK * width;
    float* rstd = mean + LN_BLOCK;
    float* none = nullptr;  // the layer norm's output: not needed, only its statistics
    ln_forward_rows<float, NV, GROUP>(h, e.lnw, e.lnb, e.eps, none, nullptr, mean, rstd, e.D, 0,
                                      bulk);
    ln_forward_rows<float, NV, 1>(h, e.lnw, e.lnb, e.eps, none, nullptr, mean, rstd, e.D, bulk,
                                  n);
    const int64_t* at = e.slots + a;
    ln_backward_rows<float, NV, GROUP>(dy, at, h, mean, rstd, e.lnw, g, sums, e.D, 0, bulk);
    ln_backward_rows<float, NV, 1>(dy, at, h, mean, rstd, e.lnw, g, sums, e.D, bulk, n);
    // Through the ReLU (no gradient where its output is 0), then the projection's weight
    // gradient x^T g and bias gradient, each the block's sum added to the thread's total.
    for (int64_t r = 0; r < n; r++)
        for (int64_t v = 0; v < row.n; v++) {
            const vf gv = row.get(g + r * e.D, v);
            row.put(g + r * e.D, v, row.get(h + r * e.D, v) > 0 ? gv : vf{});
        }
    float* dwt = sums + 4 * width;
    int64_t k = 0;
    for (; k + 4 <= e.K; k += 4) sum_products<4>(xn + k, e.K, g, row, e.D, n, dwt + k * width);
    for (; k + 2 <= e.K; k += 2) sum_products<2>(xn + k, e.K, g, row, e.D, n, dwt + k * width);
    for (; k < e.K; k++) sum_products<1>(xn + k, e.K, g, row, e.D, n, dwt + k * width);
    const float one = 1.f;
    sum_products<1>(&one, 0, g, row, e.D, n, dwt + e.K * width);  // the bias's gradient
}

// Floats of a thread's sums in the backward: the layer norm's (see ln_backward_rows), then
// the projection's transposed weight gradient (K, width) and its bias gradient.
static int64_t embed_sums_floats(int64_t K, int64_t D) { return (5 + K) * round_up(D, W); }

// Sets e up (its tiles and transposed weight from w (D, K), mean and scale (K)) and calls
// f(nt, sums, run): nt threads, each with sums_floats zeroed floats at sums + t * sums_floats,
// and run(block), which calls block(nv, e, thread's scratch, thread's sums, a, z) on every
// block [a, z) of up to LN_BLOCK rows, nv the constant of the row width (see with_width).
// Slots must lie in [0, num_slots).
template <class F>
static int64_t with_embedding(Embedding e, const float* w, const float* mean, const float* scale,
                              int64_t num_slots, int64_t sums_floats, int64_t nthreads, F f) {
    if (e.N < 0 || e.K < 1 || e.D < 1) return -2;
    for (int64_t i = 0; i < e.N; i++)
        if (e.slots[i] < 0 || e.slots[i] >= num_slots) return -2;
    const int64_t nt = threads_for(e.N * e.D, nthreads), width = round_up(e.D, W);
    const int64_t period = e.K * W, shared = e.K * (2 * W + width);
    const int64_t scratch = embed_scratch_floats(e.K, e.D);
    const size_t bytes = sizeof(float) * (shared + nt * (scratch + sums_floats));
    float* buffer = (float*)aligned_alloc(64, bytes);
    if (!buffer) return -5;
    memset(buffer, 0, bytes);
    for (int64_t j = 0; j < period; j++) {
        buffer[j] = mean[j % e.K];
        buffer[period + j] = scale[j % e.K];
    }
    float* wt = buffer + 2 * period;
    for (int64_t d = 0; d < e.D; d++)
        for (int64_t k = 0; k < e.K; k++) wt[k * width + d] = w[d * e.K + k];
    e.tiles = buffer;
    e.wt = wt;
    float* scratches = buffer + shared;
    float* sums = scratches + nt * scratch;
    f(nt, sums, [&](auto block) {
        with_width(e.D, [&](auto nv) {
            run_threads(nt, [=](int64_t t) {
                const int64_t r1 = e.N * (t + 1) / nt;
                for (int64_t a = e.N * t / nt; a < r1; a += LN_BLOCK)
                    block(nv, e, scratches + t * scratch, sums + t * sums_floats, a,
                          a + LN_BLOCK < r1 ? a + LN_BLOCK : r1);
            });
        });
    });
    free(buffer);
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

// The entity embedding of N entities with K features into rows slots[i] of out (num_slots,
// D), all float32: x (N, K); mean, scale (K) and clip of the normalisation; the projection's
// weight w (D, K) and bias b (D); the layer norm's weight lnw, bias lnb (D) and eps. Other rows
// of out are left as they are.
int64_t pw_embed_forward(const float* x, const float* mean, const float* scale, double clip,
                         const float* w, const float* b, const float* lnw, const float* lnb,
                         double eps, const int64_t* slots, float* out, int64_t num_slots,
                         int64_t N, int64_t K, int64_t D, int64_t nthreads) {
    const Embedding e{x, nullptr, (float)clip, nullptr, b, lnw, lnb, (float)eps, slots, N, K, D};
    auto forward = [out](auto nv, const Embedding& e, float* scratch, float*, int64_t a,
                         int64_t z) {
        embed_forward_block<decltype(nv)::value>(e, scratch, out, a, z);
    };
    return with_embedding(e, w, mean, scale, num_slots, 0, nthreads,
                          [&](int64_t, float*, auto run) { run(forward); });
}

// Its backward from dy (num_slots, D), the gradient of out: the gradients dw (D, K), db, dlnw,
// dlnb (D) of the projection's and the layer norm's parameters, float32.
int64_t pw_embed_backward(const float* x, const float* mean, const float* scale, double clip,
                          const float* w, const float* b, const float* lnw, const float* lnb,
                          double eps, const int64_t* slots, const float* dy, float* dw, float* db,
                          float* dlnw, float* dlnb, int64_t num_slots, int64_t N, int64_t K,
                          int64_t D, int64_t nthreads) {
    const Embedding e{x, nullptr, (float)clip, nullptr, b, lnw, lnb, (float)eps, slots, N, K, D};
    const int64_t per_thread = embed_sums_floats(K, D), width = round_up(D, W);
    return with_embedding(e, w, mean, scale, num_slots, per_thread, nthreads,
                          [&](int64_t nt, float* sums, auto run) {
        run([dy](auto nv, const Embedding& e, float* scratch, float* mine, int64_t a, int64_t z) {
            embed_backward_block<decltype(nv)::value>(e, dy, scratch, mine, a, z);
        });
        sum_threads(sums, nt, per_thread, D, dlnw);
        sum_threads(sums + width, nt, per_thread, D, dlnb);
        for (int64_t k = 0; k < K; k++)
            sum_threads(sums + (4 + k) * width, nt, per_thread, D, dw + k, K);
        sum_threads(sums + (4 + K) * width, nt, per_thread, D, db);
    });
}

}  // extern "C"
