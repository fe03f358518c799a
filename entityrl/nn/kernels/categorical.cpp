// Categorical distributions over the legal entries of each row of logits (the policy's action
// heads): sampling or scoring one choice per row, its log-probability, the entropy, and the
// gradient of the last two with respect to the logits.
//
// Built at run time by entityrl/nn/kernels/build.py and called through ctypes; the Python side
// (contract, autograd, fallback) is entityrl/nn/kernels/categorical.py. Logits are float32
// (A, C), the legal mask one byte per entry (nonzero: legal) or absent (all legal).
//
// Per row, over its legal entries: M = max logit, s = sum e^(x - M), log p = (x - M) - log s
// (as torch's log_softmax computes it: x - M is exact for the likely entries, where
// x - (M + log s) would round M + log s first), logprob = log p[chosen], entropy
// H = log s - sum e^(x - M) (x - M) / s (that is, -sum p log p, with illegal entries
// contributing exactly 0). The forward saves M and log s per row for the backward, which
// recomputes p from the logits: one exponential per entry costs less than writing (A, C)
// log-probabilities in the forward and reading them back, and keeps the saved state to two
// floats a row. Rows whose entries are all illegal get M = log s = -inf, hence NaN
// log-probability and entropy, as torch's log_softmax gives; their gradient is 0 (every
// entry is illegal).
//
// Rows of at most NARROW choices (most action heads have 2-10) run W at a time, one row per
// lane, so that the row maxima and sums are plain vector operations instead of a horizontal
// reduction per row. The block's W x C entries are C contiguous vectors; column j (entry j
// of every row) is picked from them with two-source permutes, ceil(C / 2) per column: on the
// AMD Zen 4 this was tuned on, gathers instead took half the forward's time at C = 5, and
// the permutes' C^2 / 2 cost overtakes the row-at-a-time path only beyond 32 choices.
// Illegal entries are marked before the permutes with a signalling-NaN bit pattern, which
// arithmetic never produces (a legal logit given with exactly those bits would count as
// illegal), so one permute network carries both the logits and the mask. The backward needs
// no reductions: it runs over the block's contiguous entries, a row's values brought to its
// entries' lanes by permutes. Wider rows (select-entity heads over many candidates) and the
// last, partial block run one row at a time, vectorised along the row. Threads take whole
// blocks, so the results do not depend on the thread count.
//
// Sampling is the Gumbel-max trick as the torch code writes it: the argmax over legal
// entries of x - log(-log u), u uniform noise from torch, ties to the first index, NaN
// winning as in torch.argmax. The logarithms here and torch's may differ in the last bit,
// so the two can pick different entries only where two scores agree to about 1e-7.

#include "simd.h"

#define NARROW 32  // rows of up to this many choices run one per lane (see above)
// Calls of fewer entries run on one thread: at about 1 ns an entry, more threads would
// spend longer starting than working.
#define MIN_PER_THREAD 16384

typedef int64_t vl __attribute__((vector_size(8 * W)));

enum Mode { GIVEN = 0, ARGMAX = 1, SAMPLE = 2 };

INL vi lane_index() {
    vi l;
    for (int i = 0; i < W; i++) l[i] = i;
    return l;
}

INL bool any(vi m) {
#if W == 16
    return _mm512_test_epi32_mask((__m512i)m, (__m512i)m) != 0;
#elif W == 8 && defined(__AVX__)
    return _mm256_movemask_ps((__m256)m) != 0;
#else
    int r = 0;
    for (int l = 0; l < W; l++) r |= m[l];
    return r != 0;
#endif
}

// The polynomial with coefficients c (highest degree first) at x.
template <int N>
INL vf horner(vf x, const float (&c)[N]) {
    vf p = splat(c[0]);
    for (int i = 1; i < N; i++) p = p * x + c[i];
    return p;
}

