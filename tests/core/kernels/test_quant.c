/* Type table, f16/bf16 conversion, GGUF block layouts, the reference
 * quantizers, and bit-exact dequantization across ISAs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/kernels.h"
#include "tw/tensor.h"

static const tw_type all_types[] = {TW_TYPE_F32,  TW_TYPE_F16,  TW_TYPE_BF16,
                                    TW_TYPE_Q8_0, TW_TYPE_Q4_0, TW_TYPE_Q5_0,
                                    TW_TYPE_Q5_1, TW_TYPE_Q4_K, TW_TYPE_Q5_K,
                                    TW_TYPE_Q6_K};
#define N_TYPES (sizeof all_types / sizeof all_types[0])
static const char *const isas[] = {"scalar", "avx2", "avx512"};

static void put_f16(uint8_t *p, float v)
{
    uint16_t h = tw_f32_to_f16(v);
    memcpy(p, &h, 2);
}

static void test_type_table(void **state)
{
    (void)state;
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q8_0, 896), 28 * 34);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q4_0, 64), 2 * 18);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q5_0, 64), 2 * 22);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q5_1, 896), 28 * 24);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q4_K, 512), 2 * 144);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q5_K, 256), 176);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q6_K, 256), 210);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_BF16, 3), 6);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_F32, 3), 12);
    assert_int_equal(tw_type_row_bytes(TW_TYPE_Q4_K, 100), 0);        /* not whole blocks */
    assert_int_equal(tw_type_row_bytes(TW_TYPE_F32, UINT64_MAX / 2), 0); /* overflow */
    assert_int_equal(tw_type_row_bytes((tw_type)99, 32), 0);
    assert_true(tw_type_supported(TW_TYPE_Q6_K));
    assert_false(tw_type_supported(3)); /* Q4_1 exists in GGUF but not here */
    assert_string_equal(tw_type_name(TW_TYPE_Q5_K), "Q5_K");
    assert_string_equal(tw_type_name(77), "?");
    tw_type t;
    tw_err err;
    assert_int_equal(tw_type_from_name("q4_k", &t, &err), TW_OK);
    assert_int_equal(t, TW_TYPE_Q4_K);
    assert_int_equal(tw_type_from_name("Q3_K", &t, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "Q3_K"));
}

