/* The small vector kernels of attention, the gated MLP and the DeltaNet
 * recurrence against double references, on every ISA this CPU runs, plus the grouping-independence
 * that batched decode relies on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/kernels.h"

static const char *const isas[] = {"scalar", "avx2", "avx512"};
#define N_ISAS 3

/* Dispatches to isas[ii]; false when this CPU lacks it. */
static bool use_isa(int ii)
{
    if (!tw_kernels_isa_available(isas[ii]))
        return false;
    assert_int_equal(tw_kernels_force_isa(isas[ii], NULL), TW_OK);
    return true;
}

static void fill(float *x, size_t n, float scale, tw_test_rng *rng)
{
    for (size_t i = 0; i < n; i++)
        x[i] = tw_test_rand_f32(rng) * scale;
}

/* Head sizes with and without an 8-wide or 64-wide remainder; key counts
 * that leave 0..3 keys after the groups of four. */
static void test_dot_rows(void **state)
{
    (void)state;
    tw_test_rng rng = {3};
    static const size_t ds[] = {1, 8, 13, 64, 80, 128, 256};
    static const size_t ns[] = {1, 3, 4, 7, 128};
    static float q[256], K[128 * 256], out[128], one[1];
    for (int ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii))
            continue;
        for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++) {
            size_t d = ds[di];
            fill(q, d, 1.0f, &rng);
            fill(K, 128 * d, 2.0f, &rng);
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                size_t n = ns[ni];
                tw_dot_rows_f32(q, K, n, d, out);
                for (size_t i = 0; i < n; i++) {
                    double ref = 0, sabs = 0;
                    for (size_t j = 0; j < d; j++) {
                        ref += (double)q[j] * K[i * d + j];
                        sabs += fabs((double)q[j] * K[i * d + j]);
                    }
                    if (fabs(out[i] - ref) > 1e-5 * sabs + 1e-30)
                        fail_msg("[%s] d=%zu n=%zu key %zu: %g vs %g", isas[ii], d, n, i,
                                 (double)out[i], ref);
                    /* the same key alone gives the same bits */
                    tw_dot_rows_f32(q, K + i * d, 1, d, one);
                    if (memcmp(one, &out[i], sizeof one) != 0)
                        fail_msg("[%s] d=%zu n=%zu key %zu depends on its group", isas[ii], d,
                                 n, i);
                }
            }
        }
    }
    tw_kernels_force_isa(NULL, NULL);
}

static void test_axpy_rows(void **state)
{
    (void)state;
    tw_test_rng rng = {4};
    static const size_t ds[] = {1, 8, 13, 64, 72, 128, 200};
    static const size_t ns[] = {0, 1, 5, 128};
    static float p[128], V[128 * 200], acc[200], acc0[200];
    for (int ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii))
            continue;
        for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++) {
            size_t d = ds[di];
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                size_t n = ns[ni];
                fill(p, n, 1.0f, &rng);
                fill(V, n * d, 3.0f, &rng);
                fill(acc0, d, 5.0f, &rng);
                memcpy(acc, acc0, d * sizeof(float));
                tw_axpy_rows_f32(p, V, n, d, acc);
                for (size_t j = 0; j < d; j++) {
                    double ref = acc0[j], sabs = fabs((double)acc0[j]);
                    for (size_t i = 0; i < n; i++) {
                        ref += (double)p[i] * V[i * d + j];
                        sabs += fabs((double)p[i] * V[i * d + j]);
                    }
                    if (fabs(acc[j] - ref) > 1e-5 * sabs + 1e-30)
                        fail_msg("[%s] d=%zu n=%zu col %zu: %g vs %g", isas[ii], d, n, j,
                                 (double)acc[j], ref);
                }
            }
        }
    }
    tw_kernels_force_isa(NULL, NULL);
}

/* Several queries at once give each query exactly the bits of its own
 * single call, for query counts around the groups of four, head sizes with
 * 8- and 16-wide remainders and odd key counts; the half-precision kernels
 * give the f32 kernels' bits on the same rows converted to f32. */