// e^d for d <= 0 or NaN: d = k ln 2 + r, |r| <= ln 2 / 2, with ln 2 in two parts (Cody-Waite)
// so that r is exact even for large |d|, and e^r by the Cephes expf polynomial (about 1 ulp).
// Below -87.3, where e^d would be denormal, and at -inf the result is 0; NaN stays NaN.
INL vf vexp(vf d) {
    const vi low = d < splat(-87.33654f);
    d = low ? splat(0.f) : d;
    const vf k = (d * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round(d / ln 2)
    const vf r = (d - k * 0.693359375f) - k * -2.12194440e-4f;
    static const float poly[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
    const vf p = horner(r, poly) * (r * r) + r + 1.f;
    const vi scale = (__builtin_convertvector(k, vi) + 127) << 23;
    return low ? splat(0.f) : p * (vf)scale;
}

// log x: x = 2^e m with m in [sqrt(1/2), sqrt 2), log m by the Cephes logf polynomial in
// m - 1 (about 1 ulp), e ln 2 added in two parts. Lanes where x is not a positive normal
// number (0, denormals, infinities, NaN, negatives; rare here) take logf.
INL vf vlog(vf x) {
    const vi bits = (vi)x;
    vi e = ((bits >> 23) & 0xff) - 126;
    vf m = (vf)((bits & 0x007fffff) | 0x3f000000);  // in [1/2, 1)
    const vi small = m < splat(0.707106781186547524f);
    e += small;  // -1 where m is doubled
    m = (small ? m + m : m) - 1.f;
    const vf z = m * m;
    static const float poly[] = {7.0376836292e-2f,  -1.1514610310e-1f, 1.1676998740e-1f,
                                 -1.2420140846e-1f, 1.4249322787e-1f,  -1.6668057665e-1f,
                                 2.0000714765e-1f,  -2.4999993993e-1f, 3.3333331174e-1f};
    vf y = horner(m, poly) * m * z;
    const vf ef = __builtin_convertvector(e, vf);
    y += ef * -2.12194440e-4f;
    y += z * -0.5f;
    vf r = (m + y) + ef * 0.693359375f;
    const vi odd = ~((x >= splat(1.17549435e-38f)) & (x <= splat(3.40282347e+38f)));
    if (any(odd))
        for (int l = 0; l < W; l++)
            if (odd[l]) r[l] = logf(x[l]);
    return r;
}

// The n <= W floats at p, `fill` in the lanes after them.
INL vf load_n(const float* p, int64_t n, float fill) {
#if W == 16
    return _mm512_mask_loadu_ps(splat(fill), (__mmask16)((1u << n) - 1), p);
#else
    if (n == W) return load<W>(p);
    float buf[W];
    for (int l = 0; l < W; l++) buf[l] = l < n ? p[l] : fill;
    return load<W>(buf);
#endif
}

// -1 in lane l where byte l of the n <= W at p is nonzero, else 0 (and 0 from lane n on).
// (GCC widens a byte vector lane by lane: the intrinsics do it in one instruction.)
INL vi nonzero(const uint8_t* p, int64_t n) {
#if W == 16 && defined(__AVX512BW__) && defined(__AVX512VL__)
    const __m128i b = _mm_maskz_loadu_epi8((__mmask16)((1u << n) - 1), p);
    return (vi)_mm512_cvtepu8_epi32(b) != 0;
#else
    uint8_t b[W] = {};
    memcpy(b, p, n);
#if W == 16
    return (vi)_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)b)) != 0;
#elif W == 8 && defined(__AVX2__)
    return (vi)_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)b)) != 0;
#else
    vi r;
    for (int l = 0; l < W; l++) r[l] = b[l];
    return r != 0;
#endif
#endif
}