static void test_half_conversions(void **state)
{
    (void)state;
    assert_int_equal(tw_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(tw_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(tw_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(tw_f32_to_f16(65519.0f), 0x7bff);
    assert_int_equal(tw_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(tw_f32_to_f16(0x1p-24f), 0x0001);
    assert_int_equal(tw_f32_to_f16(0x1p-25f), 0x0000); /* tie to even: zero */
    assert_int_equal(tw_f32_to_f16(0x1.8p-25f), 0x0001);
    assert_int_equal(tw_f32_to_f16(0x1.ff8p-15f), 0x03ff); /* largest subnormal */
    assert_int_equal(tw_f32_to_f16(0x1.ffcp-15f), 0x0400); /* tie: rounds to the normal */
    assert_int_equal(tw_f32_to_f16(1.0f + 0x1p-11f), 0x3c00); /* tie, even stays */
    assert_int_equal(tw_f32_to_f16(1.0f + 0x3p-11f), 0x3c02); /* tie, rounds up to even */
    assert_true((tw_f32_to_f16(NAN) & 0x7c00) == 0x7c00 && (tw_f32_to_f16(NAN) & 0x3ff) != 0);
    assert_true(tw_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(tw_f16_to_f32(0xfbff) == -65504.0f);
    assert_true(isinf(tw_f16_to_f32(0x7c00)));
    /* every finite half survives the round trip */
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00)
            continue;
        assert_int_equal(tw_f32_to_f16(tw_f16_to_f32((uint16_t)h)), h);
    }
    assert_int_equal(tw_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(tw_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);  /* tie, even */
    assert_int_equal(tw_f32_to_bf16(1.0f + 0x3p-8f), 0x3f82);  /* tie, up */
    assert_int_equal(tw_f32_to_bf16(1.0f + 0x1.2p-8f), 0x3f81);
    assert_true(tw_bf16_to_f32(0xc040) == -3.0f);
    assert_true(isnan(tw_bf16_to_f32(tw_f32_to_bf16(NAN))));
}

/* Hand-built blocks decode to the values the GGUF layouts define. */
static void test_known_layouts(void **state)
{
    (void)state;
    float out[256];

    uint8_t q8[34];
    put_f16(q8, 0.5f);
    for (int j = 0; j < 32; j++)
        q8[2 + j] = (uint8_t)(int8_t)(j - 16);
    tw_dequant_row(TW_TYPE_Q8_0, q8, out, 32);
    for (int j = 0; j < 32; j++)
        assert_true(out[j] == 0.5f * (float)(j - 16));

    uint8_t q4[18];
    put_f16(q4, 0.25f);
    for (int j = 0; j < 16; j++)
        q4[2 + j] = (uint8_t)(j | ((15 - j) << 4));
    tw_dequant_row(TW_TYPE_Q4_0, q4, out, 32);
    for (int j = 0; j < 16; j++) {
        assert_true(out[j] == 0.25f * (float)(j - 8));
        assert_true(out[j + 16] == 0.25f * (float)(7 - j));
    }

    /* Q5_0 / Q5_1: bit j of the little-endian 32-bit qh is bit 4 of level j */
    uint8_t q5[24];
    put_f16(q5, 0.5f);
    const uint8_t qh[4] = {0xA5, 0x0F, 0xF0, 0x81};
    for (int variant = 0; variant < 2; variant++) {
        if (variant)
            put_f16(q5 + 2, -3.0f); /* Q5_1's m */
        uint8_t *h = q5 + (variant ? 4 : 2);
        memcpy(h, qh, 4);
        for (int j = 0; j < 16; j++)
            h[4 + j] = (uint8_t)((j * 5 % 16) | ((15 - j) << 4));
        tw_dequant_row(variant ? TW_TYPE_Q5_1 : TW_TYPE_Q5_0, q5, out, 32);
        for (int j = 0; j < 32; j++) {
            int nib = j < 16 ? (j * 5 % 16) : 15 - (j - 16);
            int q = nib | (((qh[j / 8] >> (j % 8)) & 1) << 4);
            float expect = variant ? 0.5f * (float)q - 3.0f : 0.5f * (float)(q - 16);
            assert_true(out[j] == expect);
        }
    }

    /* Q4_K / Q5_K: six-bit scales and mins, some above 15 so the high bits
     * stored in the top of bytes 0..7 matter. */
    const uint8_t sc[8] = {1, 2, 3, 4, 17, 33, 50, 63};
    const uint8_t mn[8] = {0, 5, 10, 15, 20, 40, 48, 63};
    uint8_t scales[12];
    for (int j = 0; j < 4; j++) {
        scales[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        scales[j + 4] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        scales[j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
    }
    uint8_t q4k[144];
    put_f16(q4k, 0.5f);
    put_f16(q4k + 2, 0.25f);
    memcpy(q4k + 4, scales, 12);
    for (int l = 0; l < 128; l++)
        q4k[16 + l] = (uint8_t)((l % 16) | ((15 - l % 13) << 4));
    tw_dequant_row(TW_TYPE_Q4_K, q4k, out, 256);
    for (int i = 0; i < 256; i++) {
        int group = i / 64, hi = (i % 64) >= 32, l = i % 32;
        int byte = q4k[16 + group * 32 + l];
        int q = hi ? byte >> 4 : byte & 0xF;
        int s = group * 2 + hi;
        float expect = 0.5f * sc[s] * q - 0.25f * mn[s];
        assert_true(out[i] == expect);
    }

    uint8_t q5k[176];
    memcpy(q5k, q4k, 16); /* d, dmin, scales */
    for (int l = 0; l < 32; l++)
        q5k[16 + l] = (uint8_t)(l * 37 + 11); /* qh */
    memcpy(q5k + 48, q4k + 16, 128);
    tw_dequant_row(TW_TYPE_Q5_K, q5k, out, 256);
    for (int i = 0; i < 256; i++) {
        int group = i / 64, hi = (i % 64) >= 32, l = i % 32;
        int byte = q5k[48 + group * 32 + l];
        int q = (hi ? byte >> 4 : byte & 0xF) + (((q5k[16 + l] >> (2 * group + hi)) & 1) << 4);
        int s = group * 2 + hi;
        assert_true(out[i] == 0.5f * sc[s] * q - 0.25f * mn[s]);
    }

    /* Q6_K: value i of each 128-half takes its low nibble from ql and two
     * high bits from qh, with 16 signed scales. */
    uint8_t q6k[210];
    for (int l = 0; l < 128; l++)
        q6k[l] = (uint8_t)(l * 29 + 3);
    for (int l = 0; l < 64; l++)
        q6k[128 + l] = (uint8_t)(l * 53 + 7);
    for (int s = 0; s < 16; s++)
        q6k[192 + s] = (uint8_t)(int8_t)(s * 9 - 70);
    put_f16(q6k + 208, 0.125f);
    tw_dequant_row(TW_TYPE_Q6_K, q6k, out, 256);
    for (int i = 0; i < 256; i++) {
        int half = i / 128, k = i % 128, quarter = k / 32, l = k % 32;
        int lbyte = q6k[half * 64 + (quarter & 1) * 32 + l];
        int low = quarter < 2 ? lbyte & 0xF : lbyte >> 4;
        int high = (q6k[128 + half * 32 + l] >> (2 * quarter)) & 3;
        int q = (low | (high << 4)) - 32;
        int8_t scale = (int8_t)q6k[192 + half * 8 + quarter * 2 + l / 16];
        assert_true(out[i] == 0.125f * scale * q);
    }
}

/* Reference quantizers on inputs whose GGUF bytes can be worked out by hand. */
static void test_reference_quantizers_known_bytes(void **state)
{
    (void)state;
    float x[256];
    uint8_t blk[256];

    /* Q8_0: amax 127/64 gives d = 1/64, every x = k/64 is exact. */
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j * 8 - 127) / 64.0f;
    x[31] = 127.0f / 64.0f;
    tw_quant_row(TW_TYPE_Q8_0, x, blk, 32);
    uint16_t d16;
    memcpy(&d16, blk, 2);
    assert_int_equal(d16, tw_f32_to_f16(1.0f / 64.0f));
    for (int j = 0; j < 31; j++)
        assert_int_equal((int8_t)blk[2 + j], j * 8 - 127);
    assert_int_equal((int8_t)blk[33], 127);
    /* ties round away from zero, like roundf */
    memset(x, 0, 32 * sizeof(float));
    x[0] = 127.0f;
    x[1] = 2.5f;
    x[2] = -3.5f;
    tw_quant_row(TW_TYPE_Q8_0, x, blk, 32);
    assert_int_equal((int8_t)blk[3], 3);
    assert_int_equal((int8_t)blk[4], -4);

    /* Q4_0: the largest magnitude (negative here) maps to level 0 (-8). */
    for (int j = 0; j < 32; j++)
        x[j] = (float)((j % 16) - 8);
    tw_quant_row(TW_TYPE_Q4_0, x, blk, 32);
    memcpy(&d16, blk, 2);
    assert_int_equal(d16, tw_f32_to_f16(1.0f));
    for (int j = 0; j < 16; j++)
        assert_int_equal(blk[2 + j], (j % 16) | ((j % 16) << 4));

    /* Q5_0: like Q4_0 with 32 levels; level 16 + k for x = k, k in -16..15 */
    for (int j = 0; j < 32; j++)
        x[j] = (float)(j - 16);
    tw_quant_row(TW_TYPE_Q5_0, x, blk, 32);
    memcpy(&d16, blk, 2);
    assert_int_equal(d16, tw_f32_to_f16(1.0f));
    assert_int_equal(blk[2] | blk[3] << 8 | blk[4] << 16 | (uint32_t)blk[5] << 24, 0xFFFF0000u);
    for (int j = 0; j < 16; j++)
        assert_int_equal(blk[6 + j], j | (j << 4));
    /* Q5_1: min -> offset, (max - min) / 31 -> scale; 0..31 map to themselves */
    for (int j = 0; j < 32; j++)
        x[j] = 10.0f + (float)((j * 7) % 32);
    tw_quant_row(TW_TYPE_Q5_1, x, blk, 32);
    memcpy(&d16, blk, 2);
    assert_int_equal(d16, tw_f32_to_f16(1.0f));
    memcpy(&d16, blk + 2, 2);
    assert_int_equal(d16, tw_f32_to_f16(10.0f));
    float back5[32];
    tw_dequant_row(TW_TYPE_Q5_1, blk, back5, 32);
    for (int j = 0; j < 32; j++)
        assert_true(back5[j] == x[j]);

    /* Q4_K: each sub-block is 0..15 times a step that makes the block
     * scale exactly representable: scales all 63, mins 0, levels exact. */
    const float step = 63.0f / 64.0f;
    for (int i = 0; i < 256; i++)
        x[i] = step * (float)((i * 7) % 16);
    for (int j = 0; j < 8; j++) { /* make sure every sub-block reaches 0 and 15 */
        x[32 * j] = 0.0f;
        x[32 * j + 1] = 15.0f * step;
    }
    tw_quant_row(TW_TYPE_Q4_K, x, blk, 256);
    memcpy(&d16, blk, 2);
    assert_int_equal(d16, tw_f32_to_f16(1.0f / 64.0f));
    memcpy(&d16, blk + 2, 2);
    assert_int_equal(d16, 0);
    for (int j = 0; j < 4; j++) {
        assert_int_equal(blk[4 + j], 63 | (3 << 6));
        assert_int_equal(blk[8 + j], 0);
        assert_int_equal(blk[12 + j], 15);
    }
    float back[256];
    tw_dequant_row(TW_TYPE_Q4_K, blk, back, 256);
    for (int i = 0; i < 256; i++)
        assert_true(back[i] == x[i]);

}

static float frand(tw_test_rng *r)
{
    return tw_test_rand_f32(r);
}

/* Quantize -> dequantize stays within a per-type bound relative to the
 * block's largest magnitude; also checks all-zero and constant blocks. */
static void test_roundtrip_error_bounds(void **state)
{
    (void)state;
    tw_test_rng rng = {0x1234};
    const size_t n = 256 * 5;
    float *x = malloc(n * sizeof *x);
    float *back = malloc(n * sizeof *back);
    uint8_t *q = malloc(tw_type_row_bytes(TW_TYPE_F32, n));
    assert_non_null(x);
    assert_non_null(back);
    assert_non_null(q);
    /* max |error| / max |x| over a block, per type (the step of each level grid) */
    const struct {
        tw_type t;
        float bound;
        float rms_bound;
    } cases[] = {
        {TW_TYPE_F16, 1e-3f, 3e-4f},   {TW_TYPE_BF16, 8e-3f, 2e-3f},
        {TW_TYPE_Q8_0, 0.0045f, 0.0045f}, {TW_TYPE_Q4_0, 0.13f, 0.075f},
        {TW_TYPE_Q5_0, 0.065f, 0.04f},   {TW_TYPE_Q5_1, 0.04f, 0.035f},
        {TW_TYPE_Q4_K, 0.09f, 0.065f},  {TW_TYPE_Q5_K, 0.06f, 0.032f},
        {TW_TYPE_Q6_K, 0.03f, 0.016f},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (size_t i = 0; i < n; i++)
            x[i] = frand(&rng) * (1.0f + (float)(i / 256)); /* blocks of varying scale */
        for (size_t i = 256; i < 288; i++)
            x[i] = 0.0f; /* an all-zero sub-block */
        for (size_t i = 512; i < 768; i++)
            x[i] = 0.75f; /* a constant block */
        tw_quant_row(cases[c].t, x, q, n);
        tw_dequant_row(cases[c].t, q, back, n);
        double se = 0, sx = 0;
        for (size_t b = 0; b < n / 256; b++) {
            float amax = 0, emax = 0;
            for (size_t i = b * 256; i < b * 256 + 256; i++) {
                amax = fmaxf(amax, fabsf(x[i]));
                emax = fmaxf(emax, fabsf(back[i] - x[i]));
                se += (double)(back[i] - x[i]) * (back[i] - x[i]);
                sx += (double)x[i] * x[i];
            }
            if (emax > cases[c].bound * amax)
                fail_msg("%s block %zu: max error %g > %g * %g", tw_type_name(cases[c].t), b,
                         emax, cases[c].bound, amax);
        }
        for (size_t i = 256; i < 288; i++)
            if (cases[c].t != TW_TYPE_Q4_K && cases[c].t != TW_TYPE_Q5_K)
                assert_true(back[i] == 0.0f);
        if (sqrt(se / sx) > cases[c].rms_bound)
            fail_msg("%s: relative rms error %g > %g", tw_type_name(cases[c].t), sqrt(se / sx),
                     cases[c].rms_bound);
    }
    free(x);
    free(back);
    free(q);
}

/* Random bytes with finite f16 scales: a valid block of any type. */
static void random_blocks(tw_test_rng *rng, tw_type t, uint8_t *buf, size_t n)
{
    size_t bytes = tw_type_row_bytes(t, n);
    for (size_t i = 0; i < bytes; i++)
        buf[i] = (uint8_t)tw_test_rand_u64(rng);
    size_t bb = tw_type_block_bytes(t), nb = bytes / bb;
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = buf + b * bb;
        switch (t) {
        case TW_TYPE_F32:
            memcpy(blk, &(float){frand(rng) * 100.0f}, 4);
            break;
        case TW_TYPE_F16:
            put_f16(blk, frand(rng) * 1000.0f);
            break;
        case TW_TYPE_BF16: {
            uint16_t h = tw_f32_to_bf16(frand(rng) * 1e20f);
            memcpy(blk, &h, 2);
            break;
        }
        case TW_TYPE_Q8_0:
        case TW_TYPE_Q8_0_R8: /* not listed here: packed rows are made from plain ones */
        case TW_TYPE_Q4_0_R8:
        case TW_TYPE_Q5_0_R8:
        case TW_TYPE_Q5_1_R8:
        case TW_TYPE_Q4_K_R8:
        case TW_TYPE_Q5_K_R8:
        case TW_TYPE_Q6_K_R8:
        case TW_TYPE_Q4_0:
        case TW_TYPE_Q5_0:
            put_f16(blk, frand(rng) * 0.1f);
            break;
        case TW_TYPE_Q5_1:
            put_f16(blk, frand(rng) * 0.1f);
            put_f16(blk + 2, frand(rng));
            break;
        case TW_TYPE_Q4_K:
        case TW_TYPE_Q5_K:
            put_f16(blk, frand(rng) * 0.01f);
            put_f16(blk + 2, frand(rng) * 0.01f);
            break;
        case TW_TYPE_Q6_K:
            put_f16(blk + 208, frand(rng) * 0.01f);
            break;
        }
    }
}

/* Every ISA's dequantizer gives exactly the scalar reference's bits. */
/* tw_quant_row's F16 on every ISA against tw_f32_to_f16, value by value:
 * every half's own value, the ties between neighbouring halves, the edges
 * of the subnormal, normal and overflow ranges, NaNs of every kind and
 * random bit patterns, in a row whose length leaves a tail past the
 * vector width. */
static void test_f16_rows_bit_exact_across_isas(void **state)
{
    (void)state;
    enum { N = 65536 * 2 + 4096 + 5 };
    float *x = malloc(N * sizeof *x);
    uint16_t *got = malloc(N * sizeof *got);
    assert_non_null(x);
    assert_non_null(got);
    size_t n = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        x[n++] = tw_f16_to_f32((uint16_t)h);
        /* halfway to the next half up in magnitude (finite ones) */
        uint32_t b;
        float f = tw_f16_to_f32((uint16_t)h);
        memcpy(&b, &f, 4);
        b += (h & 0x7c00) == 0 ? 0 : 1u << 12;
        memcpy(&f, &b, 4);
        x[n++] = f;
    }
    const uint32_t edges[] = {0x00000001u, 0x007fffffu, 0x33000000u, 0x33000001u, 0x387fffffu,
                              0x38800000u, 0x477fefffu, 0x477ff000u, 0x7f800000u, 0x7f800001u,
                              0x7fc00000u, 0x7fbfffffu, 0xffc12345u, 0xff800001u, 0x80000000u};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        memcpy(&x[n++], &edges[i], 4);
    tw_test_rng rng = {0xf16};
    while (n < N) {
        uint32_t b = (uint32_t)tw_test_rand_u64(&rng);
        memcpy(&x[n++], &b, 4);
    }
    for (size_t ii = 0; ii < 3; ii++) {
        if (!tw_kernels_isa_available(isas[ii]))
            continue;
        assert_int_equal(tw_kernels_force_isa(isas[ii], NULL), TW_OK);
        memset(got, 0, N * sizeof *got);
        tw_quant_row(TW_TYPE_F16, x, got, N);
        for (size_t i = 0; i < N; i++) {
            uint32_t b;
            memcpy(&b, &x[i], 4);
            if (got[i] != tw_f32_to_f16(x[i]))
                fail_msg("%s: f32 0x%08x gave half 0x%04x, want 0x%04x", isas[ii], b, got[i],
                         tw_f32_to_f16(x[i]));
        }
    }
    tw_kernels_force_isa(NULL, NULL);
    free(x);
    free(got);
}

static void test_dequant_bit_exact_across_isas(void **state)
{
    (void)state;
    tw_test_rng rng = {0xbeef};
    const size_t sizes[] = {256, 768, 256 * 17};
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        tw_type t = all_types[ti];
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            size_t n = sizes[si] + (tw_type_block_elems(t) == 1 ? 3 : 0);
            size_t bytes = tw_type_row_bytes(t, n);
            uint8_t *w = malloc(bytes);
            float *ref = malloc(n * sizeof *ref);
            float *got = malloc(n * sizeof *got);
            assert_non_null(w);
            assert_non_null(ref);
            assert_non_null(got);
            random_blocks(&rng, t, w, n);
            assert_int_equal(tw_kernels_force_isa("scalar", NULL), TW_OK);
            tw_dequant_row(t, w, ref, n);
            for (size_t ii = 1; ii < 3; ii++) {
                if (!tw_kernels_isa_available(isas[ii])) {
                    if (ti == 0 && si == 0)
                        printf("SKIPPED: %s kernels (CPU lacks the ISA)\n", isas[ii]);
                    continue;
                }
                assert_int_equal(tw_kernels_force_isa(isas[ii], NULL), TW_OK);
                memset(got, 0xff, n * sizeof *got);
                tw_dequant_row(t, w, got, n);
                if (memcmp(ref, got, n * sizeof *got) != 0) {
                    for (size_t i = 0; i < n; i++)
                        if (memcmp(&ref[i], &got[i], sizeof(float)) != 0)
                            fail_msg("%s %s n=%zu: element %zu is %a, scalar says %a",
                                     tw_type_name(t), isas[ii], n, i, (double)got[i],
                                     (double)ref[i]);
                }
            }
            tw_kernels_force_isa(NULL, NULL);
            free(w);
            free(ref);
            free(got);
        }
    }
}

static void test_force_isa(void **state)
{
    (void)state;
    tw_err err;
    assert_int_equal(tw_kernels_force_isa("scalar", &err), TW_OK);
    assert_string_equal(tw_kernels_isa(), "scalar");
    assert_int_equal(tw_kernels_force_isa("neon", &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "neon"));
    for (size_t i = 0; i < 3; i++) {
        tw_status st = tw_kernels_force_isa(isas[i], &err);
        assert_int_equal(st, tw_kernels_isa_available(isas[i]) ? TW_OK : TW_FAILED_PRECONDITION);
    }
    assert_int_equal(tw_kernels_force_isa("auto", &err), TW_OK);
    printf("kernels dispatch to: %s\n", tw_kernels_isa());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_table),
        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_known_layouts),
        cmocka_unit_test(test_reference_quantizers_known_bytes),
        cmocka_unit_test(test_roundtrip_error_bounds),
        cmocka_unit_test(test_dequant_bit_exact_across_isas),
        cmocka_unit_test(test_f16_rows_bit_exact_across_isas),
        cmocka_unit_test(test_force_isa),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