static void test_rows_multi(void **state)
{
    (void)state;
    tw_test_rng rng = {6};
    enum { QS = 140, MAXQ = 9, MAXN = 37 };
    static const size_t ds[] = {1, 8, 13, 24, 48, 64, 80, 128};
    static const size_t ns[] = {0, 1, 2, 5, MAXN};
    static const size_t nqs[] = {1, 2, 3, 4, 5, 7, MAXQ};
    static float q[MAXQ * QS], K[MAXN * 128], out[MAXQ * 40], one[40], want[MAXQ * 40];
    static float acc[MAXQ * QS], acc1[QS], acc_h[MAXQ * QS], p[MAXQ * 40];
    static uint16_t Kh[MAXN * 128];
    for (int ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii))
            continue;
        for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++) {
            size_t d = ds[di];
            for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
                size_t n = ns[ni];
                for (size_t qi = 0; qi < sizeof nqs / sizeof nqs[0]; qi++) {
                    size_t nq = nqs[qi];
                    fill(q, MAXQ * QS, 1.0f, &rng);
                    fill(K, n * d, 2.0f, &rng);
                    fill(p, MAXQ * 40, 1.0f, &rng);
                    fill(acc, MAXQ * QS, 3.0f, &rng);
                    /* fetching ahead or not, the same bits */
                    tw_kernels_set_decode_prefetch(qi % 2 == 0);
                    tw_dot_rows_multi_f32(q, QS, nq, K, n, d, out, 40);
                    for (size_t k = 0; k < nq; k++) {
                        tw_dot_rows_f32(q + k * QS, K, n, d, one);
                        if (n && memcmp(one, out + k * 40, n * sizeof(float)) != 0)
                            fail_msg("[%s] d=%zu n=%zu nq=%zu: query %zu's scores differ",
                                     isas[ii], d, n, nq, k);
                        /* keys taken eight at a time against each key alone */
                        for (size_t i = 0; i < n; i++) {
                            float alone;
                            tw_dot_rows_f32(q + k * QS, K + i * d, 1, d, &alone);
                            if (memcmp(&alone, out + k * 40 + i, sizeof alone) != 0)
                                fail_msg("[%s] d=%zu n=%zu nq=%zu: query %zu, key %zu differs "
                                         "from its own call",
                                         isas[ii], d, n, nq, k, i);
                        }
                    }
                    memcpy(acc1, acc, sizeof acc1);
                    float acc_k[QS];
                    memcpy(acc_k, acc + (nq - 1) * QS, sizeof acc_k);
                    tw_axpy_rows_multi_f32(p, 40, nq, K, n, d, acc, QS);
                    /* the first and the last query against their own calls */
                    tw_axpy_rows_f32(p, K, n, d, acc1);
                    tw_axpy_rows_f32(p + (nq - 1) * 40, K, n, d, acc_k);
                    if (memcmp(acc1, acc, d * sizeof(float)) != 0 ||
                        memcmp(acc_k, acc + (nq - 1) * QS, d * sizeof(float)) != 0)
                        fail_msg("[%s] d=%zu n=%zu nq=%zu: weighted sums differ", isas[ii], d,
                                 n, nq);
                    /* the half-precision kernels: the f32 kernels' bits on the
                     * rows converted to f32 */
                    tw_quant_row(TW_TYPE_F16, K, Kh, n * d);
                    tw_dequant_row(TW_TYPE_F16, Kh, K, n * d);
                    tw_dot_rows_multi_h16(q, QS, nq, Kh, n, d, out, 40);
                    tw_dot_rows_multi_f32(q, QS, nq, K, n, d, want, 40);
                    memcpy(acc_h, acc, sizeof acc_h);
                    tw_axpy_rows_multi_h16(p, 40, nq, Kh, n, d, acc_h, QS);
                    tw_axpy_rows_multi_f32(p, 40, nq, K, n, d, acc, QS);
                    for (size_t k = 0; k < nq; k++)
                        if ((n && memcmp(want + k * 40, out + k * 40, n * sizeof(float)) != 0) ||
                            memcmp(acc + k * QS, acc_h + k * QS, d * sizeof(float)) != 0)
                            fail_msg("[%s] d=%zu n=%zu nq=%zu: half-precision query %zu differs",
                                     isas[ii], d, n, nq, k);
                }
            }
        }
    }
    tw_kernels_set_decode_prefetch(false);
    tw_kernels_force_isa(NULL, NULL);
}

