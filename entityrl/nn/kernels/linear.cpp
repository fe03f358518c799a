// y = x W^T + b with bfloat16 products and float32 accumulation, for small batches of rows.
//
// Built at run time by entityrl/nn/kernels/build.py and called through ctypes; the Python side
// (when it is used, the cache of packed weights, fallbacks) is entityrl/nn/kernels/linear.py.
// Why: during rollouts the network multiplies ~64-256 rows by d_model-sized weights, where
// oneDNN's bfloat16 products cost 14-18 us a call whatever the size; this takes a few.
//
// Arithmetic is that of torch's functional.linear(x.bfloat16(), W.bfloat16(), b.bfloat16()):
// x, W and b are rounded to bfloat16 (to nearest even), products of pairs of features are
// summed in float32 by VDPBF16PS in the order of the features, the bias is added to the sum
// and the result is rounded to bfloat16 (or kept in float32). Like oneDNN, which uses the same
// instruction, products of bfloat16 denormals count as zero.
//
// The weight is kept packed: its bfloat16 values in blocks of 16 output features, and within
// a block, for each pair of input features (2p, 2p + 1), the 16 features' pairs side by side:
// one 64-byte vector, which VDPBF16PS multiplies by a pair of x's features broadcast to every
// lane. Features past K (odd K) and outputs past N are zeros. In front of the packed values
// the state keeps a float32 copy of the weight it was packed from: every call compares the
// weight with it (a memcmp, a fraction of the product's time) and packs again if they differ,
// so no change to the weight can leave a stale packing (training steps the parameters through
// views of one flat tensor, and fused optimizers, neither of which bumps a tensor's version).
//
// Only built where the CPU has AVX512-BF16 (and the compiler targets it): elsewhere every entry
// point reports "not supported" (-3) and Python uses torch.

#include "gelu.h"
#include "simd.h"

#if defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define LIN_SUPPORTED 1
#else
#define LIN_SUPPORTED 0
#endif

// Bytes of the float32 copy of an (N, K) weight, padded to whole 64-byte lines.
static int64_t copy_bytes(int64_t N, int64_t K) { return round_up(N * K * 4, 64); }
// Input feature pairs, blocks of 16 output features.
static int64_t pairs(int64_t K) { return (K + 1) / 2; }
static int64_t blocks(int64_t N) { return (N + 15) / 16; }

#if LIN_SUPPORTED

// Rows x output blocks held in registers: MR * NR accumulators, NR weight vectors and a
// broadcast take at most 29 of the 32 vector registers.
#define NR_MAX 4
#define MR_OF(NR) ((NR) >= 4 ? 6 : (NR) == 3 ? 8 : 12)

// Rows and columns past this many products (VDPBF16PS instructions) are split between threads:
// below it, waking a second thread costs about as much as it saves.
#define MIN_PER_THREAD 65536

struct Problem {
    const uint16_t* x;  // (M, K) bfloat16
    const __m512i* w;   // packed: blocks(N) blocks of pairs(K) vectors
    const float* bias;  // (N) float32, or NULL
    void* y;            // (M, N) float32 (y_bf16 false) or bfloat16
    bool y_bf16;
    int64_t N, K;
    // (M, N) float32, or NULL. If set, y (float32) = res + the output rounded to bfloat16.
    const float* res = nullptr;
};

// Two bfloat16 values read as one 32-bit word (rows of odd K leave them 2-byte aligned).
typedef uint32_t pair_t __attribute__((aligned(2), may_alias));