// Horizontal maximum (NaN: any lane's value may win; a NaN logit makes the row NaN anyway)
// and minimum.
INL float max_lane(vf x) {
#if W == 16
    return _mm512_reduce_max_ps(x);
#else
    float m = x[0];
    for (int l = 1; l < W; l++) m = x[l] > m ? x[l] : m;
    return m;
#endif
}
INL int32_t min_lane(vi x) {
#if W == 16
    return _mm512_reduce_min_epi32((__m512i)x);
#else
    int32_t m = x[0];
    for (int l = 1; l < W; l++) m = x[l] < m ? x[l] : m;
    return m;
#endif
}

// The index and value of the maximum seen so far, per lane, with torch.argmax's order: a
// larger value, or the first NaN, replaces the current one; an equal value does not, so ties
// keep the first index (indices are offered in increasing order per lane).
struct ArgMax {
    vf best;
    vi at;
    void add(vf v, vi index) {
        const vi take = (v > best) | ((v != v) & (best == best));
        best = take ? v : best;
        at = take ? index : at;
    }
    // The winner across lanes (each lane having seen other indices): the first index of the
    // largest value, or of a NaN if there is one.
    int32_t across() const {
        const vi nan = best != best;
        if (any(nan)) return min_lane(nan ? at : vi{} + INT32_MAX);
        return min_lane(best == max_lane(best) ? at : vi{} + INT32_MAX);
    }
};

// Marks illegal entries in the permuted vectors: a signalling NaN, which arithmetic never
// produces (it quiets NaNs) and permutes and blends carry unchanged.
#define ILLEGAL ((int32_t)0xff800001u)

// Entry j of each of the W rows (lane r: entry r * C + j of the block), from the block's C
// vectors: the entries of lanes r from 2kW on are in vectors 2k and 2k + 1, so pair k's
// permute overrides the lanes of the pairs before it.
INL vf column(const vf* block, int64_t C, int64_t j) {
    const vi at = lane_index() * (int32_t)C + (int32_t)j;
    vf col = permute2(block[0], block[C > 1], at);
    for (int64_t k = 1; 2 * k < C; k++) {
        const vi idx = at - (int32_t)(2 * k * W);
        const vf second = block[2 * k + 1 < C ? 2 * k + 1 : 2 * k];
        col = idx >= 0 ? permute2(block[2 * k], second, idx) : col;
    }
    return col;
}

// ---------------------------------------------------------------------------------------
// Forward.

// Where a row's (or a block's) inputs and outputs are; pointers already offset to the row.
struct Fwd {
    const float* x;
    const uint8_t* legal;  // NULL: all legal
    const float* u;  // noise, mode SAMPLE only
    int64_t* act;  // read (mode GIVEN) or written
    float *logprob, *entropy;
    float *max, *log_sum;  // saved for the backward, or NULL
};

// W rows of C <= NARROW choices, one per lane. Returns whether a given action was out of range.
static bool block_forward(const Fwd& f, int mode, int64_t C) {
    // The block's entries as they lie in memory, illegal ones marked; in mode SAMPLE also
    // their Gumbel scores (computed here so that u needs no permutes of its own).
    vf block[NARROW], scores[NARROW];
    for (int64_t v = 0; v < C; v++) {
        const vf x = load<W>(f.x + v * W);
        const vi legal = f.legal ? nonzero(f.legal + v * W, W) : vi{} - 1;
        block[v] = legal ? x : (vf)(vi{} + ILLEGAL);
        if (mode == SAMPLE)
            scores[v] = legal ? x - vlog(-vlog(load<W>(f.u + v * W))) : splat(-INFINITY);
    }
    vf xm[NARROW];  // column j: the logits, -inf where illegal
    vi ok[NARROW];
    vf M = splat(-INFINITY);
    for (int64_t j = 0; j < C; j++) {
        const vf col = column(block, C, j);
        ok[j] = f.legal ? (vi)col != ILLEGAL : vi{} - 1;
        xm[j] = ok[j] ? col : splat(-INFINITY);
        M = xm[j] > M ? xm[j] : M;
    }
    vf s = {}, t = {};
    for (int64_t j = 0; j < C; j++) {
        const vf d = xm[j] - M, e = vexp(d);
        s += ok[j] ? e : vf{};
        t += ok[j] ? e * d : vf{};
    }
    const vf log_s = vlog(s);
    vi c;
    if (mode == GIVEN) {
        vl a;
        memcpy(&a, f.act, sizeof a);
        if (any(__builtin_convertvector((a < 0) | (a >= C), vi))) return true;
        c = __builtin_convertvector(a, vi);
    } else {
        auto score = [&](int64_t j) { return mode == SAMPLE ? column(scores, C, j) : xm[j]; };
        ArgMax am{score(0), vi{}};
        for (int64_t j = 1; j < C; j++) am.add(score(j), vi{} + (int32_t)j);
        c = am.at;
        const vl a = __builtin_convertvector(c, vl);
        memcpy(f.act, &a, sizeof a);
    }
    vf xc = xm[0];
    for (int64_t j = 1; j < C; j++) xc = c == (int32_t)j ? xm[j] : xc;
    store<W>(f.logprob, (xc - M) - log_s);
    store<W>(f.entropy, log_s - t / s);
    if (f.max) {
        store<W>(f.max, M);
        store<W>(f.log_sum, log_s);
    }
    return false;
}