/* The value pass gives the same bits on every SIMD ISA: each output
 * column is one fused multiply-add chain over the rows in order, however
 * wide the vectors that carry it. Head sizes around the 16- and 64-wide
 * tiles, query counts around the groups of four, f32 and half rows. */
static void test_axpy_isas_agree(void **state)
{
    (void)state;
    if (!tw_kernels_isa_available("avx2") || !tw_kernels_isa_available("avx512")) {
        print_message("SKIPPED (this CPU lacks AVX2 or AVX-512)\n");
        skip();
        return;
    }
    tw_test_rng rng = {17};
    enum { QS = 200, MAXQ = 9, MAXN = 37 };
    static const size_t ds[] = {1, 8, 13, 16, 24, 48, 64, 80, 100, 128, 200};
    static const size_t ns[] = {0, 1, 5, 16, 17, MAXN};
    static float p[MAXQ * 40], V[MAXN * 200], acc0[MAXQ * QS], want[MAXQ * QS], got[MAXQ * QS];
    static uint16_t Vh[MAXN * 200];
    for (size_t di = 0; di < sizeof ds / sizeof ds[0]; di++)
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
            for (size_t nq = 1; nq <= MAXQ; nq++) {
                size_t d = ds[di], n = ns[ni];
                fill(p, MAXQ * 40, 1.0f, &rng);
                fill(V, n * d, 2.0f, &rng);
                fill(acc0, MAXQ * QS, 3.0f, &rng);
                tw_quant_row(TW_TYPE_F16, V, Vh, n * d);
                for (int half = 0; half < 2; half++) {
                    /* fetching ahead or not, the same bits */
                    tw_kernels_set_decode_prefetch((nq + (size_t)half) % 2 == 0);
                    memcpy(want, acc0, sizeof want);
                    memcpy(got, acc0, sizeof got);
                    assert_int_equal(tw_kernels_force_isa("avx2", NULL), TW_OK);
                    if (half)
                        tw_axpy_rows_multi_h16(p, 40, nq, Vh, n, d, want, QS);
                    else
                        tw_axpy_rows_multi_f32(p, 40, nq, V, n, d, want, QS);
                    assert_int_equal(tw_kernels_force_isa("avx512", NULL), TW_OK);
                    if (half)
                        tw_axpy_rows_multi_h16(p, 40, nq, Vh, n, d, got, QS);
                    else
                        tw_axpy_rows_multi_f32(p, 40, nq, V, n, d, got, QS);
                    /* the columns past d of each row are left as they were */
                    if (memcmp(want, got, sizeof want) != 0)
                        fail_msg("d=%zu n=%zu nq=%zu %s: AVX-512 and AVX2 differ", d, n, nq,
                                 half ? "half" : "f32");
                }
            }
    tw_kernels_set_decode_prefetch(false);
    tw_kernels_force_isa(NULL, NULL);
}

/* The exponential passes give the AVX2 bits with AVX-512: each value one
 * lane of the same operations, each sum the same chunks in the same order.
 * Lengths around the 8- and 16-wide steps; values across the clamp, ties
 * of the rounding to k, signed zeros, infinities and NaNs. */