// Rows [m, m + MR) x output blocks [nb, nb + NR); the last block may be partial.
template <int MR, int NR>
static void tile(const Problem& pr, int64_t m, int64_t nb) {
    const int64_t K = pr.K, P = pairs(K), full = K / 2;
    __m512 acc[MR][NR];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm512_setzero_ps();
    const __m512i* w = pr.w + nb * P;
    const uint16_t* x = pr.x + m * K;
    for (int64_t p = 0; p < full; p++) {
        __m512bh b[NR];
        for (int j = 0; j < NR; j++) b[j] = (__m512bh)_mm512_loadu_si512(w + j * P + p);
        for (int i = 0; i < MR; i++) {
            const __m512bh a = (__m512bh)_mm512_set1_epi32(*(const pair_t*)(x + i * K + 2 * p));
            for (int j = 0; j < NR; j++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], a, b[j]);
        }
    }
    if (full < P) {  // odd K: the last feature, paired with a 0
        for (int i = 0; i < MR; i++) {
            const __m512bh a = (__m512bh)_mm512_set1_epi32(x[i * K + K - 1]);
            for (int j = 0; j < NR; j++)
                acc[i][j] = _mm512_dpbf16_ps(
                    acc[i][j], a, (__m512bh)_mm512_loadu_si512(w + j * P + full));
        }
    }
    for (int j = 0; j < NR; j++) {
        const int64_t n = (nb + j) * 16, cols = pr.N - n < 16 ? pr.N - n : 16;
        const __mmask16 mask = (__mmask16)((1u << cols) - 1);
        // The bias rounded to bfloat16, as torch's b.bfloat16().
        const __m512 bias =
            pr.bias ? bf16_to_f32(f32_to_bf16(_mm512_maskz_loadu_ps(mask, pr.bias + n)))
                    : _mm512_setzero_ps();
        for (int i = 0; i < MR; i++) {
            __m512 v = _mm512_add_ps(acc[i][j], bias);
            if (pr.res)
                v = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, pr.res + (m + i) * pr.N + n),
                                  bf16_to_f32(f32_to_bf16(v)));
            if (pr.y_bf16)
                _mm256_mask_storeu_epi16((uint16_t*)pr.y + (m + i) * pr.N + n, mask,
                                         (__m256i)f32_to_bf16(v));
            else
                _mm512_mask_storeu_ps((float*)pr.y + (m + i) * pr.N + n, mask, v);
        }
    }
}

// Rows [m, m + rows) with rows < MR, in one tile of exactly that many rows.
template <int MR, int NR>
static void tail_rows(const Problem& pr, int64_t m, int64_t rows, int64_t nb) {
    if constexpr (MR > 1) {
        if (rows == MR - 1) return tile<MR - 1, NR>(pr, m, nb);
        tail_rows<MR - 1, NR>(pr, m, rows, nb);
    }
}

// Rows [m0, m1) x output blocks [nb, nb + NR).
template <int NR>
static void column(const Problem& pr, int64_t m0, int64_t m1, int64_t nb) {
    constexpr int MR = MR_OF(NR);
    int64_t m = m0;
    for (; m + MR <= m1; m += MR) tile<MR, NR>(pr, m, nb);
    if (m < m1) tail_rows<MR, NR>(pr, m, m1 - m, nb);
}

// Bytes of x's rows that pass over all outputs together: they stay in the L1 cache while
// the weight's columns, NR_MAX blocks at a time, are multiplied by them.
#define CHUNK_BYTES 16384

// Rows [m0, m1), all outputs.
static void rows(const Problem& pr, int64_t m0, int64_t m1) {
    // At least one tile of rows; 24 is a multiple of every tile's rows (MR_OF).
    const int64_t NB = blocks(pr.N), chunk = round_up(CHUNK_BYTES / (2 * pr.K) + 1, 24);
    for (int64_t c0 = m0; c0 < m1; c0 += chunk) {
        const int64_t c1 = c0 + chunk < m1 ? c0 + chunk : m1;
        int64_t nb = 0;
        for (; nb + NR_MAX <= NB; nb += NR_MAX) column<NR_MAX>(pr, c0, c1, nb);
        switch (NB - nb) {
            case 3: column<3>(pr, c0, c1, nb); break;
            case 2: column<2>(pr, c0, c1, nb); break;
            case 1: column<1>(pr, c0, c1, nb); break;
            default: break;
        }
    }
}

// Packs the (N, K) matrix whose element (n, k) is w[n * sn + k * sk] into `packed` (see the
// top of the file): each row's pairs are rounded together into `words` (zeros for the rows
// past N), then spread to their block. Every byte is written once, with its final value.
static int64_t pack_values(const float* w, int64_t N, int64_t K, int64_t sn, int64_t sk,
                           uint32_t* packed) {
    const int64_t P = pairs(K), NB = blocks(N);
    uint16_t* words = (uint16_t*)calloc(2 * P + W, sizeof(uint16_t));  // the pad feature: 0
    if (!words) return -5;
    for (int64_t n = 0; n < NB * 16; n++) {
        if (n < N) {
            const float* row = w + n * sn;
            int64_t k = 0;
            if (sk == 1)
                for (; k + W <= K; k += W) store_bf16(words + k, load<W>(row + k));
            for (; k < K; k++) words[k] = bf16_round(row[k * sk]);
        } else if (n == N) {
            memset(words, 0, 4 * P);
        }
        uint32_t* out = packed + (n / 16) * P * 16 + n % 16;
        for (int64_t p = 0; p < P; p++) out[p * 16] = *(const pair_t*)(words + 2 * p);
    }
    free(words);
    return 0;
}