// One row of any width. Returns whether a given action was out of range.
static bool row_forward(const Fwd& f, int mode, int64_t C) {
    const vi lanes = lane_index();
    const int64_t nv = (C + W - 1) / W;
    auto width = [&](int64_t v) { return C - v * W < W ? C - v * W : W; };  // of vector v
    // Vector v of the row: the logits, illegal ones (and lanes past the end) -inf.
    auto masked = [&](int64_t v, vi* ok) {
        const int64_t n = width(v);
        *ok = f.legal ? nonzero(f.legal + v * W, n) : lanes < (int32_t)n;
        return *ok ? load_n(f.x + v * W, n, 0.f) : splat(-INFINITY);
    };
    vi ok;
    ArgMax am{masked(0, &ok), lanes};  // of the logits; mode SAMPLE redoes it with the scores
    for (int64_t v = 1; v < nv; v++) am.add(masked(v, &ok), lanes + (int32_t)(v * W));
    const float M = max_lane(am.best);
    vf sv = {}, tv = {};
    for (int64_t v = 0; v < nv; v++) {
        const vf xm = masked(v, &ok);
        const vf d = xm - M, e = vexp(d);
        sv += ok ? e : vf{};
        tv += ok ? e * d : vf{};
    }
    const float s = hsum(sv), log_s = logf(s);
    int64_t c;
    if (mode == GIVEN) {
        c = *f.act;
        if (c < 0 || c >= C) return true;
    } else {
        if (mode == SAMPLE) {
            auto score = [&](int64_t v) {
                return masked(v, &ok) - vlog(-vlog(load_n(f.u + v * W, width(v), 0.5f)));
            };
            am = ArgMax{score(0), lanes};
            for (int64_t v = 1; v < nv; v++) am.add(score(v), lanes + (int32_t)(v * W));
        }
        c = am.across();
        *f.act = c;
    }
    const float xc = !f.legal || f.legal[c] ? f.x[c] : -INFINITY;
    *f.logprob = (xc - M) - log_s;
    *f.entropy = log_s - hsum(tv) / s;
    if (f.max) {
        *f.max = M;
        *f.log_sum = log_s;
    }
    return false;
}

static int64_t threads_for(int64_t entries, int64_t nthreads) {
    int64_t nt = entries / MIN_PER_THREAD;
    if (nt > nthreads) nt = nthreads;
    return nt < 1 ? 1 : nt;
}