static void test_exp_passes_isas_agree(void **state)
{
    (void)state;
    if (!tw_kernels_isa_available("avx2") || !tw_kernels_isa_available("avx512")) {
        print_message("SKIPPED (this CPU lacks AVX2 or AVX-512)\n");
        skip();
        return;
    }
    tw_test_rng rng = {23};
    enum { MAXN = 4864 + 13 };
    static float x0[MAXN], u[MAXN], a[MAXN], b[MAXN];
    static const size_t ns[] = {0,  1,  7,  8,  9,  15,  16,  17,   23,  24,
                                25, 31, 32, 33, 40, 100, 517, 4864, MAXN};
    fill(x0, MAXN, 40.0f, &rng);
    fill(u, MAXN, 2.0f, &rng);
    const float special[] = {0.0f,   -0.0f,    88.7f,     88.8f, -87.3f,      -87.4f,       -200.0f,
                             200.0f, INFINITY, -INFINITY, NAN,   0.34657359f, -0.34657359f, 1e-30f};
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++)
        x0[3 + 5 * i] = special[i];
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
        const size_t n = ns[ni];
        for (int fn = 0; fn < 4; fn++) {
            float sum[2] = {0, 0};
            float *out[2] = {a, b};
            for (int k = 0; k < 2; k++) {
                assert_int_equal(tw_kernels_force_isa(k ? "avx512" : "avx2", NULL), TW_OK);
                memcpy(out[k], x0, sizeof x0);
                if (fn == 0) {
                    /* scores within a few units of their maximum,
                     * as a softmax sees them: every term moves the sum */
                    for (size_t i = 0; i < n; i++)
                        out[k][i] = fabsf(x0[i]) <= 40.0f ? x0[i] / 8.0f : -1.0f;
                    sum[k] = tw_exp_shift_f32(out[k], n, 5.0f);
                } else if (fn == 3) {
                    sum[k] = tw_exp_shift_f32(out[k], n, 1.5f);
                } else if (fn == 1)
                    tw_silu_mul_f32(out[k], u, n);
                else
                    tw_silu_f32(out[k], n);
            }
            static const char *const names[] = {"exp_shift", "silu_mul", "silu",
                                                "exp_shift of the specials"};
            if (memcmp(a, b, sizeof a) != 0 || memcmp(&sum[0], &sum[1], sizeof(float)) != 0)
                fail_msg("%s n=%zu: AVX-512 and AVX2 differ", names[fn], n);
        }
    }
    tw_kernels_force_isa(NULL, NULL);
}

/* Scaled scores and their maximum: each product the one multiply, the
 * maximum of the products, NaN never chosen, -INFINITY for no scores. */
static void test_scale_max(void **state)
{
    (void)state;
    tw_test_rng rng = {11};
    static const size_t ns[] = {0, 1, 7, 8, 9, 31, 128, 203};
    static float x[203], want[203];
    for (int ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii))
            continue;
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            size_t n = ns[ni];
            fill(x, n, 40.0f, &rng);
            if (n > 3) {
                x[n / 2] = NAN;
                x[1] = -INFINITY;
            }
            const float scale = 0.125f * 1.0001f;
            float mx = -INFINITY;
            for (size_t i = 0; i < n; i++) {
                want[i] = x[i] * scale;
                if (want[i] > mx)
                    mx = want[i];
            }
            float got = tw_scale_max_f32(x, n, scale);
            if (memcmp(&got, &mx, sizeof got) != 0 || (n && memcmp(x, want, n * sizeof *x) != 0))
                fail_msg("[%s] n=%zu: %g, want %g", isas[ii], n, got, mx);
        }
    }
    tw_kernels_force_isa(NULL, NULL);
}

/* The greedy choice: NaNs scrubbed to -INFINITY in place, the first of
 * tied maxima chosen wherever it sits (a SIMD block or the tail), 0 when
 * nothing beats -INFINITY. */
static void test_argmax(void **state)
{
    (void)state;
    tw_test_rng rng = {17};
    static const size_t ns[] = {0, 1, 7, 8, 9, 31, 128, 203, 8194};
    enum { N = 8194 };
    static float x[N], want[N];
    for (int ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii))
            continue;
        for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++) {
            size_t n = ns[ni];
            /* 0: random with NaNs and a tie; 1: maximum in the tail;
             * 2: +inf twice; 3: all -inf and NaN */
            for (int pattern = 0; pattern < 4; pattern++) {
                fill(x, n, 30.0f, &rng);
                if (n > 4 && pattern == 0) {
                    x[n / 3] = NAN;
                    x[n - 1] = NAN;
                    x[n / 2] = 100.0f;
                    x[n / 2 + 1] = 100.0f;
                    x[n - 2] = 100.0f;
                }
                if (n > 1 && pattern == 1)
                    x[n - 1] = 1000.0f;
                if (n > 4 && pattern == 2) {
                    x[3] = INFINITY;
                    x[n - 2] = INFINITY;
                }
                if (pattern == 3)
                    for (size_t i = 0; i < n; i++)
                        x[i] = i % 3 ? -INFINITY : NAN;
                size_t best = 0;
                float mx = -INFINITY;
                for (size_t i = 0; i < n; i++) {
                    want[i] = isnan(x[i]) ? -INFINITY : x[i];
                    if (want[i] > mx) {
                        mx = want[i];
                        best = i;
                    }
                }
                size_t got = tw_argmax_f32(x, n);
                if (got != best || (n && memcmp(x, want, n * sizeof *x) != 0))
                    fail_msg("[%s] n=%zu pattern %d: index %zu, want %zu", isas[ii], n, pattern,
                             got, best);
            }
        }
    }
    tw_kernels_force_isa(NULL, NULL);
}