// Writes the packed weight after the float32 copy, the copy last: a caller that finds the copy
// equal to the weight reads a complete packing even while another thread packs the same
// weight again.
static int64_t pack(const float* w, int64_t N, int64_t K, uint8_t* state) {
    const int64_t err = pack_values(w, N, K, K, 1, (uint32_t*)(state + copy_bytes(N, K)));
    if (err) return err;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(state, w, N * K * 4);
    return 0;
}

// The packed values of a state, packed again first if the weight changed since.
static const __m512i* packed_weight(const float* w, int64_t N, int64_t K, void* state,
                                    int64_t* err) {
    *err = memcmp(state, w, N * K * 4) ? pack(w, N, K, (uint8_t*)state) : 0;
    return (const __m512i*)((const uint8_t*)state + copy_bytes(N, K));
}

// ---------------------------------------------------------------------------------------
// The transformer's MLP, y = gelu(x W1^T + b1) W2^T + b2 (W1: (F, D), W2: (D, F)), in chunks of
// CHUNK rows whose hidden activations never leave the cache. The forward rounds exactly where
// torch's bfloat16 path does (each product's output, and the GELU's, to bfloat16), so it
// gives the same values as linear, GELU (gelu.h, as pointwise.cpp) and linear called one by
// one. The backward recomputes the hidden activations of each chunk instead of keeping
// (rows, F) of them from the forward: their memory traffic, not the arithmetic, is what the
// separate calls spend most time on at tens of thousands of rows. It computes
//   dh = dy W2, dz = dh gelu'(z) (both rounded to bfloat16, as torch's path), dx = dz W1,
// and sums the weight and bias gradients in float32 (torch's path rounds its weight gradients
// to bfloat16). The weight gradients are sums over rows: VDPBF16PS takes them two rows at a
// time, from "pair" buffers where the values of rows 2p and 2p + 1 sit side by side.

#define CHUNK 48  // rows; even, and a multiple of every tile's rows (MR_OF)

// Rows of the (rows, L) bfloat16 matrix m as pairs: out[p * L + l] = (m[2p][l], m[2p + 1][l]);
// an odd last row is paired with zeros. L is a multiple of 16.
static void pair_rows(const uint16_t* m, int64_t rows, int64_t L, uint32_t* out) {
    const __m512i order = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                           24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
                                           1, 16, 0);
    for (int64_t r = 0; r < rows; r += 2) {
        const uint16_t* a = m + r * L;
        for (int64_t l = 0; l < L; l += 16) {
            const __m256i lo = _mm256_loadu_si256((const __m256i*)(a + l));
            const __m256i hi = r + 1 < rows ? _mm256_loadu_si256((const __m256i*)(a + L + l))
                                            : _mm256_setzero_si256();
            const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            _mm512_storeu_si512(out + (r / 2) * L + l, _mm512_permutexvar_epi16(order, both));
        }
    }
}

// c (R, C) += sum over p < P of a[p][r] . b[p][c], where a (P, R) and b (P, C) hold pairs
// (pair_rows) and . is the dot product of two pairs: accumulators for RB rows x CB vectors of
// 16 columns stay in registers over all P.
template <int RB, int CB>
static void outer_block(const uint32_t* a, int64_t R, const uint32_t* b, int64_t C, int64_t P,
                        float* c, int64_t r0, int64_t c0) {
    __m512 acc[RB][CB];
    for (int i = 0; i < RB; i++)
        for (int j = 0; j < CB; j++) acc[i][j] = _mm512_loadu_ps(c + (r0 + i) * C + c0 + 16 * j);
    for (int64_t p = 0; p < P; p++) {
        __m512bh v[CB];
        for (int j = 0; j < CB; j++)
            v[j] = (__m512bh)_mm512_loadu_si512(b + p * C + c0 + 16 * j);
        for (int i = 0; i < RB; i++) {
            const __m512bh s = (__m512bh)_mm512_set1_epi32(a[p * R + r0 + i]);
            for (int j = 0; j < CB; j++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], s, v[j]);
        }
    }
    for (int i = 0; i < RB; i++)
        for (int j = 0; j < CB; j++) _mm512_storeu_ps(c + (r0 + i) * C + c0 + 16 * j, acc[i][j]);
}

