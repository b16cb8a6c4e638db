/* Speculative decoding: greedy output with speculation (draft model and
 * prompt lookup, several draft lengths) equals plain greedy decoding on every
 * golden family, hybrids included; the rejection-sampling step reproduces the
 * target distribution; prompt lookup finds the right continuation. */
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
#include "tw/model.h"
#include "tw/pool.h"
#include "tw/safetensors.h"
#include "tw/sampler.h"
#include "tw/spec.h"

#define N_GEN 16

/* ------------------------------------------------------------ unit parts */

static void test_lookup(void **state)
{
    (void)state;
    uint32_t out[8];
    /* last 3 tokens (7 8 9) occurred before, followed by 4 5 */
    const uint32_t h1[] = {7, 8, 9, 4, 5, 1, 7, 8, 9};
    assert_int_equal(tw_spec_lookup(h1, 9, out, 8), 6);
    assert_int_equal(out[0], 4);
    assert_int_equal(out[1], 5);
    assert_int_equal(out[2], 1);
    /* falls back to one token; the newest occurrence wins */
    const uint32_t h2[] = {3, 10, 3, 11, 12, 3};
    assert_int_equal(tw_spec_lookup(h2, 6, out, 2), 2);
    assert_int_equal(out[0], 11);
    assert_int_equal(out[1], 12);
    /* an older occurrence agreeing on 5 tokens beats a newer one agreeing
     * on 4 (and on 3, where a fixed 3-token key would stop looking) */
    const uint32_t h4[] = {1, 2, 3, 4, 5, 6, 9, 2, 3, 4, 5, 7, 1, 2, 3, 4, 5};
    assert_int_equal(tw_spec_lookup(h4, 17, out, 2), 2);
    assert_int_equal(out[0], 6);
    assert_int_equal(out[1], 9);
    size_t key = 0;
    assert_int_equal(tw_spec_lookup_key(h4, 17, out, 2, &key), 2);
    assert_int_equal(key, 5);
    assert_int_equal(tw_spec_lookup_key(h4, 1, out, 2, &key), 0);
    assert_int_equal(key, 0);
    /* the continuation may run into the key itself, never past the end */
    const uint32_t h5[] = {8, 8, 8};
    assert_int_equal(tw_spec_lookup(h5, 3, out, 8), 1);
    assert_int_equal(out[0], 8);
    const uint32_t h3[] = {1, 2, 3};
    assert_int_equal(tw_spec_lookup(h3, 3, out, 4), 0);
    assert_int_equal(tw_spec_lookup(h3, 0, out, 4), 0);
    assert_int_equal(tw_spec_lookup(h1, 9, out, 0), 0);
}

/* Draws N tokens through the accept step (draft drawn from q, or the fixed
 * token d when q is NULL) and holds the histogram to p with a chi-square
 * test (5 degrees of freedom; 25 is far beyond the 0.9999 quantile, and a
 * wrong step, e.g. returning the draft on every acceptance test failure,
 * lands in the thousands). */
static double chi_square_of_step(const float *p, const float *q, uint32_t d, uint64_t seed,
                                 double *acc_rate)
{
    enum { V = 6, N = 60000 };
    tw_rng rng;
    tw_rng_seed(&rng, seed);
    unsigned hist[V] = {0}, acc = 0;
    for (int t = 0; t < N; t++) {
        uint32_t draft = q ? tw_spec_draw(q, V, &rng) : d;
        bool a;
        uint32_t tok = tw_spec_accept_step(p, q, V, draft, &rng, &a);
        assert_true(tok < V);
        if (a) {
            assert_int_equal(tok, draft);
            acc++;
        }
        hist[tok]++;
    }
    double chi = 0.0;
    for (int i = 0; i < V; i++) {
        double e = (double)N * p[i];
        if (e == 0.0) {
            assert_int_equal(hist[i], 0);
            continue;
        }
        chi += ((double)hist[i] - e) * ((double)hist[i] - e) / e;
    }
    *acc_rate = (double)acc / N;
    return chi;
}