/* exp over the whole range a softmax feeds it (down to far below the
 * point where expf underflows), and the returned sum. */
static void test_exp_shift(void **state)
{
    (void)state;
    tw_test_rng rng = {5};
    enum { N = 203 };
    static float x[N], in[N];
    for (int ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii))
            continue;
        for (int round = 0; round < 4; round++) {
            float mx = 10.0f * (float)round;
            for (size_t i = 0; i < N; i++)
                in[i] = mx - 120.0f * (tw_test_rand_f32(&rng) * 0.5f + 0.5f);
            in[7] = mx; /* the maximum itself: exp(0) = 1 */
            in[8] = mx - 200.0f;
            memcpy(x, in, sizeof x);
            float sum = tw_exp_shift_f32(x, N, mx);
            double ref_sum = 0;
            for (size_t i = 0; i < N; i++) {
                double ref = exp((double)in[i] - mx);
                ref_sum += ref;
                if (fabs(x[i] - ref) > 4e-7 * ref + 1e-37)
                    fail_msg("[%s] exp(%g): %g vs %g", isas[ii], (double)(in[i] - mx),
                             (double)x[i], ref);
            }
            assert_true(x[7] == 1.0f);
            assert_true(x[8] == 0.0f);
            assert_true(fabs(sum - ref_sum) <= 1e-6 * ref_sum);
        }
    }
    tw_kernels_force_isa(NULL, NULL);
}

static void test_silu_mul(void **state)
{
    (void)state;
    tw_test_rng rng = {6};
    enum { N = 517 };
    static float g[N], g0[N], u[N];
    fill(g0, N, 30.0f, &rng);
    fill(u, N, 2.0f, &rng);
    g0[0] = 0.0f;
    g0[1] = 100.0f;
    g0[2] = -100.0f;
    for (int ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii))
            continue;
        memcpy(g, g0, sizeof g);
        tw_silu_mul_f32(g, u, N);
        for (size_t i = 0; i < N; i++) {
            double ref = (double)g0[i] / (1.0 + exp(-(double)g0[i])) * u[i];
            if (fabs(g[i] - ref) > 1e-6 * fabs(ref) + 1e-30)
                fail_msg("[%s] silu(%g) * %g: %g vs %g", isas[ii], (double)g0[i], (double)u[i],
                         (double)g[i], ref);
        }
        /* elementwise: a suffix alone gives the same bits */
        memcpy(g, g0, sizeof g);
        tw_silu_mul_f32(g + 3, u + 3, N - 3);
        float whole[N];
        memcpy(whole, g0, sizeof whole);
        tw_silu_mul_f32(whole, u, N);
        assert_memory_equal(g + 3, whole + 3, (N - 3) * sizeof(float));
    }
    tw_kernels_force_isa(NULL, NULL);
}

static void test_silu(void **state)
{
    (void)state;
    tw_test_rng rng = {7};
    enum { N = 203 };
    static float x[N], x0[N];
    fill(x0, N, 30.0f, &rng);
    x0[0] = 0.0f;
    x0[1] = 100.0f;
    x0[2] = -100.0f;
    for (int ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii))
            continue;
        memcpy(x, x0, sizeof x);
        tw_silu_f32(x, N);
        for (size_t i = 0; i < N; i++) {
            double ref = (double)x0[i] / (1.0 + exp(-(double)x0[i]));
            if (fabs(x[i] - ref) > 1e-6 * fabs(ref) + 1e-30)
                fail_msg("[%s] silu(%g): %g vs %g", isas[ii], (double)x0[i], (double)x[i], ref);
        }
    }
    tw_kernels_force_isa(NULL, NULL);
}

