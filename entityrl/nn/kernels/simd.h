// SIMD vocabulary shared by the C++ kernels (attention, pointwise, categorical, linear, gelu.h).
//
// Written with the vector extensions GCC and clang share (plus a few AVX-512 intrinsics where
// they pay), so the same source compiles with either on any x86-64 (vectors of W = 16 floats
// with AVX-512, 8 with AVX, 4 otherwise) and on aarch64 (4, NEON). The two compilers differ in
// their lane permutes: GCC's __builtin_shuffle takes any mask, clang's __builtin_shufflevector
// only constant lane numbers, so constant permutes are written with SHUFFLE and permutes by
// lane numbers computed at run time with permute/permute2, which GCC compiles as before and
// clang through the instruction set's own permutes. build.py hashes this header with each
// kernel's source, so editing it rebuilds every kernel.

#pragma once

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#else
#include <thread>
#include <vector>
#endif

#if defined(__AVX512F__)
#define W 16
#elif defined(__AVX__)
#define W 8
#else
#define W 4
#endif

#define INL static inline __attribute__((always_inline))

template <int N>
struct V;
#define DEFINE_VEC(N)                                                                 \
    template <>                                                                       \
    struct V<N> {                                                                     \
        typedef float T __attribute__((vector_size(4 * N)));                          \
        typedef float U __attribute__((vector_size(4 * N), aligned(4), may_alias));   \
        typedef int32_t I __attribute__((vector_size(4 * N)));                        \
    };
DEFINE_VEC(4)
DEFINE_VEC(8)
DEFINE_VEC(16)

typedef V<W>::T vf;
typedef V<W>::I vi;
typedef uint32_t vu __attribute__((vector_size(4 * W)));
typedef uint16_t vh __attribute__((vector_size(2 * W)));
typedef uint16_t vhu __attribute__((vector_size(2 * W), aligned(2), may_alias));

template <int N>
INL typename V<N>::T load(const float* p) {
    return *(const typename V<N>::U*)p;
}
template <int N>
INL void store(float* p, typename V<N>::T x) {
    *(typename V<N>::U*)p = x;
}
INL vf splat(float x) { return vf{} + x; }

// ---------------------------------------------------------------------------------------
// Lane permutes.

// SHUFFLE(a, b, i0, i1, ...): lane l is lane i_l of a and b side by side (constant lane
// numbers, one per lane of a; 32-bit lanes), which compiles to immediate-operand shuffles.
#if defined(__clang__)
#define SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUFFLE(a, b, ...) __builtin_shuffle(a, b, (typename V<sizeof(a) / 4>::I){__VA_ARGS__})
#endif

// XOR masks of lane indices, for reductions: XM(s) lists lane l ^ s for the W lanes.
#if W == 16
#define XM(s)                                                                              \
    0 ^ (s), 1 ^ (s), 2 ^ (s), 3 ^ (s), 4 ^ (s), 5 ^ (s), 6 ^ (s), 7 ^ (s), 8 ^ (s), 9 ^ (s), \
        10 ^ (s), 11 ^ (s), 12 ^ (s), 13 ^ (s), 14 ^ (s), 15 ^ (s)
#elif W == 8
#define XM(s) 0 ^ (s), 1 ^ (s), 2 ^ (s), 3 ^ (s), 4 ^ (s), 5 ^ (s), 6 ^ (s), 7 ^ (s)
#else
#define XM(s) 0 ^ (s), 1 ^ (s), 2 ^ (s), 3 ^ (s)
#endif

#if defined(__clang__) && defined(__ARM_NEON)
#include <arm_neon.h>
// The byte indices of the 32-bit lanes idx (their low `bits` bits), for the table lookups.
INL uint8x16_t lane_bytes(vi idx, int32_t bits) {
    return (uint8x16_t)((idx & bits) * 0x04040404 + 0x03020100);
}
#endif

// Lane l of the result is lane idx[l] mod W of a (T: vf or vi).
template <class T>
INL T permute(T a, vi idx) {
#if !defined(__clang__)
    return __builtin_shuffle(a, idx);
#elif W == 16
    return (T)_mm512_permutexvar_ps((__m512i)idx, (__m512)a);
#elif W == 8 && defined(__AVX2__)
    return (T)_mm256_permutevar8x32_ps((__m256)a, (__m256i)idx);
#elif defined(__ARM_NEON)
    return (T)vqtbl1q_u8((uint8x16_t)a, lane_bytes(idx, W - 1));
#else
    T r;
    for (int l = 0; l < W; l++) r[l] = a[idx[l] & (W - 1)];
    return r;
#endif
}

// Lane l of the result is lane idx[l] mod 2W of a and b side by side.
INL vf permute2(vf a, vf b, vi idx) {
#if !defined(__clang__)
    return __builtin_shuffle(a, b, idx);
#elif W == 16
    return _mm512_permutex2var_ps(a, (__m512i)idx, b);
#elif W == 8 && defined(__AVX2__)
    return (idx & W) != 0 ? permute(b, idx) : permute(a, idx);
#elif defined(__ARM_NEON)
    return (vf)vqtbl2q_u8((uint8x16x2_t){{(uint8x16_t)a, (uint8x16_t)b}}, lane_bytes(idx, 2 * W - 1));
#else
    vf r;
    for (int l = 0; l < W; l++) {
        const int32_t k = idx[l] & (2 * W - 1);
        r[l] = k < W ? a[k] : b[k - W];
    }
    return r;
#endif
}

INL float hsum(vf a) {
#if W >= 16
    a += SHUFFLE(a, a, XM(8));
#endif
#if W >= 8
    a += SHUFFLE(a, a, XM(4));
#endif
    a += SHUFFLE(a, a, XM(2));
    a += SHUFFLE(a, a, XM(1));
    return a[0];
}

static inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// ---------------------------------------------------------------------------------------
// bfloat16 <-> float32. Narrowing rounds to nearest even and keeps NaN a NaN. With
// AVX512-BF16 the conversion instruction does it, except that it flushes float32 denormals
// (below 1.2e-38 in magnitude) to zero.

INL vf bf16_to_f32(vh x) {
#if W == 16
    return (vf)_mm512_slli_epi32(_mm512_cvtepu16_epi32((__m256i)x), 16);
#else
    return (vf)(__builtin_convertvector(x, vu) << 16);
#endif
}
INL vf load_bf16(const uint16_t* p) { return bf16_to_f32(*(const vhu*)p); }

INL vh f32_to_bf16(vf x) {
#if W == 16 && defined(__AVX512BF16__)
    return (vh)_mm512_cvtneps_pbh(x);
#else
    const vu u = (vu)x;
    vu r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    r = x == x ? r : (vu){} + 0x7fc0u;
    return __builtin_convertvector(r, vh);
#endif
}
INL void store_bf16(uint16_t* p, vf x) { *(vhu*)p = f32_to_bf16(x); }

static inline uint16_t bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    if (x != x) return 0x7fc0;
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float bf16_value(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}

// ---------------------------------------------------------------------------------------
// Runs work(t) for t in [0, nt) on nt threads: OpenMP's pool (shared with torch's) when
// available, else threads started for the call.

template <class F>
static void run_threads(int64_t nt, F work) {
    if (nt <= 1) {
        work(0);
        return;
    }
#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
    {
        const int id = omp_get_thread_num(), team = omp_get_num_threads();
        for (int64_t t = id; t < nt; t += team) work(t);
    }
#else
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < nt; t++) pool.emplace_back(work, t);
    work(0);
    for (auto& th : pool) th.join();
#endif
}