static void test_rejection_sampling_matches_target(void **state)
{
    (void)state;
    const float p[6] = {0.35f, 0.25f, 0.2f, 0.1f, 0.1f, 0.0f};
    const float q[6] = {0.05f, 0.4f, 0.1f, 0.05f, 0.2f, 0.2f}; /* q puts mass where p has none */
    double acc;
    double chi = chi_square_of_step(p, q, 0, 1, &acc);
    assert_true(chi < 25.0);
    /* expected acceptance sum_i min(p_i, q_i) = 0.05+0.25+0.1+0.05+0.1 = 0.55 */
    assert_true(fabs(acc - 0.55) < 0.02);
    /* a deterministic proposal (prompt lookup) */
    chi = chi_square_of_step(p, NULL, 1, 2, &acc);
    assert_true(chi < 25.0);
    assert_true(fabs(acc - 0.25) < 0.02);
    chi = chi_square_of_step(p, NULL, 5, 3, &acc); /* a token p never picks */
    assert_true(chi < 25.0);
    assert_true(acc == 0.0);
    /* identical distributions: always accepted */
    chi = chi_square_of_step(p, p, 0, 4, &acc);
    assert_true(chi < 25.0);
    assert_true(acc == 1.0);
}

/* -------------------------------------------------------- golden models */

static const char *repo_families[] = {"gemma3_softcap", "llama_gqa3", "mistral_wide_heads",
                                      "qwen2_mqa", "qwen3_5_mix", "qwen3_5_moe_mix",
                                      "qwen3_deep"};
static const char *shared_families[] = {"llama", "qwen2", "qwen3", "gemma3_text", "qwen3_5",
                                        "qwen3_5_moe"};

static tw_model *load(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tw_model_opts opts = {.max_context = 256, .max_batch = 16, .max_chunk = 64};
    tw_model *m = NULL;
    tw_err err = {{0}};
    if (tw_model_load(path, &opts, &m, &err))
        fail_msg("load %s: %s", path, err.msg);
    return m;
}

static size_t prompt_of(const char *dir, const char *name, uint32_t *ids, size_t cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/golden.safetensors", dir, name);
    tw_err err = {{0}};
    tw_st_file *g;
    assert_int_equal(tw_st_open(path, &g, &err), TW_OK);
    const tw_st_tensor *t = tw_st_find(g, "input_ids");
    assert_non_null(t);
    size_t n = t->n_elems < cap ? t->n_elems : cap;
    memcpy(ids, t->data, n * sizeof(uint32_t));
    tw_st_close(g);
    return n;
}

static tw_sampler *greedy_sampler(uint32_t V)
{
    tw_sampler *s;
    tw_err err;
    assert_int_equal(tw_sampler_create(V, &s, &err), TW_OK);
    tw_sampling_params p;
    tw_sampling_params_init(&p);
    p.temperature = 0.0f;
    assert_int_equal(tw_sampler_configure(s, &p, 0, &err), TW_OK);
    return s;
}

static uint32_t pick(tw_sampler *s, float *row)
{
    tw_sample_result r;
    tw_sampler_sample(s, row, false, 0, &r);
    tw_sampler_accept(s, &r.token, 1, true);
    return r.token;
}

static void plain_greedy(tw_model *m, tw_pool *pool, const uint32_t *prompt, size_t n,
                         uint32_t *out)
{
    uint32_t V = tw_model_get_info(m)->vocab_size;
    float *logits = malloc(V * sizeof *logits);
    tw_seq *seq;
    tw_err err;
    assert_int_equal(tw_seq_create(m, 0, &seq, &err), TW_OK);
    tw_sampler *s = greedy_sampler(V);
    assert_int_equal(tw_model_forward(m, pool, seq, prompt, n, logits, TW_LOGITS_LAST, &err),
                     TW_OK);
    out[0] = pick(s, logits);
    for (size_t i = 1; i < N_GEN; i++) {
        assert_int_equal(tw_model_decode_batch(m, pool, &seq, &out[i - 1], 1, logits, &err),
                         TW_OK);
        out[i] = pick(s, logits);
    }
    tw_sampler_destroy(s);
    tw_seq_free(seq);
    free(logits);
}

