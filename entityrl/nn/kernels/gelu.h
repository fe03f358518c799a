// The exact (erf) GELU and its derivative on vectors of float32, shared by the kernels that
// apply it (pointwise.cpp, linear.cpp's fused MLP).
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

#pragma once

#include "simd.h"

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
    vf p = permute2(t.coef[DEGREE][0], t.coef[DEGREE][1], j);
    for (int d = DEGREE - 1; d >= 0; d--)
        p = p * u + permute2(t.coef[d][0], t.coef[d][1], j);
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