static void outer(const uint32_t* a, int64_t R, const uint32_t* b, int64_t C, int64_t P,
                  float* c) {
    for (int64_t c0 = 0; c0 < C; c0 += 32) {
        const bool two = c0 + 32 <= C;
        int64_t r = 0;
        for (; r + 8 <= R; r += 8)
            two ? outer_block<8, 2>(a, R, b, C, P, c, r, c0) : outer_block<8, 1>(a, R, b, C, P, c, r, c0);
        for (; r < R; r++)
            two ? outer_block<1, 2>(a, R, b, C, P, c, r, c0) : outer_block<1, 1>(a, R, b, C, P, c, r, c0);
    }
}

// sum[l] += the sum of the rows of the (rows, L) bfloat16 matrix m.
static void add_rows(const uint16_t* m, int64_t rows, int64_t L, float* sum) {
    for (int64_t l = 0; l < L; l += 16) {
        __m512 acc = _mm512_loadu_ps(sum + l);
        for (int64_t r = 0; r < rows; r++) acc = _mm512_add_ps(acc, load_bf16(m + r * L + l));
        _mm512_storeu_ps(sum + l, acc);
    }
}

struct Mlp {
    const __m512i *w1, *w2;  // packed (F, D) and (D, F)
    const float *b1, *b2;
    int64_t D, F;
};

// h (rows, F) = gelu(x W1^T + b1) for one chunk of rows, each step rounded to bfloat16.
static void hidden(const Mlp& m, const uint16_t* x, int64_t n, uint16_t* h) {
    rows(Problem{x, m.w1, m.b1, h, true, m.F, m.D}, 0, n);
    for (int64_t i = 0; i < n * m.F; i += 16) store_bf16(h + i, gelu(load_bf16(h + i)));
}

// Rows [m0, m1) of the forward: y bfloat16, or float32 res + y with res.
static void mlp_rows(const Mlp& m, const uint16_t* x, const float* res, void* y, int64_t m0,
                     int64_t m1, uint16_t* h) {
    for (int64_t c = m0; c < m1; c += CHUNK) {
        const int64_t n = m1 - c < CHUNK ? m1 - c : CHUNK;
        hidden(m, x + c * m.D, n, h);
        void* out = res ? (void*)((float*)y + c * m.D) : (void*)((uint16_t*)y + c * m.D);
        rows(Problem{h, m.w2, m.b2, out, !res, m.D, m.F, res ? res + c * m.D : nullptr}, 0, n);
    }
}

// The backward's inputs and input gradient.
struct MlpGrad {
    const __m512i *w2t, *w1t;  // packed W2^T (F, D) and W1^T (D, F)
    const uint16_t *x, *dy;
    uint16_t* dx;
};