// Runs block(r) for the rows r .. r + W - 1 of every full block of W rows (for C <= NARROW)
// and row(r) for every other row, the blocks (or rows) split between threads.
template <class Block, class Row>
static void for_rows(int64_t A, int64_t C, int64_t nthreads, Block block, Row row) {
    const int64_t per = C <= NARROW ? W : 1, units = (A + per - 1) / per;
    const int64_t nt = threads_for(A * C, nthreads);
    run_threads(nt, [&](int64_t t) {
        for (int64_t b = units * t / nt; b < units * (t + 1) / nt; b++) {
            const int64_t r0 = b * per;
            if (per == W && r0 + W <= A)
                block(r0);
            else
                for (int64_t r = r0; r < A && r < r0 + per; r++) row(r);
        }
    });
}

static int64_t forward(const float* x, const uint8_t* legal, const float* u, int64_t* act,
                       int mode, float* logprob, float* entropy, float* max,
                       float* log_sum, int64_t A, int64_t C, int64_t nthreads) {
    int bad = 0;
    auto at = [=](int64_t r) {
        return Fwd{x + r * C,
                   legal ? legal + r * C : nullptr,
                   u ? u + r * C : nullptr,
                   act + r,
                   logprob + r,
                   entropy + r,
                   max ? max + r : nullptr,
                   max ? log_sum + r : nullptr};
    };
    for_rows(
        A, C, nthreads,
        [&](int64_t r) {
            if (block_forward(at(r), mode, C)) __atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
        },
        [&](int64_t r) {
            if (row_forward(at(r), mode, C)) __atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
        });
    return bad ? -3 : 0;
}

// ---------------------------------------------------------------------------------------
// Backward: d logprob / d x_j = [j == chosen] - p_j, d entropy / d x_j = -p_j (log p_j + H),
// log p_j = (x_j - M) - log s; 0 for illegal entries.

struct Bwd {
    const float* x;
    const uint8_t* legal;
    const int64_t* act;
    const float *max, *log_sum, *entropy;  // as the forward wrote them
    const float *glogprob, *gentropy;  // NULL: no gradient from that output
    float* dx;
};

// A row's values, in the lanes of its entries.
struct RowValues {
    vf max, log_sum, entropy, glogprob, gentropy;
    vi chosen;
    // The values of W rows, lane r from row r.
    static RowValues load_rows(const Bwd& b) {
        vl a;
        memcpy(&a, b.act, sizeof a);
        return {load<W>(b.max),
                load<W>(b.log_sum),
                load<W>(b.entropy),
                b.glogprob ? load<W>(b.glogprob) : vf{},
                b.gentropy ? load<W>(b.gentropy) : vf{},
                __builtin_convertvector(a, vi)};
    }
    // One row's values in every lane.
    static RowValues splat_row(const Bwd& b) {
        return {splat(*b.max),
                splat(*b.log_sum),
                splat(*b.entropy),
                splat(b.glogprob ? *b.glogprob : 0.f),
                splat(b.gentropy ? *b.gentropy : 0.f),
                vi{} + (int32_t)*b.act};
    }
    // Lane l from lane rows[l].
    RowValues pick(vi rows) const {
        return {permute(max, rows),      permute(log_sum, rows),
                permute(entropy, rows),  permute(glogprob, rows),
                permute(gentropy, rows), permute(chosen, rows)};
    }
};

// The gradient of entries with logits x in columns col, legal where ok, of rows with values v.
INL vf entry_grad(const Bwd& b, vf x, vi col, vi ok, const RowValues& v) {
    const vf logp = (x - v.max) - v.log_sum, p = vexp(logp);
    vf g = {};
    if (b.glogprob) g = v.glogprob * (col == v.chosen ? 1.f - p : -p);
    if (b.gentropy) g -= v.gentropy * p * (logp + v.entropy);
    return ok ? g : vf{};
}

// W rows of C <= NARROW choices: the block's W * C entries are C whole vectors; lane l of
// vector v is entry v * W + l of the block, in row rows[v][l] and column cols[v][l].
static void block_backward(const Bwd& b, int64_t C, const vi* rows, const vi* cols) {
    const RowValues values = RowValues::load_rows(b);
    for (int64_t v = 0; v < C; v++) {
        const vi ok = b.legal ? nonzero(b.legal + v * W, W) : vi{} - 1;
        store<W>(b.dx + v * W, entry_grad(b, load<W>(b.x + v * W), cols[v], ok,
                                          values.pick(rows[v])));
    }
}

