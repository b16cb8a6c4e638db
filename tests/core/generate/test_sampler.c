#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/sampler.h"

static tw_sampler *make(uint32_t vocab, const tw_sampling_params *p, uint64_t seed)
{
    tw_sampler *s = NULL;
    tw_err err;
    assert_int_equal(tw_sampler_create(vocab, &s, &err), TW_OK);
    assert_int_equal(tw_sampler_configure(s, p, seed, &err), TW_OK);
    return s;
}

/* Logits whose softmax is exactly probs (up to rounding). */
static void logits_from_probs(float *logits, const double *probs, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        logits[i] = probs[i] > 0 ? (float)log(probs[i]) : -INFINITY;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void sorted_kept(tw_sampler *s, uint32_t *ids, size_t cap, size_t *n)
{
    *n = tw_sampler_last_kept(s, ids, cap);
    assert_true(*n <= cap);
    qsort(ids, *n, sizeof *ids, cmp_u32);
}

static void test_greedy_picks_argmax_lowest_id_on_ties(void **state)
{
    (void)state;
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    p.temperature = 0.0f;
    tw_sampler *s = make(6, &p, 1);
    float l[6] = {0.1f, 3.0f, -1.0f, 3.0f, 2.9f, 0.0f};
    tw_sample_result r;
    tw_sampler_sample(s, l, false, 0, &r);
    assert_int_equal(r.token, 1);
    tw_sampler_destroy(s);
}

/* Reference: ids of the k largest values (distinct values assumed). */
static void ref_top_k(const float *l, uint32_t n, uint32_t k, uint32_t *out)
{
    uint32_t *idx = malloc(n * sizeof *idx);
    for (uint32_t i = 0; i < n; i++)
        idx[i] = i;
    for (uint32_t i = 0; i < k; i++) { /* selection sort of the head */
        uint32_t best = i;
        for (uint32_t j = i + 1; j < n; j++)
            if (l[idx[j]] > l[idx[best]])
                best = j;
        uint32_t t = idx[i];
        idx[i] = idx[best];
        idx[best] = t;
    }
    memcpy(out, idx, k * sizeof *out);
    qsort(out, k, sizeof *out, cmp_u32);
    free(idx);
}

static void test_top_k_keeps_exactly_the_k_best(void **state)
{
    (void)state;
    enum { V = 50000, K = 40 };
    tw_test_rng rng = {12345};
    float *l = malloc(V * sizeof *l), *copy = malloc(V * sizeof *copy);
    for (uint32_t i = 0; i < V; i++)
        l[i] = 8.0f * tw_test_rand_f32(&rng);
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    p.top_k = K;
    tw_sampler *s = make(V, &p, 7);
    for (int round = 0; round < 3; round++) {
        memcpy(copy, l, V * sizeof *l);
        tw_sample_result r;
        tw_sampler_sample(s, copy, false, 0, &r);
        uint32_t kept[V > 100 ? 100 : V], want[K];
        size_t n;
        sorted_kept(s, kept, 100, &n);
        assert_int_equal(n, K);
        ref_top_k(l, V, K, want);
        assert_memory_equal(kept, want, sizeof want);
        assert_true(bsearch(&r.token, want, K, sizeof *want, cmp_u32) != NULL);
    }
    tw_sampler_destroy(s);
    free(l);
    free(copy);
}

static void test_top_p_keeps_smallest_nucleus(void **state)
{
    (void)state;
    const double probs[6] = {0.05, 0.5, 0.1, 0.2, 0.15, 0.0};
    float l[6];
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    p.top_p = 0.8f;
    tw_sampler *s = make(6, &p, 3);
    logits_from_probs(l, probs, 6);
    tw_sample_result r;
    tw_sampler_sample(s, l, false, 0, &r);
    uint32_t kept[6];
    size_t n;
    sorted_kept(s, kept, 6, &n);
    /* 0.5 + 0.2 = 0.7 < 0.8; adding 0.15 reaches it. */
    assert_int_equal(n, 3);
    assert_int_equal(kept[0], 1);
    assert_int_equal(kept[1], 3);
    assert_int_equal(kept[2], 4);
    tw_sampler_destroy(s);
}

/* Large vocabulary: the nucleus is found without sorting everything, and it
 * must equal the reference computed by a full sort. */
static void test_top_p_large_vocab_matches_full_sort(void **state)
{
    (void)state;
    enum { V = 30000 };
    tw_test_rng rng = {99};
    float *l = malloc(V * sizeof *l), *copy = malloc(V * sizeof *copy);
    for (uint32_t i = 0; i < V; i++)
        l[i] = 3.0f * tw_test_rand_f32(&rng);
    l[17] = 14.0f; /* a few dominant tokens, as real models have */
    l[4242] = 13.5f;
    l[29999] = 12.0f;
    const float top_ps[] = {0.5f, 0.9f, 0.99f};
    for (size_t t = 0; t < 3; t++) {
        tw_sampling_params p;
        tw_sampling_params_init(&p);
        p.top_p = top_ps[t];
        tw_sampler *s = make(V, &p, 5);
        memcpy(copy, l, V * sizeof *l);
        tw_sample_result r;
        tw_sampler_sample(s, copy, false, 0, &r);
        /* reference */
        uint32_t *idx = malloc(V * sizeof *idx);
        double sum = 0;
        for (uint32_t i = 0; i < V; i++)
            sum += exp((double)l[i]);
        uint32_t *order = idx;
        for (uint32_t i = 0; i < V; i++)
            order[i] = i;
        /* partial selection sort until the mass is reached */
        double cum = 0;
        uint32_t k = 0;
        while (cum < top_ps[t]) {
            uint32_t best = k;
            for (uint32_t j = k + 1; j < V; j++)
                if (l[order[j]] > l[order[best]])
                    best = j;
            uint32_t tmp = order[k];
            order[k] = order[best];
            order[best] = tmp;
            cum += exp((double)l[order[k]]) / sum;
            k++;
        }
        qsort(order, k, sizeof *order, cmp_u32);
        uint32_t *kept = malloc(V * sizeof *kept);
        size_t n;
        sorted_kept(s, kept, V, &n);
        assert_int_equal(n, k);
        assert_memory_equal(kept, order, k * sizeof *order);
        free(kept);
        free(idx);
        tw_sampler_destroy(s);
    }
    free(l);
    free(copy);
}

static void test_min_p_relative_to_best(void **state)
{
    (void)state;
    const double probs[5] = {0.1, 0.5, 0.15, 0.2, 0.05};
    float l[5];
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    p.min_p = 0.25f; /* keep p >= 0.125 */
    tw_sampler *s = make(5, &p, 3);
    logits_from_probs(l, probs, 5);
    tw_sample_result r;
    tw_sampler_sample(s, l, false, 0, &r);
    uint32_t kept[5];
    size_t n;
    sorted_kept(s, kept, 5, &n);
    assert_int_equal(n, 3);
    assert_int_equal(kept[0], 1);
    assert_int_equal(kept[1], 2);
    assert_int_equal(kept[2], 3);
    tw_sampler_destroy(s);
}

static void test_penalties_math(void **state)
{
    (void)state;
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    p.temperature = 0.0f; /* greedy: the row is left unscaled for inspection */
    p.repetition_penalty = 2.0f;
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    tw_sampler *s = make(8, &p, 1);
    const uint32_t prompt[] = {0, 1};
    const uint32_t gen[] = {2, 2, 3};
    tw_sampler_accept(s, prompt, 2, false);
    tw_sampler_accept(s, gen, 3, true);
    float l[8] = {4.0f, -2.0f, 4.0f, -1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
    tw_sample_result r;
    tw_sampler_sample(s, l, false, 0, &r);
    assert_float_equal(l[0], 2.0f, 1e-6);  /* seen in prompt: 4 / 2 */
    assert_float_equal(l[1], -4.0f, 1e-6); /* seen in prompt: -2 * 2 */
    /* generated twice: 4 / 2 - 0.5 - 2 * 0.25 */
    assert_float_equal(l[2], 1.0f, 1e-6);
    /* generated once: -1 * 2 - 0.5 - 0.25 */
    assert_float_equal(l[3], -2.75f, 1e-6);
    assert_float_equal(l[4], 1.0f, 1e-6); /* untouched */
    tw_sampler_destroy(s);
}

static void test_penalty_window_forgets_old_tokens(void **state)
{
    (void)state;
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    p.temperature = 0.0f;
    p.presence_penalty = 1.0f;
    p.penalty_window = 2;
    tw_sampler *s = make(4, &p, 1);
    const uint32_t gen[] = {0, 1, 2};
    tw_sampler_accept(s, gen, 3, true);
    float l[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    tw_sample_result r;
    tw_sampler_sample(s, l, false, 0, &r);
    assert_float_equal(l[0], 1.0f, 1e-6); /* fell out of the window */
    assert_float_equal(l[1], 0.0f, 1e-6);
    assert_float_equal(l[2], 0.0f, 1e-6);
    assert_int_equal(r.token, 0);
    /* Reconfiguring forgets the history entirely. */
    assert_int_equal(tw_sampler_configure(s, &p, 1, NULL), TW_OK);
    float l2[4] = {1.0f, 2.0f, 1.0f, 1.0f};
    tw_sampler_sample(s, l2, false, 0, &r);
    assert_float_equal(l2[1], 2.0f, 1e-6);
    tw_sampler_destroy(s);
}

static void test_logit_bias_and_ban(void **state)
{
    (void)state;
    const tw_logit_bias bias[] = {{0, -100.0f}, {2, 5.0f}};
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    p.temperature = 0.0f;
    p.logit_bias = bias;
    p.n_logit_bias = 2;
    tw_sampler *s = make(3, &p, 1);
    float l[3] = {10.0f, 1.0f, 0.0f};
    tw_sample_result r;
    tw_sampler_sample(s, l, true, 3, &r);
    assert_int_equal(r.token, 2);
    assert_true(isinf(l[0]) && l[0] < 0);
    assert_int_equal(r.n_top, 3);
    assert_int_equal(r.top[0].token_id, 2);
    assert_true(isinf(r.top[2].logprob));
    tw_sampler_destroy(s);
}

static void test_everything_banned_falls_back_to_raw_best(void **state)
{
    (void)state;
    const tw_logit_bias bias[] = {{0, -100.0f}, {1, -100.0f}, {2, -200.0f}};
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    p.logit_bias = bias;
    p.n_logit_bias = 3;
    tw_sampler *s = make(3, &p, 1);
    float l[3] = {1.0f, 7.0f, NAN};
    tw_sample_result r;
    tw_sampler_sample(s, l, true, 0, &r);
    assert_int_equal(r.token, 1);
    tw_sampler_destroy(s);
}

static void run_stream(uint64_t seed, uint32_t *out, int n)
{
    enum { V = 300 };
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    p.temperature = 0.9f;
    p.top_k = 50;
    p.top_p = 0.95f;
    tw_sampler *s = make(V, &p, seed);
    tw_test_rng rng = {777}; /* same logits for every run */
    float l[V];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < V; j++)
            l[j] = 2.0f * tw_test_rand_f32(&rng);
        tw_sample_result r;
        tw_sampler_sample(s, l, false, 0, &r);
        out[i] = r.token;
        tw_sampler_accept(s, &r.token, 1, true);
    }
    tw_sampler_destroy(s);
}

static void test_seed_determinism(void **state)
{
    (void)state;
    uint32_t a[64], b[64], c[64];
    run_stream(42, a, 64);
    run_stream(42, b, 64);
    run_stream(43, c, 64);
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
}

static void test_logprobs_are_normalised(void **state)
{
    (void)state;
    enum { V = 20 };
    tw_test_rng rng = {5};
    float l[V], raw[V];
    for (int i = 0; i < V; i++)
        raw[i] = 4.0f * tw_test_rand_f32(&rng);
    const float temps[] = {0.0f, 0.7f, 1.0f};
    for (int t = 0; t < 3; t++) {
        tw_sampling_params p;
        tw_sampling_params_init(&p);
        p.temperature = temps[t];
        p.top_k = 3; /* truncation must not change the reported values */
        tw_sampler *s = make(V, &p, 11);
        memcpy(l, raw, sizeof l);
        tw_sample_result r;
        tw_sampler_sample(s, l, true, TW_MAX_TOP_LOGPROBS, &r);
        assert_int_equal(r.n_top, V);
        double sum = 0;
        bool chosen_listed = false;
        for (uint32_t i = 0; i < r.n_top; i++) {
            sum += exp((double)r.top[i].logprob);
            if (i)
                assert_true(r.top[i].logprob <= r.top[i - 1].logprob);
            if (r.top[i].token_id == r.token) {
                chosen_listed = true;
                assert_float_equal(r.top[i].logprob, r.logprob, 1e-6);
            }
        }
        assert_true(chosen_listed);
        assert_float_equal(sum, 1.0, 1e-5);
        /* The log-softmax of the temperature-scaled row. */
        double scale = temps[t] == 0.0f ? 1.0 : 1.0 / temps[t];
        double z = 0;
        for (int i = 0; i < V; i++)
            z += exp(raw[i] * scale);
        assert_float_equal(r.logprob, raw[r.token] * scale - log(z), 1e-4);
        tw_sampler_destroy(s);
    }
    float lp;
    tw_top_logprob top[2];
    float row[3] = {0.0f, 0.0f, 0.0f};
    tw_logprobs_of_row(row, 3, 1, 2, &lp, top);
    assert_float_equal(lp, -log(3.0), 1e-6);
    assert_int_equal(top[0].token_id, 0);
}

/* Scoring a token the sampler did not choose reports what sampling would
 * have reported for it: the same processing (bias, penalties, temperature),
 * bit for bit, with no random number drawn and no history kept. */
static void test_score_matches_sampling(void **state)
{
    (void)state;
    enum { V = 24 };
    tw_test_rng rng = {17};
    float raw[V], a[V], b[V];
    for (int i = 0; i < V; i++)
        raw[i] = 3.0f * tw_test_rand_f32(&rng);
    tw_logit_bias bias[2] = {{.token_id = 5, .bias = 2.5f}, {.token_id = 9, .bias = -100.0f}};
    const float temps[] = {0.0f, 0.6f, 1.0f, 1.7f};
    for (int t = 0; t < 4; t++) {
        tw_sampling_params p;
        tw_sampling_params_init(&p);
        p.temperature = temps[t];
        p.top_p = 0.5f;
        p.repetition_penalty = 1.3f;
        p.frequency_penalty = 0.4f;
        p.logit_bias = bias;
        p.n_logit_bias = 2;
        tw_sampler *s = make(V, &p, 99), *twin = make(V, &p, 99);
        const uint32_t seen[3] = {2, 5, 2};
        tw_sampler_accept(s, seen, 3, true);
        tw_sampler_accept(twin, seen, 3, true);
        memcpy(a, raw, sizeof a);
        tw_sample_result got, want;
        tw_sampler_sample(s, a, true, 6, &want);
        /* the banned token has no probability at all, nor one out of the
         * vocabulary */
        memcpy(b, raw, sizeof b);
        tw_sampler_score(twin, b, 9, 0, &got);
        assert_true(isinf(got.logprob) && got.logprob < 0);
        assert_int_equal(got.n_top, 0);
        memcpy(b, raw, sizeof b);
        tw_sampler_score(twin, b, V, 0, &got);
        assert_true(isinf(got.logprob) && got.logprob < 0);
        memcpy(b, raw, sizeof b);
        tw_sampler_score(twin, b, want.token, 6, &got);
        assert_int_equal(got.token, want.token);
        assert_memory_equal(&got.logprob, &want.logprob, sizeof got.logprob);
        assert_int_equal(got.n_top, 6);
        assert_memory_equal(got.top, want.top, 6 * sizeof got.top[0]);
        /* scoring drew nothing and kept nothing: the twin's first draw is
         * the one the sampler made */
        memcpy(b, raw, sizeof b);
        tw_sampler_sample(twin, b, true, 0, &got);
        assert_int_equal(got.token, want.token);
        assert_memory_equal(&got.logprob, &want.logprob, sizeof got.logprob);
        tw_sampler_destroy(s);
        tw_sampler_destroy(twin);
    }
}

/* Draws 10^5 times from a fixed distribution: each frequency must lie within
 * five standard deviations of its probability. */
static void check_frequencies(const double *probs, uint32_t v, const tw_sampling_params *p,
                              const double *expect)
{
    enum { N = 100000 };
    tw_sampler *s = make(v, p, 2024);
    uint32_t counts[16] = {0};
    float *l = malloc(v * sizeof *l);
    for (int i = 0; i < N; i++) {
        logits_from_probs(l, probs, v);
        tw_sample_result r;
        tw_sampler_sample(s, l, false, 0, &r);
        assert_true(r.token < v);
        counts[r.token]++;
    }
    for (uint32_t i = 0; i < v; i++) {
        double f = (double)counts[i] / N;
        double sd = sqrt(expect[i] * (1 - expect[i]) / N);
        if (fabs(f - expect[i]) > 5 * sd + 1e-9)
            fail_msg("token %u: frequency %.5f, expected %.5f", i, f, expect[i]);
    }
    free(l);
    tw_sampler_destroy(s);
}

static void test_sampled_frequencies_match_probabilities(void **state)
{
    (void)state;
    const double probs[8] = {0.30, 0.05, 0.20, 0.15, 0.10, 0.12, 0.03, 0.05};
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    check_frequencies(probs, 8, &p, probs);

    /* Temperature 0.5 squares the probabilities (renormalised). */
    double sq[8], z = 0;
    for (int i = 0; i < 8; i++)
        z += probs[i] * probs[i];
    for (int i = 0; i < 8; i++)
        sq[i] = probs[i] * probs[i] / z;
    p.temperature = 0.5f;
    check_frequencies(probs, 8, &p, sq);

    /* top-k 2 keeps tokens 0 and 2, renormalised. */
    double k2[8] = {0.30 / 0.5, 0, 0.20 / 0.5, 0, 0, 0, 0, 0};
    tw_sampling_params_init(&p);
    p.top_k = 2;
    check_frequencies(probs, 8, &p, k2);
}

static void test_bad_params_rejected(void **state)
{
    (void)state;
    tw_sampler *s = NULL;
    tw_err err;
    assert_int_equal(tw_sampler_create(0, &s, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_sampler_create(10, &s, &err), TW_OK);
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    p.temperature = -1.0f;
    assert_int_equal(tw_sampler_configure(s, &p, 0, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "temperature"));
    tw_sampling_params_init(&p);
    p.top_p = 0.0f;
    assert_int_equal(tw_sampler_configure(s, &p, 0, &err), TW_INVALID_ARGUMENT);
    tw_sampling_params_init(&p);
    p.min_p = NAN;
    assert_int_equal(tw_sampler_configure(s, &p, 0, &err), TW_INVALID_ARGUMENT);
    tw_sampling_params_init(&p);
    p.repetition_penalty = 0.0f;
    assert_int_equal(tw_sampler_configure(s, &p, 0, &err), TW_INVALID_ARGUMENT);
    const tw_logit_bias bad[] = {{10, 1.0f}};
    tw_sampling_params_init(&p);
    p.logit_bias = bad;
    p.n_logit_bias = 1;
    assert_int_equal(tw_sampler_configure(s, &p, 0, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "logit_bias"));
    tw_sampler_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_picks_argmax_lowest_id_on_ties),
        cmocka_unit_test(test_top_k_keeps_exactly_the_k_best),
        cmocka_unit_test(test_top_p_keeps_smallest_nucleus),
        cmocka_unit_test(test_top_p_large_vocab_matches_full_sort),
        cmocka_unit_test(test_min_p_relative_to_best),
        cmocka_unit_test(test_penalties_math),
        cmocka_unit_test(test_penalty_window_forgets_old_tokens),
        cmocka_unit_test(test_logit_bias_and_ban),
        cmocka_unit_test(test_everything_banned_falls_back_to_raw_best),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_logprobs_are_normalised),
        cmocka_unit_test(test_score_matches_sampling),
        cmocka_unit_test(test_sampled_frequencies_match_probabilities),
        cmocka_unit_test(test_bad_params_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