// One thread's share of the backward: rows [m0, m1); the gradients of the weights and biases
// summed into sums (dW1 (F, D), dW2 (D, F), db1 (F), db2 (D), zeroed by the caller).
static int64_t mlp_backward_rows(const Mlp& m, const MlpGrad& g, int64_t m0, int64_t m1,
                                 float* sums) {
    const int64_t D = m.D, F = m.F, half = CHUNK / 2;
    float *dw1 = sums, *dw2 = dw1 + F * D, *db1 = dw2 + D * F, *db2 = db1 + F;
    // z, dz (CHUNK, F); pairs of h, dz (half, F) and of x, dy (half, D).
    uint16_t* buf = (uint16_t*)aligned_alloc(64, round_up((4 * CHUNK * F + 2 * CHUNK * D) * 2, 64));
    if (!buf) return -5;
    uint16_t *z = buf, *dz = z + CHUNK * F;
    uint32_t *hp = (uint32_t*)(dz + CHUNK * F), *dzp = hp + half * F, *xp = dzp + half * F,
             *dyp = xp + half * D;
    for (int64_t c = m0; c < m1; c += CHUNK) {
        const int64_t n = m1 - c < CHUNK ? m1 - c : CHUNK, P = (n + 1) / 2;
        const uint16_t *x = g.x + c * D, *dy = g.dy + c * D;
        rows(Problem{x, m.w1, m.b1, z, true, F, D}, 0, n);
        rows(Problem{dy, g.w2t, nullptr, dz, true, F, D}, 0, n);  // dh, replaced by dz below
        for (int64_t i = 0; i < n * F; i += 16) {
            const __m512 zi = load_bf16(z + i);
            store_bf16(dz + i, load_bf16(dz + i) * gelu_grad(zi));
            store_bf16(z + i, gelu(zi));  // h
        }
        rows(Problem{dz, g.w1t, nullptr, g.dx + c * D, true, D, F}, 0, n);
        add_rows(dz, n, F, db1);
        add_rows(dy, n, D, db2);
        pair_rows(z, n, F, hp);
        pair_rows(dz, n, F, dzp);
        pair_rows(x, n, D, xp);
        pair_rows(dy, n, D, dyp);
        outer(dzp, F, xp, D, P, dw1);  // dW1 += dz^T x
        outer(dyp, D, hp, F, P, dw2);  // dW2 += dy^T h
    }
    free(buf);
    return 0;
}

// One thread's share of a linear layer's backward: rows [m0, m1) of dx = dy W (if dx is not
// NULL; wt: W^T packed) and the sums over those rows of dy^T x and of dy, added into sums
// (dW (N, K), then db (N), zeroed by the caller).
static int64_t linear_backward_rows(const __m512i* wt, const uint16_t* x, const uint16_t* dy,
                                    uint16_t* dx, int64_t N, int64_t K, int64_t m0, int64_t m1,
                                    float* sums) {
    const int64_t half = CHUNK / 2;
    uint32_t* buf = (uint32_t*)aligned_alloc(64, round_up(half * (N + K) * 4, 64));
    if (!buf) return -5;
    uint32_t *dyp = buf, *xp = buf + half * N;
    for (int64_t c = m0; c < m1; c += CHUNK) {
        const int64_t n = m1 - c < CHUNK ? m1 - c : CHUNK;
        const uint16_t *xc = x + c * K, *dyc = dy + c * N;
        if (dx) rows(Problem{dyc, wt, nullptr, dx + c * K, true, K, N}, 0, n);
        add_rows(dyc, n, N, sums + N * K);
        pair_rows(dyc, n, N, dyp);
        pair_rows(xc, n, K, xp);
        outer(dyp, N, xp, K, (n + 1) / 2, sums);
    }
    free(buf);
    return 0;
}

// Threads for work of this many VDPBF16PS instructions.
static int64_t threads_for(int64_t products, int64_t nthreads) {
    const int64_t nt = products / MIN_PER_THREAD;
    return nt > nthreads ? nthreads : nt < 1 ? 1 : nt;
}

#endif  // LIN_SUPPORTED

// ---------------------------------------------------------------------------------------
// Exported functions. All return 0 on success or a negative error code: -1 unknown dtype,
// -2 bad sizes, -3 not supported on this machine, -5 out of memory. Tensors are contiguous.