/* The scheduler's loop in miniature: propose, verify, walk the rows with the
 * request's own greedy sampler, stop at the first disagreement, rewind. */
static void spec_greedy(tw_model *m, tw_model *draft, tw_pool *pool, const uint32_t *prompt,
                        size_t n, uint32_t k, bool auto_mode, uint32_t *out,
                        tw_spec_counters *cnt)
{
    uint32_t V = tw_model_get_info(m)->vocab_size;
    float *logits = malloc(V * sizeof *logits);
    tw_seq *seq;
    tw_err err = {{0}};
    assert_int_equal(tw_seq_create(m, 0, &seq, &err), TW_OK);
    tw_sampler *s = greedy_sampler(V);
    tw_sampling_params sp_params;
    tw_sampling_params_init(&sp_params);
    sp_params.temperature = 0.0f;
    tw_spec_opts_core o = {.source = draft ? TW_SPEC_SOURCE_DRAFT : TW_SPEC_SOURCE_LOOKUP,
                           .max_draft = k, .fixed_k = true, .auto_pause = auto_mode};
    tw_spec *sp;
    if (tw_spec_create(m, draft, 0, &o, &sp_params, 7, &sp, &err))
        fail_msg("spec: %s", err.msg);
    assert_int_equal(tw_model_forward(m, pool, seq, prompt, n, logits, TW_LOGITS_LAST, &err),
                     TW_OK);
    assert_int_equal(tw_spec_reset(sp, prompt, n, &err), TW_OK);
    size_t got = 0;
    out[got++] = pick(s, logits);
    while (got < N_GEN) {
        uint32_t t0 = out[got - 1];
        const uint32_t *d;
        tw_status st;
        size_t kk = tw_spec_propose(sp, pool, t0, tw_seq_capacity(seq) - tw_seq_len(seq), &d,
                                    &st, &err);
        assert_int_equal(st, TW_OK);
        if (kk == 0) {
            assert_int_equal(tw_model_decode_batch(m, pool, &seq, &t0, 1, logits, &err), TW_OK);
            tw_spec_push(sp, &t0, 1);
            out[got++] = pick(s, logits);
            continue;
        }
        float *rows;
        if (tw_spec_verify(sp, pool, seq, &rows, &err))
            fail_msg("verify: %s", err.msg);
        size_t kept = 0;
        for (size_t i = 0; i <= kk && got < N_GEN; i++) {
            uint32_t tok = pick(s, rows + i * V);
            out[got++] = tok;
            kept = i + 1;
            if (i == kk || tok != d[i])
                break;
        }
        if (tw_spec_finish(sp, seq, kept, &err))
            fail_msg("finish: %s", err.msg);
        /* everything committed but the newest token is in the sequence */
        assert_int_equal(tw_seq_len(seq), n + got - 1);
    }
    tw_spec_get_counters(sp, cnt);
    tw_spec_free(sp);
    tw_sampler_destroy(s);
    tw_seq_free(seq);
    free(logits);
}

/* One sequence decoding a plain row and another verifying three rows in
 * one tw_model_verify_batch pass give the bits of the separate calls, in
 * either order, and leave both sequences where the separate calls would:
 * the same logits after a rewind to the verified row 1 and one more step. */
