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
            const __m512 v = _mm512_add_ps(acc[i][j], bias);
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

// Writes the packed bfloat16 weight (see the top of the file) after the float32 copy. Each
// row's pairs are rounded together into `words` (zeros for the rows past N), then spread to
// their block. Every byte is written once, with its final value, and the copy last: a caller
// that finds the copy equal to the weight reads a complete packing even while another thread
// packs the same weight again.
static int64_t pack(const float* w, int64_t N, int64_t K, uint8_t* state) {
    const int64_t P = pairs(K), NB = blocks(N);
    uint32_t* packed = (uint32_t*)(state + copy_bytes(N, K));
    uint16_t* words = (uint16_t*)calloc(2 * P + W, sizeof(uint16_t));  // the pad feature: 0
    if (!words) return -5;
    for (int64_t n = 0; n < NB * 16; n++) {
        if (n < N) {
            const float* row = w + n * K;
            int64_t k = 0;
            for (; k + W <= K; k += W) store_bf16(words + k, load<W>(row + k));
            for (; k < K; k++) words[k] = bf16_round(row[k]);
        } else if (n == N) {
            memset(words, 0, 4 * P);
        }
        uint32_t* out = packed + (n / 16) * P * 16 + n % 16;
        for (int64_t p = 0; p < P; p++) out[p * 16] = *(const pair_t*)(words + 2 * p);
    }
    free(words);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(state, w, N * K * 4);
    return 0;
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
    if (memcmp(state, w, N * K * 4)) {
        const int64_t err = pack(w, N, K, (uint8_t*)state);
        if (err) return err;
    }
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
                     (const __m512i*)((const uint8_t*)state + copy_bytes(N, K)),
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

}  // extern "C"