/* The delta-rule step against a double-precision reference, for head
 * widths with and without 32- and 8-wide remainders, stepping in place and
 * into a separate state; both must give the same bits, and every ISA the
 * scalar path's bits (the recurrence compounds over a whole sequence). */
static void test_delta_rule(void **state)
{
    (void)state;
    tw_test_rng rng = {8};
    enum { DK = 24, MAXDV = 77 };
    static const size_t dvs[] = {64, 40, 77, 5};
    static float S0[DK * MAXDV], S[DK * MAXDV], T[DK * MAXDV];
    float q[DK], k[DK], v[MAXDV], mem[MAXDV], out[MAXDV], out2[MAXDV];
    double ref_s[DK * MAXDV], ref_m[MAXDV], ref_o[MAXDV];
    static float first_s[4][DK * MAXDV], first_o[4][MAXDV];
    for (int ii = 0; ii < N_ISAS; ii++) {
        if (!use_isa(ii))
            continue;
        tw_test_rng in_rng = rng;
        for (size_t di = 0; di < sizeof dvs / sizeof dvs[0]; di++) {
            const size_t dv = dvs[di];
            fill(S0, DK * dv, 1.0f, &in_rng);
            fill(q, DK, 0.3f, &in_rng);
            fill(k, DK, 0.3f, &in_rng);
            fill(v, dv, 1.0f, &in_rng);
            const float decay = 0.93f, beta = 0.6f;
            for (size_t j = 0; j < dv; j++)
                ref_m[j] = 0.0;
            for (size_t i = 0; i < DK; i++)
                for (size_t j = 0; j < dv; j++) {
                    ref_s[i * dv + j] = (double)S0[i * dv + j] * decay;
                    ref_m[j] += ref_s[i * dv + j] * k[i];
                }
            for (size_t j = 0; j < dv; j++) {
                ref_m[j] = (v[j] - ref_m[j]) * beta;
                ref_o[j] = 0.0;
            }
            for (size_t i = 0; i < DK; i++)
                for (size_t j = 0; j < dv; j++) {
                    ref_s[i * dv + j] += (double)k[i] * ref_m[j];
                    ref_o[j] += ref_s[i * dv + j] * q[i];
                }
            memcpy(S, S0, DK * dv * sizeof(float));
            tw_delta_rule_f32(S, S, q, k, v, decay, beta, DK, dv, mem, out);
            for (size_t j = 0; j < dv; j++)
                if (fabs(out[j] - ref_o[j]) > 1e-4)
                    fail_msg("[%s] dv %zu out[%zu]: %g vs %g", isas[ii], dv, j, (double)out[j],
                             ref_o[j]);
            for (size_t i = 0; i < DK * dv; i++)
                if (fabs(S[i] - ref_s[i]) > 1e-4)
                    fail_msg("[%s] dv %zu state[%zu]: %g vs %g", isas[ii], dv, i, (double)S[i],
                             ref_s[i]);
            tw_delta_rule_f32(T, S0, q, k, v, decay, beta, DK, dv, mem, out2);
            assert_memory_equal(T, S, DK * dv * sizeof(float));
            assert_memory_equal(out2, out, dv * sizeof(float));
            if (ii == 0) {
                memcpy(first_s[di], S, DK * dv * sizeof(float));
                memcpy(first_o[di], out, dv * sizeof(float));
            } else if (memcmp(first_s[di], S, DK * dv * sizeof(float)) != 0 ||
                       memcmp(first_o[di], out, dv * sizeof(float)) != 0) {
                fail_msg("[%s] dv %zu: not the scalar path's bits", isas[ii], dv);
            }
        }
    }
    tw_kernels_force_isa(NULL, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dot_rows),
        cmocka_unit_test(test_axpy_rows),
        cmocka_unit_test(test_rows_multi),
        cmocka_unit_test(test_axpy_isas_agree),
        cmocka_unit_test(test_scale_max),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_exp_shift),
        cmocka_unit_test(test_silu_mul),
        cmocka_unit_test(test_silu),
        cmocka_unit_test(test_delta_rule),
        cmocka_unit_test(test_exp_passes_isas_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