static void row_backward(const Bwd& b, int64_t C) {
    const RowValues values = RowValues::splat_row(b);
    for (int64_t j = 0; j < C; j += W) {
        const int64_t n = C - j < W ? C - j : W;
        const vi ok = b.legal ? nonzero(b.legal + j, n) : vi{} - 1;
        const vf g = entry_grad(b, load_n(b.x + j, n, 0.f), lane_index() + (int32_t)j, ok, values);
        if (n == W) {
            store<W>(b.dx + j, g);
        } else {
            float buf[W];
            store<W>(buf, g);
            memcpy(b.dx + j, buf, n * sizeof(float));
        }
    }
}

static void backward(const Bwd& b, int64_t A, int64_t C, int64_t nthreads) {
    vi rows[NARROW], cols[NARROW];
    for (int64_t v = 0; v < C && v < NARROW; v++) {
        const vi entry = lane_index() + (int32_t)(v * W);
        rows[v] = entry / (int32_t)C;
        cols[v] = entry % (int32_t)C;
    }
    auto at = [&](int64_t r) {
        return Bwd{b.x + r * C,
                   b.legal ? b.legal + r * C : nullptr,
                   b.act + r,
                   b.max + r,
                   b.log_sum + r,
                   b.entropy + r,
                   b.glogprob ? b.glogprob + r : nullptr,
                   b.gentropy ? b.gentropy + r : nullptr,
                   b.dx + r * C};
    };
    for_rows(
        A, C, nthreads,
        [&](int64_t r) { block_backward(at(r), C, rows, cols); },
        [&](int64_t r) { row_backward(at(r), C); });
}

// ---------------------------------------------------------------------------------------
// Select-entity scores: logits[pos[p]] = scale * x[slot[p]] . u[actor[p]] for each (actor,
// candidate) pair p, the other logits 0 (the candidates' mask makes them illegal). The
// gradient runs the other way: dx[slot] accumulates scale * dlogits * u[actor] over the pairs
// of that slot (0 for slots of no pair), du[actor] scale * dlogits * x[slot] over its pairs.
// Candidates vastly outnumber actors, so one vector per actor (its query mapped back through
// the key projection) replaces a projected key per candidate, and each candidate's embedding
// is read once each way instead of being gathered, projected and scattered back. One thread:
// pairs of different actors may share a slot, and the work is a fraction of a millisecond.

static float dot(const float* a, const float* b, int64_t D) {
    vf acc = vf{};
    int64_t d = 0;
    for (; d + W <= D; d += W) acc += load<W>(a + d) * load<W>(b + d);
    float sum = hsum(acc);
    for (; d < D; d++) sum += a[d] * b[d];
    return sum;
}

// y += c * x over D floats.
static void axpy(float c, const float* x, float* y, int64_t D) {
    int64_t d = 0;
    for (; d + W <= D; d += W) store<W>(y + d, load<W>(y + d) + c * load<W>(x + d));
    for (; d < D; d++) y[d] += c * x[d];
}

// ---------------------------------------------------------------------------------------
// Exported functions: 0 on success or a negative error code (-1 unknown mode, -2 bad sizes
// or a missing input, -3 a given action outside [0, C), -4 a pair's index out of range,
// -5 out of memory).
// Arrays are contiguous, A rows of C entries; nthreads: the most threads to use.