extern "C" {

// 1 where the kernel runs on this machine, else 0.
int64_t lin_supported() { return LIN_SUPPORTED; }

// Bytes of the state (float32 copy and packed values) of an (N, K) weight; -2 for bad sizes.
int64_t lin_state_bytes(int64_t N, int64_t K) {
    if (N < 1 || K < 1) return -2;
    return copy_bytes(N, K) + blocks(N) * pairs(K) * 64;
}

// Packs the float32 (N, K) weight w into state (lin_state_bytes(N, K) bytes, 64-aligned).
int64_t lin_pack(const float* w, int64_t N, int64_t K, void* state) {
    if (N < 1 || K < 1) return -2;
#if LIN_SUPPORTED
    return pack(w, N, K, (uint8_t*)state);
#else
    (void)w, (void)state;
    return -3;
#endif
}

// y (M, N) = x (M, K) w^T + bias. x: x_dtype (0 float32, 1 bfloat16); w: the float32 weight
// (N, K), state: its state from lin_pack (packed again here if w changed since); bias: (N)
// float32 or NULL; y: y_dtype. Runs on up to nthreads threads.
int64_t lin_forward(const void* x, int64_t x_dtype, const float* w, const float* bias,
                    void* state, void* y, int64_t y_dtype, int64_t M, int64_t N, int64_t K,
                    int64_t nthreads) {
    if (M < 0 || N < 1 || K < 1) return -2;
    if ((x_dtype != 0 && x_dtype != 1) || (y_dtype != 0 && y_dtype != 1)) return -1;
#if LIN_SUPPORTED
    int64_t err;
    const __m512i* packed = packed_weight(w, N, K, state, &err);
    if (err) return err;
    uint16_t* scratch = nullptr;
    if (x_dtype == 0) {  // rounded to bfloat16 once, not once per block of outputs
        scratch = (uint16_t*)aligned_alloc(64, round_up(M * K * 2 + 2 * W, 64));
        if (!scratch) return -5;
        const float* xf = (const float*)x;
        int64_t i = 0;
        for (; i + W <= M * K; i += W) store_bf16(scratch + i, load<W>(xf + i));
        for (; i < M * K; i++) scratch[i] = bf16_round(xf[i]);
    }
    const Problem pr{scratch ? scratch : (const uint16_t*)x,
                     packed,
                     bias,
                     y,
                     y_dtype == 1,
                     N,
                     K};
    int64_t nt = M * blocks(N) * pairs(K) / MIN_PER_THREAD;
    nt = nt > nthreads ? nthreads : nt < 1 ? 1 : nt;
    run_threads(nt, [&](int64_t t) { rows(pr, M * t / nt, M * (t + 1) / nt); });
    free(scratch);
    return 0;
#else
    (void)x, (void)w, (void)bias, (void)state, (void)y, (void)nthreads;
    return -3;
#endif
}

// y (M, D) = gelu(x W1^T + b1) W2^T + b2, all bfloat16 but the float32 weights w1 (F, D) and
// w2 (D, F) and biases b1 (F) and b2 (D); s1, s2: the weights' states from lin_pack (packed
// again here if a weight changed since). D and F are multiples of 16. With res (M, D) float32
// (the residual stream), y is float32: res + that bfloat16 output, as torch's res + y.
int64_t mlp_forward(const void* x, const float* w1, const float* b1, void* s1, const float* w2,
                    const float* b2, void* s2, const float* res, void* y, int64_t M, int64_t D,
                    int64_t F, int64_t nthreads) {
    if (M < 0 || D < 16 || F < 16 || D % 16 || F % 16) return -2;
#if LIN_SUPPORTED
    int64_t err1, err2;
    const Mlp m{packed_weight(w1, F, D, s1, &err1), packed_weight(w2, D, F, s2, &err2), b1, b2,
                D, F};
    if (err1 || err2) return err1 ? err1 : err2;
    const int64_t nt = threads_for(M * 2 * F * D / 32, nthreads);
    int64_t failed = 0;
    run_threads(nt, [&](int64_t t) {
        uint16_t* h = (uint16_t*)aligned_alloc(64, CHUNK * F * 2);
        if (!h) {
            __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
            return;
        }
        mlp_rows(m, (const uint16_t*)x, res, y, M * t / nt, M * (t + 1) / nt, h);
        free(h);
    });
    return failed ? -5 : 0;
#else
    (void)x, (void)w1, (void)b1, (void)s1, (void)w2, (void)b2, (void)s2, (void)res, (void)y,
        (void)nthreads;
    return -3;
#endif
}

// The gradients of lin_forward's output for bfloat16 x (M, K) and dy (M, N): dx (M, K)
// bfloat16 = dy w, rounded as torch's product (skipped if dx is NULL), and the float32
// dw (N, K) = dy^T x and db (N) = the sum of dy's rows (overwritten; torch's path rounds these
// two to bfloat16). N and K are multiples of 16. The sums over rows depend on the thread
// count, not on the scheduling.
int64_t lin_backward(const void* x, const void* dy, const float* w, void* dx, float* dw,
                     float* db, int64_t M, int64_t N, int64_t K, int64_t nthreads) {
    if (M < 0 || N < 16 || K < 16 || N % 16 || K % 16) return -2;
#if LIN_SUPPORTED
    const int64_t nt = threads_for(M * 3 * N * K / 32, nthreads);
    const int64_t per_thread = round_up(N * K + N, 16), wt_bytes = blocks(K) * pairs(N) * 64;
    uint8_t* work = (uint8_t*)aligned_alloc(64, wt_bytes + nt * per_thread * 4);
    if (!work) return -5;
    float* sums = (float*)(work + wt_bytes);
    memset(sums, 0, nt * per_thread * 4);
    int64_t failed = pack_values(w, K, N, 1, K, (uint32_t*)work);  // W^T: (k, n) = w[n][k]
    if (!failed)
        run_threads(nt, [&](int64_t t) {
            if (linear_backward_rows((const __m512i*)work, (const uint16_t*)x,
                                     (const uint16_t*)dy, (uint16_t*)dx, N, K, M * t / nt,
                                     M * (t + 1) / nt, sums + t * per_thread))
                __atomic_store_n(&failed, -5, __ATOMIC_RELAXED);
        });
    if (!failed) {
        for (int64_t t = 1; t < nt; t++)  // in a fixed order
            for (int64_t i = 0; i < per_thread; i++) sums[i] += sums[t * per_thread + i];
        memcpy(dw, sums, N * K * 4);
        memcpy(db, sums + N * K, N * 4);
    }
    free(work);
    return failed;
#else
    (void)x, (void)dy, (void)w, (void)dx, (void)dw, (void)db, (void)nthreads;
    return -3;
#endif
}

// The gradients of mlp_forward's output: dx (M, D) bfloat16 from dy (M, D) bfloat16, and the
// float32 dw1 (F, D), db1 (F), dw2 (D, F), db2 (D) (overwritten). Other arguments as there;
// the sums over rows depend on the thread count, not on the scheduling.
int64_t mlp_backward(const void* x, const void* dy, const float* w1, const float* b1, void* s1,
                     const float* w2, void* dx, float* dw1, float* db1, float* dw2, float* db2,
                     int64_t M, int64_t D, int64_t F, int64_t nthreads) {
    if (M < 0 || D < 16 || F < 16 || D % 16 || F % 16) return -2;
#if LIN_SUPPORTED
    int64_t err;
    const Mlp m{packed_weight(w1, F, D, s1, &err), nullptr, b1, nullptr, D, F};
    if (err) return err;
    const int64_t nt = threads_for(M * 5 * F * D / 32, nthreads);
    const int64_t per_thread = round_up(2 * F * D + F + D, 16);
    const int64_t w2t_bytes = blocks(F) * pairs(D) * 64, w1t_bytes = blocks(D) * pairs(F) * 64;
    uint8_t* work = (uint8_t*)aligned_alloc(64, w2t_bytes + w1t_bytes + nt * per_thread * 4);
    if (!work) return -5;
    float* sums = (float*)(work + w2t_bytes + w1t_bytes);
    memset(sums, 0, nt * per_thread * 4);
    const MlpGrad g{(const __m512i*)work, (const __m512i*)(work + w2t_bytes),
                    (const uint16_t*)x, (const uint16_t*)dy, (uint16_t*)dx};
    err = pack_values(w2, F, D, 1, F, (uint32_t*)work);  // W2^T: element (f, d) = w2[d][f]
    if (!err) err = pack_values(w1, D, F, 1, D, (uint32_t*)(work + w2t_bytes));
    int64_t failed = err;
    if (!err)
        run_threads(nt, [&](int64_t t) {
            if (mlp_backward_rows(m, g, M * t / nt, M * (t + 1) / nt, sums + t * per_thread))
                __atomic_store_n(&failed, -5, __ATOMIC_RELAXED);
        });
    if (!failed) {
        for (int64_t t = 1; t < nt; t++)  // in a fixed order
            for (int64_t i = 0; i < per_thread; i++) sums[i] += sums[t * per_thread + i];
        memcpy(dw1, sums, F * D * 4);
        memcpy(dw2, sums + F * D, D * F * 4);
        memcpy(db1, sums + 2 * F * D, F * 4);
        memcpy(db2, sums + 2 * F * D + F, D * 4);
    }
    free(work);
    return failed;
#else
    (void)x, (void)dy, (void)w1, (void)b1, (void)s1, (void)w2, (void)dx, (void)dw1, (void)db1,
        (void)dw2, (void)db2, (void)nthreads;
    return -3;
#endif
}

}  // extern "C"