static void check_verify_batch(tw_model *m, tw_pool *pool, const uint32_t *prompt, size_t n)
{
    uint32_t V = tw_model_get_info(m)->vocab_size;
    tw_err err = {{0}};
    float *ref = malloc(5 * V * sizeof(float)), *got = malloc(5 * V * sizeof(float));
    float *next_ref = malloc(2 * V * sizeof(float)), *next_got = malloc(2 * V * sizeof(float));
    assert_non_null(ref);
    assert_non_null(got);
    assert_non_null(next_ref);
    assert_non_null(next_got);
    const uint32_t ta = 3 % V, tb[3] = {5 % V, 7 % V, 11 % V}, after[2] = {13 % V, 17 % V};
    for (int order = 0; order < 2; order++) {
        for (int joint = 0; joint < 2; joint++) {
            tw_seq *a, *b;
            tw_snapshot_pool *trail;
            assert_int_equal(tw_seq_create(m, 0, &a, &err), TW_OK);
            assert_int_equal(tw_seq_create(m, 0, &b, &err), TW_OK);
            assert_int_equal(tw_snapshot_pool_create(m, 4, &trail, &err), TW_OK);
            assert_int_equal(tw_model_forward(m, pool, a, prompt, n, NULL, TW_LOGITS_NONE, &err),
                             TW_OK);
            assert_int_equal(
                tw_model_forward(m, pool, b, prompt, n / 2 + 1, NULL, TW_LOGITS_NONE, &err),
                TW_OK);
            float *out = joint ? got : ref;
            /* rows: a's one logits row, then b's three (whatever the order) */
            float *out_a = out, *out_b = out + V;
            if (!joint) {
                assert_int_equal(tw_model_decode_batch(m, pool, &a, &ta, 1, out_a, &err), TW_OK);
                assert_int_equal(tw_model_verify(m, pool, b, tb, 3, out_b, trail, &err), TW_OK);
            } else {
                tw_seq *seqs[2] = {order ? b : a, order ? a : b};
                size_t rows[2] = {order ? 3 : 1, order ? 1 : 3};
                tw_snapshot_pool *trails[2] = {order ? trail : NULL, order ? NULL : trail};
                uint32_t toks[4];
                float *tmp = malloc(4 * V * sizeof(float));
                assert_non_null(tmp);
                if (order) {
                    memcpy(toks, tb, sizeof tb);
                    toks[3] = ta;
                } else {
                    toks[0] = ta;
                    memcpy(toks + 1, tb, sizeof tb);
                }
                if (tw_model_verify_batch(m, pool, 2, seqs, toks, rows, trails, tmp, &err))
                    fail_msg("verify batch: %s", err.msg);
                memcpy(out_a, tmp + (order ? 3 : 0) * V, V * sizeof(float));
                memcpy(out_b, tmp + (order ? 0 : 1) * V, 3 * V * sizeof(float));
                free(tmp);
            }
            assert_int_equal(tw_seq_restore(b, trail, 1, &err), TW_OK);
            float *nx = joint ? next_got : next_ref;
            tw_seq *both[2] = {a, b};
            assert_int_equal(tw_model_decode_batch(m, pool, both, after, 2, nx, &err), TW_OK);
            tw_snapshot_pool_free(trail);
            tw_seq_free(a);
            tw_seq_free(b);
        }
        assert_memory_equal(ref, got, 4 * V * sizeof(float));
        assert_memory_equal(next_ref, next_got, 2 * V * sizeof(float));
    }
    /* refused: a plain sequence with two rows, a sequence twice */
    tw_seq *a;
    assert_int_equal(tw_seq_create(m, 0, &a, &err), TW_OK);
    tw_seq *twice[2] = {a, a};
    size_t one[2] = {1, 1}, two[1] = {2};
    tw_snapshot_pool *none[2] = {NULL, NULL};
    const uint32_t toks[2] = {1, 2};
    assert_int_equal(tw_model_verify_batch(m, pool, 1, &a, toks, two, none, got, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_model_verify_batch(m, pool, 2, twice, toks, one, none, got, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_seq_len(a), 0);
    tw_seq_free(a);
    free(ref);
    free(got);
    free(next_ref);
    free(next_got);
}

/* A verification trail holds each row's recurrent inputs and rewinds by
 * replaying them from the state before the pass: rewinding to row 0 and
 * then forward to row 2 lands where the pass left the sequence, bit for
 * bit; a trail whose pass was overwritten, or that another sequence's pass
 * took over, is refused; two sequences cannot share one trail. */
static void check_trail_replay(tw_model *m, tw_pool *pool, const uint32_t *prompt, size_t n)
{
    uint32_t V = tw_model_get_info(m)->vocab_size;
    tw_err err = {{0}};
    float *rows = malloc(3 * V * sizeof(float));
    float *want = malloc(V * sizeof(float)), *got = malloc(V * sizeof(float));
    assert_non_null(rows);
    assert_non_null(want);
    assert_non_null(got);
    const uint32_t tb[3] = {5 % V, 7 % V, 11 % V}, after = 13 % V;
    tw_seq *a, *b;
    tw_snapshot_pool *trail;
    assert_int_equal(tw_seq_create(m, 0, &a, &err), TW_OK);
    assert_int_equal(tw_seq_create(m, 0, &b, &err), TW_OK);
    assert_int_equal(tw_snapshot_pool_create(m, 4, &trail, &err), TW_OK);
    for (int rewind = 0; rewind < 2; rewind++) {
        assert_int_equal(tw_model_forward(m, pool, b, prompt, n, NULL, TW_LOGITS_NONE, &err),
                         TW_OK);
        assert_int_equal(tw_model_verify(m, pool, b, tb, 3, rows, trail, &err), TW_OK);
        if (rewind) {
            assert_int_equal(tw_seq_restore(b, trail, 0, &err), TW_OK);
            assert_int_equal(tw_seq_len(b), n + 1);
            assert_int_equal(tw_seq_restore(b, trail, 2, &err), TW_OK);
        }
        assert_int_equal(tw_seq_len(b), n + 3);
        assert_int_equal(tw_model_decode_batch(m, pool, &b, &after, 1, rewind ? got : want, &err),
                         TW_OK);
        tw_seq_reset(b);
    }
    assert_memory_equal(want, got, V * sizeof(float));

    assert_int_equal(tw_model_forward(m, pool, b, prompt, n, NULL, TW_LOGITS_NONE, &err), TW_OK);
    assert_int_equal(tw_model_verify(m, pool, b, tb, 3, rows, trail, &err), TW_OK);
    assert_int_equal(tw_seq_snapshot(b, trail, 0, &err), TW_OK);
    assert_int_equal(tw_seq_restore(b, trail, 1, &err), TW_FAILED_PRECONDITION);
    assert_int_equal(tw_model_verify(m, pool, b, tb, 3, rows, trail, &err), TW_OK);
    assert_int_equal(tw_model_forward(m, pool, a, prompt, n, NULL, TW_LOGITS_NONE, &err), TW_OK);
    assert_int_equal(tw_model_verify(m, pool, a, tb, 1, rows, trail, &err), TW_OK);
    assert_int_equal(tw_seq_restore(b, trail, 1, &err), TW_FAILED_PRECONDITION);
    assert_int_equal(tw_seq_len(b), n + 6);

    tw_seq *both[2] = {a, b};
    tw_snapshot_pool *shared[2] = {trail, trail};
    size_t two[2] = {2, 1};
    assert_int_equal(tw_model_verify_batch(m, pool, 2, both, tb, two, shared, rows, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_seq_len(a), n + 1);
    assert_int_equal(tw_seq_len(b), n + 6);
    tw_snapshot_pool_free(trail);
    tw_seq_free(a);
    tw_seq_free(b);
    free(rows);
    free(want);
    free(got);
}

static void check_family(const char *dir, const char *name, const char *draft_name)
{
    tw_pool *pool;
    tw_err err;
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    tw_model *m = load(dir, name);
    tw_model *dm = load(dir, draft_name);
    uint32_t prompt[64], want[N_GEN], got[N_GEN];
    size_t n = prompt_of(dir, name, prompt, 64);
    plain_greedy(m, pool, prompt, n, want);
    check_verify_batch(m, pool, prompt, n);
    check_trail_replay(m, pool, prompt, n);
    const uint32_t ks[] = {1, 3, 6};
    for (int use_draft = 0; use_draft < 2; use_draft++) {
        for (size_t i = 0; i < 3; i++) {
            tw_spec_counters c;
            memset(got, 0xff, sizeof got);
            spec_greedy(m, use_draft ? dm : NULL, pool, prompt, n, ks[i], false, got, &c);
            for (size_t t = 0; t < N_GEN; t++)
                if (got[t] != want[t])
                    fail_msg("%s, %s k=%u: token %zu is %u, plain greedy gives %u", name,
                             use_draft ? draft_name : "lookup", ks[i], t, got[t], want[t]);
            assert_true(c.accepted <= c.drafted);
            if (use_draft)
                assert_true(c.rounds > 0);
        }
    }
    /* the model drafting for itself is accepted every time (but for the
     * last round, cut short when N_GEN tokens are reached) */
    tw_spec_counters c;
    spec_greedy(m, m, pool, prompt, n, 3, false, got, &c);
    assert_memory_equal(got, want, sizeof want);
    assert_true(c.rounds > 0);
    if (c.accepted + 3 < c.drafted)
        fail_msg("%s drafting for itself: %llu of %llu accepted", name,
                 (unsigned long long)c.accepted, (unsigned long long)c.drafted);
    /* auto with a draft model: a round whose history repeats an earlier
     * stretch takes lookup proposals, the others the draft's; a prompt
     * stated twice makes both kinds of round happen */
    uint32_t twice[128];
    memcpy(twice, prompt, n * sizeof *prompt);
    memcpy(twice + n, prompt, n * sizeof *prompt);
    plain_greedy(m, pool, twice, 2 * n, want);
    spec_greedy(m, dm, pool, twice, 2 * n, 6, true, got, &c);
    for (size_t t = 0; t < N_GEN; t++)
        if (got[t] != want[t])
            fail_msg("%s, auto with %s: token %zu is %u, plain greedy gives %u", name, draft_name,
                     t, got[t], want[t]);
    assert_true(c.rounds > 0);
    tw_model_free(dm);
    tw_model_free(m);
    tw_pool_destroy(pool);
}

static void test_golden_repo(void **state)
{
    (void)state;
    size_t nf = sizeof repo_families / sizeof *repo_families;
    for (size_t i = 0; i < nf; i++)
        check_family(TW_REPO_GOLDEN, repo_families[i], repo_families[(i + 1) % nf]);
}

static void test_golden_shared(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(dir);
    char gdir[4096];
    snprintf(gdir, sizeof gdir, "%s/golden", dir);
    size_t nf = sizeof shared_families / sizeof *shared_families;
    for (size_t i = 0; i < nf; i++)
        check_family(gdir, shared_families[i], shared_families[(i + 1) % nf]);
}

/* -------------------------------------------------------- auto policy */

/* Drives an auto-paused lookup speculator on a repeating history whose every
 * proposal the "target" rejects (kept = 1), with plain decode steps reported
 * at plain_us each. Records per step whether a round ran (1) or the step
 * decoded plainly (0). Real rounds take far more than 1 us and far less
 * than 10 s, so the policy's verdict does not depend on the machine. */
static void drive_auto(uint64_t plain_us, bool reject, uint32_t start_pause, char *trace,
                       size_t steps, tw_spec_counters *cnt, uint32_t *verdict)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/qwen3_5_mix", TW_REPO_GOLDEN);
    tw_model_opts mo = {.max_context = 512, .max_batch = 16, .max_chunk = 64};
    tw_model *m;
    tw_err err = {{0}};
    if (tw_model_load(path, &mo, &m, &err))
        fail_msg("load: %s", err.msg);
    uint32_t V = tw_model_get_info(m)->vocab_size;
    float *logits = malloc(V * sizeof *logits);
    tw_seq *seq;
    assert_int_equal(tw_seq_create(m, 0, &seq, &err), TW_OK);
    tw_sampling_params sp_params;
    tw_sampling_params_init(&sp_params);
    sp_params.temperature = 0.0f;
    tw_spec_opts_core o = {.source = TW_SPEC_SOURCE_LOOKUP, .max_draft = 4, .auto_pause = true,
                           .start_pause = start_pause};
    tw_spec *sp;
    assert_int_equal(tw_spec_create(m, NULL, 0, &o, &sp_params, 1, &sp, &err), TW_OK);
    /* 5 6 7 5 6 7 ...: lookup always finds the continuation */
    uint32_t hist[8] = {5, 6, 7, 5, 6, 7, 5, 6};
    size_t n = 8;
    assert_int_equal(tw_model_forward(m, NULL, seq, hist, n, logits, TW_LOGITS_LAST, &err),
                     TW_OK);
    assert_int_equal(tw_spec_reset(sp, hist, n, &err), TW_OK);
    uint32_t t0 = 7;
    for (size_t step = 0; step < steps; step++) {
        const uint32_t *d;
        tw_status st;
        size_t k = tw_spec_propose(sp, NULL, t0, tw_seq_capacity(seq) - tw_seq_len(seq), &d,
                                   &st, &err);
        assert_int_equal(st, TW_OK);
        trace[step] = k ? '1' : '0';
        if (k == 0) {
            assert_int_equal(tw_model_decode_batch(m, NULL, &seq, &t0, 1, logits, &err), TW_OK);
            tw_spec_push(sp, &t0, 1);
            tw_spec_plain_time(sp, plain_us);
            t0 = t0 == 7 ? 5 : t0 + 1;
            continue;
        }
        assert_int_equal(d[0], t0 == 7 ? 5 : t0 + 1);
        float *rows;
        assert_int_equal(tw_spec_verify(sp, NULL, seq, &rows, &err), TW_OK);
        size_t kept = reject ? 1 : k + 1;
        assert_int_equal(tw_spec_finish(sp, seq, kept, &err), TW_OK);
        for (size_t i = 0; i < kept; i++)
            t0 = t0 == 7 ? 5 : t0 + 1;
    }
    trace[steps] = 0;
    tw_spec_get_counters(sp, cnt);
    tw_spec_source src;
    *verdict = UINT32_MAX;
    if (tw_spec_auto_verdict(sp, &src, verdict))
        assert_int_equal(src, TW_SPEC_SOURCE_LOOKUP);
    tw_spec_free(sp);
    tw_seq_free(seq);
    free(logits);
    tw_model_free(m);
}

static void test_auto_policy_pauses_and_probes(void **state)
{
    (void)state;
    char trace[128];
    tw_spec_counters c;
    /* Everything rejected and a plain step costs 1 us: 3 warm-up steps,
     * 4 probe rounds, a pause of 16 steps, 4 more probes, a pause of 32
     * (doubled after the failed probe), then probing again. */
    uint32_t verdict;
    drive_auto(1, true, 0, trace, 64, &c, &verdict);
    char want[128];
    snprintf(want, sizeof want, "000" "1111" "%016d" "1111" "%032d" "1111" "0", 0, 0);
    assert_string_equal(trace, want);
    assert_int_equal(c.rounds, 12);
    assert_int_equal(c.accepted, 0);
    assert_true(c.drafted >= c.rounds);
    /* The verdict (a pause of 64 steps) carries over: the next speculator
     * starts paused that long, then probes. */
    assert_int_equal(verdict, 64);
    drive_auto(1, true, verdict, trace, 70, &c, &verdict);
    snprintf(want, sizeof want, "%064d" "1111" "00", 0);
    assert_string_equal(trace, want);
    assert_int_equal(verdict, 128);
    /* Speculation far cheaper than plain decoding never pauses, and says
     * so. */
    drive_auto(10000000, false, 0, trace, 40, &c, &verdict);
    assert_memory_equal(trace, "000", 3);
    assert_null(strchr(trace + 3, '0'));
    assert_int_equal(c.rounds, 37);
    assert_int_equal(c.accepted, c.drafted);
    assert_int_equal(verdict, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_policy_pauses_and_probes),
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_rejection_sampling_matches_target),
        cmocka_unit_test(test_golden_repo),
        cmocka_unit_test(test_golden_shared),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