extern "C" {

// x (A, C) float32; legal (A, C) bytes or NULL; mode 0: score the actions in act (A) int64,
// 1: write the argmax of the legal logits to act, 2: write a Gumbel-max sample with noise u
// (A, C) in [0, 1). Writes logprob, entropy (A) and, unless NULL, what the backward needs:
// max, log_sum (A).
int64_t cat_forward(const float* x, const uint8_t* legal, const float* u, int64_t* act,
                    int64_t mode, float* logprob, float* entropy, float* max, float* log_sum,
                    int64_t A, int64_t C, int64_t nthreads) {
    if (A < 0 || C < 1 || !max != !log_sum) return -2;
    if (mode != GIVEN && mode != ARGMAX && mode != SAMPLE) return -1;
    if (mode == SAMPLE && !u && A > 0) return -2;  // (an empty tensor's address may be NULL)
    return forward(x, legal, u, act, (int)mode, logprob, entropy, max, log_sum, A, C, nthreads);
}

// The forward's x, legal, act, max, log_sum and entropy; glogprob, gentropy (A) the gradients
// of the outputs (either NULL: none). Writes dx (A, C).
int64_t cat_backward(const float* x, const uint8_t* legal, const int64_t* act, const float* max,
                     const float* log_sum, const float* entropy, const float* glogprob,
                     const float* gentropy, float* dx, int64_t A, int64_t C, int64_t nthreads) {
    if (A < 0 || C < 1) return -2;
    backward(Bwd{x, legal, act, max, log_sum, entropy, glogprob, gentropy, dx}, A, C, nthreads);
    return 0;
}

// Select-entity logits (L) from x (S, D) and u (A, D), float32, for P pairs (slot, actor,
// pos: int64 indices into x's rows, u's rows and the logits). -4: an index out of range.
int64_t sel_forward(const float* x, const float* u, const int64_t* slot, const int64_t* actor,
                    const int64_t* pos, float* logits, float scale, int64_t P, int64_t S,
                    int64_t A, int64_t L, int64_t D) {
    if (P < 0 || S < 0 || A < 0 || L < 0 || D < 1) return -2;
    for (int64_t p = 0; p < P; p++)
        if (slot[p] < 0 || slot[p] >= S || actor[p] < 0 || actor[p] >= A || pos[p] < 0 ||
            pos[p] >= L)
            return -4;
    memset(logits, 0, L * sizeof(float));
    for (int64_t p = 0; p < P; p++)
        logits[pos[p]] = scale * dot(x + slot[p] * D, u + actor[p] * D, D);
    return 0;
}

// The gradients of sel_forward's logits, dlogits (L): writes dx (S, D) and du (A, D).
int64_t sel_backward(const float* x, const float* u, const int64_t* slot, const int64_t* actor,
                     const int64_t* pos, const float* dlogits, float* dx, float* du, float scale,
                     int64_t P, int64_t S, int64_t A, int64_t L, int64_t D) {
    if (P < 0 || S < 0 || A < 0 || L < 0 || D < 1) return -2;
    for (int64_t p = 0; p < P; p++)
        if (slot[p] < 0 || slot[p] >= S || actor[p] < 0 || actor[p] >= A || pos[p] < 0 ||
            pos[p] >= L)
            return -4;
    // A slot's first pair writes its row of dx, later pairs add to it, and the rows of no
    // pair are zeroed last: each row of dx is written once or twice, not zeroed, read and
    // written again (dx is as large as x, du is small).
    uint8_t* seen = (uint8_t*)calloc(S > 0 ? S : 1, 1);
    if (!seen) return -5;
    memset(du, 0, A * D * sizeof(float));
    for (int64_t p = 0; p < P; p++) {
        const float g = scale * dlogits[pos[p]];
        const float* ua = u + actor[p] * D;
        float* row = dx + slot[p] * D;
        if (seen[slot[p]]) {
            axpy(g, ua, row, D);
        } else {
            for (int64_t d = 0; d < D; d++) row[d] = g * ua[d];
            seen[slot[p]] = 1;
        }
        axpy(g, x + slot[p] * D, du + actor[p] * D, D);
    }
    for (int64_t s = 0; s < S; s++)
        if (!seen[s]) memset(dx + s * D, 0, D * sizeof(float));
    free(seen);
    return 0;
}

}  // extern "C"
