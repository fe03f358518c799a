// SIMD vocabulary shared by the C++ kernels (attention, pointwise, categorical, linear, gelu.h).
//
// Written with GCC vector extensions (plus a few AVX-512 intrinsics where they pay), so the
// same source compiles on any x86-64 (vectors of W = 16 floats with AVX-512, 8 with AVX, 4
// otherwise) and on aarch64. build.py hashes this header with each kernel's source, so
// editing it rebuilds every kernel.

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
    };
DEFINE_VEC(4)
DEFINE_VEC(8)
DEFINE_VEC(16)

typedef V<W>::T vf;
typedef int32_t vi __attribute__((vector_size(4 * W)));
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

// XOR masks of lane indices, for reductions.
#if W == 16
#define XM(s)                                                                              \
    (vi){0 ^ (s), 1 ^ (s), 2 ^ (s), 3 ^ (s), 4 ^ (s), 5 ^ (s), 6 ^ (s), 7 ^ (s), 8 ^ (s), \
         9 ^ (s), 10 ^ (s), 11 ^ (s), 12 ^ (s), 13 ^ (s), 14 ^ (s), 15 ^ (s)}
#elif W == 8
#define XM(s) (vi){0 ^ (s), 1 ^ (s), 2 ^ (s), 3 ^ (s), 4 ^ (s), 5 ^ (s), 6 ^ (s), 7 ^ (s)}
#else
#define XM(s) (vi){0 ^ (s), 1 ^ (s), 2 ^ (s), 3 ^ (s)}
#endif

INL float hsum(vf a) {
#if W >= 16
    a += __builtin_shuffle(a, XM(8));
#endif
#if W >= 8
    a += __builtin_shuffle(a, XM(4));
#endif
    a += __builtin_shuffle(a, XM(2));
    a += __builtin_shuffle(a, XM(1));
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
