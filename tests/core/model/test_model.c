/* Model-level behaviour on the golden checkpoints: DeltaNet chunked prefill
 * vs the token recurrence, snapshots, batched decode, argument checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test_support.h"
#include "tw/gguf.h"
#include "tw/kernels.h"
#include "tw/model.h"
#include "tw/pool.h"
#include "tw/safetensors.h"

#include "model/model_internal.h"

typedef struct fixture {
    tw_model *m;
    tw_pool *pool;
    uint32_t *ids; /* golden long_ids */
    size_t n_ids;
    uint32_t V;
} fixture;

/* Loads golden/<name> for contexts up to max_context, and its long_ids;
 * false (after skip output) when the reference data is absent. */
static bool open_golden_ctx(const char *name, size_t max_context, fixture *f)
{
    memset(f, 0, sizeof *f);
    const char *dir = tw_test_shared_dir();
    if (!dir) {
        tw_test_print_skip();
        return false;
    }
    char path[4096];
    tw_err err = {{0}};
    snprintf(path, sizeof path, "%s/golden/%s", dir, name);
    tw_model_opts opts = {.max_context = max_context, .max_batch = 4, .max_chunk = 256};
    if (tw_model_load(path, &opts, &f->m, &err))
        fail_msg("load %s: %s", path, err.msg);
    assert_int_equal(tw_pool_create(2, &f->pool, &err), TW_OK);
    f->V = tw_model_get_info(f->m)->vocab_size;
    snprintf(path, sizeof path, "%s/golden/%s/golden.safetensors", dir, name);
    tw_st_file *g;
    assert_int_equal(tw_st_open(path, &g, &err), TW_OK);
    const tw_st_tensor *t = tw_st_find(g, "long_ids");
    assert_non_null(t);
    f->n_ids = t->n_elems;
    f->ids = malloc(f->n_ids * sizeof(uint32_t));
    memcpy(f->ids, t->data, f->n_ids * sizeof(uint32_t)); /* int32, all >= 0 */
    tw_st_close(g);
    return true;
}

static bool open_golden(const char *name, fixture *f)
{
    return open_golden_ctx(name, 512, f);
}

static void close_golden(fixture *f)
{
    free(f->ids);
    tw_pool_destroy(f->pool);
    tw_model_free(f->m);
}

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double mx = 0.0, d = 0.0;
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(b[i]));
        d = fmax(d, fabs((double)a[i] - b[i]));
    }
    return mx > 0 ? d / mx : d;
}

/* The chunked form over random inputs equals the token recurrence. */
static void test_deltanet_chunk_equals_recurrence(void **state)
{
    (void)state;
    enum { DK = 16, DV = 24, L = 45 };
    tw_test_rng rng = {.s = 12345};
    float q[L][DK], k[L][DK], v[L][DV], g[L], beta[L];
    for (int t = 0; t < L; t++) {
        double nq = 0, nk = 0;
        for (int i = 0; i < DK; i++) {
            q[t][i] = tw_test_rand_f32(&rng);
            k[t][i] = tw_test_rand_f32(&rng);
            nq += q[t][i] * q[t][i];
            nk += k[t][i] * k[t][i];
        }
        for (int i = 0; i < DK; i++) {
            q[t][i] /= (float)sqrt(nq) * 4.0f;
            k[t][i] /= (float)sqrt(nk);
        }
        for (int i = 0; i < DV; i++)
            v[t][i] = tw_test_rand_f32(&rng);
        g[t] = -0.5f * (tw_test_rand_f32(&rng) + 1.0f);
        beta[t] = 0.5f * (tw_test_rand_f32(&rng) + 1.0f);
    }
    float s1[DK * DV], s2[DK * DV], o1[L][DV], o2[L][DV];
    for (int i = 0; i < DK * DV; i++)
        s1[i] = s2[i] = 0.1f * tw_test_rand_f32(&rng);
    for (int t = 0; t < L; t++)
        tw_deltanet_step(s1, q[t], k[t], v[t], g[t], beta[t], DK, DV, o1[t]);
    float *work = malloc(tw_deltanet_chunk_floats(DK, DV) * sizeof(float));
    /* two uneven chunks, so the state carries across a chunk boundary */
    tw_deltanet_chunk(s2, q[0], k[0], DK, v[0], DV, g, beta, 1, 30, DK, DV, o2[0], DV, work);
    tw_deltanet_chunk(s2, q[30], k[30], DK, v[30], DV, g + 30, beta + 30, 1, L - 30, DK, DV,
                      o2[30], DV, work);
    free(work);
    assert_true(max_rel_diff(&o2[0][0], &o1[0][0], L * DV) < 1e-5);
    assert_true(max_rel_diff(s2, s1, DK * DV) < 1e-5);
    /* and it is not trivially equal: the outputs vary */
    assert_true(fabs(o1[3][0] - o1[40][0]) > 1e-6);
}

/* Whole-model check of the same thing: a 160-token prefill (three DeltaNet
 * chunks) against feeding the tokens one by one. */
static void test_hybrid_prefill_equals_decode(void **state)
{
    (void)state;
    fixture f;
    if (!open_golden("qwen3_5", &f)) {
        skip();
        return;
    }
    tw_err err = {{0}};
    tw_seq *a, *b;
    assert_int_equal(tw_seq_create(f.m, 0, &a, &err), TW_OK);
    assert_int_equal(tw_seq_create(f.m, 0, &b, &err), TW_OK);
    float *pre = malloc(f.n_ids * f.V * sizeof(float));
    float *one = malloc(f.V * sizeof(float));
    assert_int_equal(tw_model_forward(f.m, f.pool, a, f.ids, f.n_ids, pre, TW_LOGITS_ALL, &err),
                     TW_OK);
    double worst = 0.0;
    for (size_t i = 0; i < f.n_ids; i++) {
        assert_int_equal(tw_model_forward(f.m, f.pool, b, &f.ids[i], 1, one, TW_LOGITS_LAST, &err),
                         TW_OK);
        worst = fmax(worst, max_rel_diff(one, pre + i * f.V, f.V));
    }
    assert_true(worst < 1e-4);
    assert_int_equal(tw_seq_len(a), f.n_ids);
    assert_int_equal(tw_seq_len(b), f.n_ids);
    free(pre);
    free(one);
    tw_seq_free(a);
    tw_seq_free(b);
    close_golden(&f);
}

/* Snapshot, decode, restore, decode again: bit-identical logits. */
static void snapshot_roundtrip(const char *name)
{
    fixture f;
    if (!open_golden(name, &f)) {
        skip();
        return;
    }
    tw_err err = {{0}};
    tw_seq *s;
    tw_snapshot_pool *sp;
    assert_int_equal(tw_seq_create(f.m, 64, &s, &err), TW_OK);
    assert_int_equal(tw_snapshot_pool_create(f.m, 2, &sp, &err), TW_OK);
    float *l1 = malloc(5 * f.V * sizeof(float)), *l2 = malloc(5 * f.V * sizeof(float));
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids, 20, NULL, TW_LOGITS_NONE, &err),
                     TW_OK);
    assert_int_equal(tw_seq_snapshot(s, sp, 1, &err), TW_OK);
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids + 20, 5, l1, TW_LOGITS_ALL, &err),
                     TW_OK);
    assert_int_equal(tw_seq_restore(s, sp, 1, &err), TW_OK);
    assert_int_equal(tw_seq_len(s), 20);
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids + 20, 5, l2, TW_LOGITS_ALL, &err),
                     TW_OK);
    assert_memory_equal(l1, l2, 5 * f.V * sizeof(float));

    /* an empty slot, another sequence's slot, and a rewritten prefix are refused */
    assert_int_equal(tw_seq_restore(s, sp, 0, &err), TW_FAILED_PRECONDITION);
    tw_seq *other;
    assert_int_equal(tw_seq_create(f.m, 64, &other, &err), TW_OK);
    assert_int_equal(tw_seq_restore(other, sp, 1, &err), TW_FAILED_PRECONDITION);
    tw_seq_free(other);
    tw_seq_reset(s);
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids + 40, 3, NULL, TW_LOGITS_NONE, &err),
                     TW_OK);
    assert_int_equal(tw_seq_restore(s, sp, 1, &err), TW_FAILED_PRECONDITION);
    assert_int_equal(tw_seq_len(s), 3);
    assert_int_equal(tw_seq_restore(s, sp, 7, &err), TW_OUT_OF_RANGE);

    free(l1);
    free(l2);
    tw_snapshot_pool_free(sp);
    tw_seq_free(s);
    close_golden(&f);
}

static void test_snapshot_hybrid(void **state)
{
    (void)state;
    snapshot_roundtrip("qwen3_5");
}

static void test_snapshot_attention(void **state)
{
    (void)state;
    snapshot_roundtrip("gemma3_text");
}

/* Truncation: free on attention-only models, refused on hybrid ones. */
static void test_truncate(void **state)
{
    (void)state;
    fixture f;
    if (!open_golden("llama", &f)) {
        skip();
        return;
    }
    tw_err err = {{0}};
    tw_seq *s;
    assert_int_equal(tw_seq_create(f.m, 64, &s, &err), TW_OK);
    float *all = malloc(24 * f.V * sizeof(float)), *tail = malloc(4 * f.V * sizeof(float));
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids, 24, all, TW_LOGITS_ALL, &err), TW_OK);
    assert_int_equal(tw_seq_truncate(s, 25, &err), TW_OUT_OF_RANGE);
    assert_int_equal(tw_seq_truncate(s, 20, &err), TW_OK);
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids + 20, 4, tail, TW_LOGITS_ALL, &err),
                     TW_OK);
    assert_true(max_rel_diff(tail, all + 20 * f.V, 4 * f.V) < 1e-5);
    free(all);
    free(tail);
    tw_seq_free(s);
    close_golden(&f);

    if (!open_golden("qwen3_5", &f))
        return;
    assert_int_equal(tw_seq_create(f.m, 64, &s, &err), TW_OK);
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids, 10, NULL, TW_LOGITS_NONE, &err),
                     TW_OK);
    assert_int_equal(tw_seq_truncate(s, 5, &err), TW_FAILED_PRECONDITION);
    assert_int_equal(tw_seq_len(s), 10);
    assert_int_equal(tw_seq_truncate(s, 0, &err), TW_OK);
    assert_int_equal(tw_seq_len(s), 0);
    tw_seq_free(s);
    close_golden(&f);
}

/* Whether every page of [p, p + bytes) is resident. */
static bool resident(const unsigned char *p, size_t bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p / page * page, hi = ((uintptr_t)p + bytes + page - 1) / page * page;
    unsigned char vec[256];
    assert_true((hi - lo) / page <= sizeof vec);
    assert_int_equal(mincore((void *)lo, hi - lo, vec), 0);
    for (size_t i = 0; i < (hi - lo) / page; i++)
        if (!(vec[i] & 1))
            return false;
    return true;
}

/* Each K/V run of a sequence is populated a stretch past the positions a
 * step writes, and no further. */
static void assert_kv_ready(const tw_seq *s, size_t ready, size_t untouched)
{
    const tw_mconfig *c = &s->model->cfg;
    const size_t row = (size_t)c->head_dim * tw_kv_elem(s->model);
    assert_int_equal(s->kv_ready, ready);
    for (uint32_t l = 0; l < s->model->n_attn_layers; l++)
        for (int which = 0; which < 2; which++)
            for (uint32_t h = 0; h < c->n_kv_heads; h++) {
                const unsigned char *run = tw_seq_kv(s, l, which, h);
                assert_true(resident(run, ready * row));
                assert_false(resident(run + untouched * row, row));
            }
}

static void test_kv_pages_ahead(void **state)
{
    (void)state;
    fixture f;
    if (!open_golden_ctx("llama", 4096, &f)) {
        skip();
        return;
    }
    tw_err err = {{0}};
    tw_seq *s;
    assert_int_equal(tw_seq_create(f.m, 4096, &s, &err), TW_OK);
    const size_t row = (size_t)f.m->cfg.head_dim * tw_kv_elem(f.m);
    /* 64 KiB of each run ahead of the last position written */
    const size_t ahead = ((size_t)64 << 10) / row;
    assert_true(8 + ahead + ahead < s->cap);
    assert_false(resident(s->kv, row));

    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids, 8, NULL, TW_LOGITS_NONE, &err), TW_OK);
    if (s->kv_lazy) {
        printf("SKIP kv pages ahead: this kernel cannot populate pages "
               "(MADV_POPULATE_WRITE, Linux 5.14)\n");
        tw_seq_free(s);
        close_golden(&f);
        skip();
        return;
    }
    assert_kv_ready(s, 8 + ahead, 8 + 2 * ahead);

    /* up to the edge of what is populated: nothing more is asked for */
    uint32_t *more = malloc(ahead * sizeof *more);
    for (size_t i = 0; i < ahead; i++)
        more[i] = f.ids[i % f.n_ids];
    assert_int_equal(tw_model_forward(f.m, f.pool, s, more, ahead, NULL, TW_LOGITS_NONE, &err),
                     TW_OK);
    assert_kv_ready(s, 8 + ahead, 8 + 2 * ahead);
    /* one step past it populates the next stretch */
    assert_int_equal(tw_model_forward(f.m, f.pool, s, more, 1, NULL, TW_LOGITS_NONE, &err), TW_OK);
    assert_kv_ready(s, 9 + 2 * ahead, 9 + 3 * ahead);

    /* a reset sequence keeps its pages */
    tw_seq_reset(s);
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids, 8, NULL, TW_LOGITS_NONE, &err), TW_OK);
    assert_kv_ready(s, 9 + 2 * ahead, 9 + 3 * ahead);
    free(more);
    tw_seq_free(s);
    close_golden(&f);
}

/* Three sequences at different lengths decoded together equal decoding
 * each alone. */
static void batch_equals_single(const char *name)
{
    fixture f;
    if (!open_golden(name, &f)) {
        skip();
        return;
    }
    enum { N = 3, STEPS = 4 };
    tw_err err = {{0}};
    tw_seq *bs[N], *ss[N];
    size_t prompt[N] = {5, 17, 30};
    for (int i = 0; i < N; i++) {
        assert_int_equal(tw_seq_create(f.m, 64, &bs[i], &err), TW_OK);
        assert_int_equal(tw_seq_create(f.m, 64, &ss[i], &err), TW_OK);
        const uint32_t *p = f.ids + 40 * i;
        assert_int_equal(tw_model_forward(f.m, f.pool, bs[i], p, prompt[i], NULL, TW_LOGITS_NONE,
                                          &err), TW_OK);
        assert_int_equal(tw_model_forward(f.m, f.pool, ss[i], p, prompt[i], NULL, TW_LOGITS_NONE,
                                          &err), TW_OK);
    }
    float *lb = malloc(N * f.V * sizeof(float)), *ls = malloc(f.V * sizeof(float));
    double worst = 0.0;
    for (int step = 0; step < STEPS; step++) {
        uint32_t toks[N];
        for (int i = 0; i < N; i++)
            toks[i] = f.ids[130 + 7 * i + step];
        assert_int_equal(tw_model_decode_batch(f.m, f.pool, bs, toks, N, lb, &err), TW_OK);
        for (int i = 0; i < N; i++) {
            assert_int_equal(tw_model_decode_batch(f.m, f.pool, &ss[i], &toks[i], 1, ls, &err),
                             TW_OK);
            worst = fmax(worst, max_rel_diff(lb + i * f.V, ls, f.V));
        }
    }
    assert_true(worst < 1e-5);
    for (int i = 0; i < N; i++) {
        assert_int_equal(tw_seq_len(bs[i]), prompt[i] + STEPS);
        tw_seq_free(bs[i]);
        tw_seq_free(ss[i]);
    }
    free(lb);
    free(ls);
    close_golden(&f);
}

static void test_batch_moe_hybrid(void **state)
{
    (void)state;
    batch_equals_single("qwen3_5_moe");
}

static void test_batch_sliding(void **state)
{
    (void)state;
    batch_equals_single("gemma3_text");
}

/* Bad input leaves the sequence untouched and says why. */
static void test_argument_checks(void **state)
{
    (void)state;
    fixture f;
    if (!open_golden("qwen3", &f)) {
        skip();
        return;
    }
    tw_err err = {{0}};
    tw_seq *s, *s2;
    float *l = malloc(4 * f.V * sizeof(float));
    assert_int_equal(tw_seq_create(f.m, 8, &s, &err), TW_OK);
    assert_int_equal(tw_seq_create(f.m, 100000, &s2, &err), TW_INVALID_ARGUMENT);
    assert_int_equal(tw_seq_create(f.m, 8, &s2, &err), TW_OK);
    uint32_t bad[3] = {1, f.V, 2};
    assert_int_equal(tw_model_forward(f.m, f.pool, s, bad, 3, l, TW_LOGITS_ALL, &err),
                     TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "vocabulary"));
    assert_int_equal(tw_seq_len(s), 0);
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids, 6, l, TW_LOGITS_LAST, &err), TW_OK);
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids, 3, l, TW_LOGITS_LAST, &err),
                     TW_OUT_OF_RANGE);
    assert_int_equal(tw_seq_len(s), 6);
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids, 2, NULL, TW_LOGITS_ALL, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids, 2, l, TW_LOGITS_ALL, &err), TW_OK);
    assert_int_equal(tw_model_forward(f.m, f.pool, s, f.ids, 1, l, TW_LOGITS_LAST, &err),
                     TW_OUT_OF_RANGE);

    tw_seq *dup[2] = {s2, s2};
    uint32_t toks[2] = {1, 2};
    assert_int_equal(tw_model_decode_batch(f.m, f.pool, dup, toks, 2, l, &err),
                     TW_INVALID_ARGUMENT);
    tw_seq *pair[2] = {s2, s};
    assert_int_equal(tw_model_decode_batch(f.m, f.pool, pair, toks, 2, l, &err), TW_OUT_OF_RANGE);
    assert_int_equal(tw_model_decode_batch(f.m, f.pool, pair, toks, 5, l, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(tw_seq_len(s2), 0);

    char fp[65], fp2[65];
    assert_int_equal(tw_model_fingerprint(f.m, fp, &err), TW_OK);
    assert_int_equal(strlen(fp), 64);
    assert_int_equal(tw_model_fingerprint(f.m, fp2, &err), TW_OK);
    assert_string_equal(fp, fp2);

    free(l);
    tw_seq_free(s);
    tw_seq_free(s2);
    close_golden(&f);
}

static void test_load_errors(void **state)
{
    (void)state;
    tw_err err = {{0}};
    tw_model *m = (tw_model *)1;
    assert_int_equal(tw_model_load("/nonexistent/model", NULL, &m, &err), TW_NOT_FOUND);
    assert_null(m);
    char *dir = tw_test_mkdtemp();
    assert_non_null(dir);
    assert_int_not_equal(tw_model_load(dir, NULL, &m, &err), TW_OK);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    const char *cfg = "{\"model_type\": \"llama\", \"vocab_size\": 16}";
    assert_true(tw_test_write_file(path, cfg, strlen(cfg)));
    assert_int_not_equal(tw_model_load(dir, NULL, &m, &err), TW_OK);
    assert_null(m);
    tw_test_rmtree(dir);
    free(dir);
}

/* Where weights go: map never copies; huge refuses a copy that does not
 * fit; auto copies only with huge pages on offer and only a file of at most
 * half the available memory. */
static void test_weights_placement(void **state)
{
    (void)state;
    tw_err err = {{0}};
    bool huge = true;
    const uint64_t GiB = 1ull << 30;
    assert_int_equal(tw_weights_placement(TW_WEIGHTS_MAP, true, GiB, 8 * GiB, &huge, &err),
                     TW_OK);
    assert_false(huge);
    assert_int_equal(tw_weights_placement(TW_WEIGHTS_HUGE, false, GiB, 8 * GiB, &huge, &err),
                     TW_OK);
    assert_true(huge);
    assert_int_equal(tw_weights_placement(TW_WEIGHTS_HUGE, true, 9 * GiB, 8 * GiB, &huge, &err),
                     TW_RESOURCE_EXHAUSTED);
    assert_false(huge);
    assert_non_null(strstr(err.msg, "map"));
    assert_int_equal(tw_weights_placement(TW_WEIGHTS_AUTO, true, 4 * GiB, 8 * GiB, &huge, &err),
                     TW_OK);
    assert_true(huge);
    assert_int_equal(tw_weights_placement(TW_WEIGHTS_AUTO, true, 5 * GiB, 8 * GiB, &huge, &err),
                     TW_OK);
    assert_false(huge);
    assert_int_equal(tw_weights_placement(TW_WEIGHTS_AUTO, false, GiB, 8 * GiB, &huge, &err),
                     TW_OK);
    assert_false(huge);
    /* memory unknown: no limit */
    assert_int_equal(tw_weights_placement(TW_WEIGHTS_AUTO, true, 64 * GiB, 0, &huge, &err),
                     TW_OK);
    assert_true(huge);
}

/* The shipped 24M target's path under the source tree; false outside one. */
static bool shipped_model(char *path, size_t cap)
{
    const char *src = getenv("TW_SOURCE_DIR");
    if (!src)
        return false;
    snprintf(path, cap, "%s/models/tokenwire-coder-24m-q8_0.gguf", src);
    return true;
}

/* The shipped Q8_0 model: every matrix is packed at load, and a load that
 * maps the file and one that copies it give the same fingerprint and the
 * same logits, though both give the originals' pages back after packing.
 * Its embedding table is tied to the output matrix, so it is the packed
 * copy too, and the rows gathered from it are the file's rows. */
static void check_embedding_rows(const char *path, const tw_model *m)
{
    tw_gguf *g;
    tw_err err = {{0}};
    if (tw_gguf_open(path, &g, &err) != TW_OK)
        fail_msg("%s", err.msg);
    const tw_gguf_tensor *t = tw_gguf_find_tensor(g, "token_embd.weight");
    assert_non_null(t);
    assert_int_equal(t->type, TW_TYPE_Q8_0);
    const size_t H = m->cfg.hidden, rb = tw_type_row_bytes(TW_TYPE_Q8_0, H);
    assert_int_equal(t->dims[0], H);
    float *want = malloc(H * sizeof(float)), *got = malloc(H * sizeof(float));
    assert_non_null(want);
    assert_non_null(got);
    /* rows of the first group, of a middle one, and the last rows (the
     * vocabulary is not a multiple of eight: plain tail rows) */
    const size_t V = m->cfg.vocab;
    const size_t rows[] = {0, 1, 7, 8, 4097, V / 2, V - 9, V - 2, V - 1};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        tw_dequant_row(TW_TYPE_Q8_0, (const uint8_t *)t->data + rows[i] * rb, want, H);
        tw_mat_row(&m->embed, rows[i], got);
        if (memcmp(want, got, H * sizeof(float)) != 0)
            fail_msg("embedding row %zu differs from the file's", rows[i]);
    }
    free(want);
    free(got);
    tw_gguf_close(g);
}

static void test_packed_weights(void **state)
{
    (void)state;
    char path[4096];
    if (!shipped_model(path, sizeof path))
        skip();
    const tw_weight_pages modes[2] = {TW_WEIGHTS_MAP, TW_WEIGHTS_HUGE};
    tw_model *m[2];
    char fp[2][65];
    float *logits[2];
    tw_err err = {{0}};
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    static const uint32_t ids[] = {1, 872, 198, 4000, 17, 2, 8193, 300};
    for (int k = 0; k < 2; k++) {
        tw_model_opts o = {.weight_pages = modes[k]};
        if (tw_model_load(path, &o, &m[k], &err) != TW_OK)
            fail_msg("%s", err.msg);
        assert_int_equal(m[k]->info.huge_pages, k == 1);
        assert_int_equal(m[k]->lm_head.type, TW_TYPE_Q8_0_R8);
        assert_int_equal(m[k]->embed.type, TW_TYPE_Q8_0_R8);
        assert_ptr_equal(m[k]->embed.w, m[k]->lm_head.w);
        check_embedding_rows(path, m[k]);
        for (uint32_t l = 0; l < m[k]->cfg.n_layers; l++) {
            const tw_layer *L = &m[k]->layers[l];
            const tw_mat *mix = L->mixer == TW_MIXER_ATTENTION ? &L->wq : &L->in_qkv;
            assert_int_equal(mix->type, TW_TYPE_Q8_0_R8);
            assert_int_equal(L->down.type, TW_TYPE_Q8_0_R8);
        }
        assert_int_equal(tw_model_fingerprint(m[k], fp[k], &err), TW_OK);
        size_t V = m[k]->info.vocab_size;
        logits[k] = malloc(V * sizeof(float));
        assert_non_null(logits[k]);
        tw_seq *seq;
        assert_int_equal(tw_seq_create(m[k], 0, &seq, &err), TW_OK);
        assert_int_equal(tw_model_forward(m[k], pool, seq, ids, sizeof ids / sizeof ids[0],
                                          logits[k], TW_LOGITS_LAST, &err),
                         TW_OK);
        tw_seq_free(seq);
    }
    assert_string_equal(fp[0], fp[1]);
    assert_memory_equal(logits[0], logits[1], m[0]->info.vocab_size * sizeof(float));
    for (int k = 0; k < 2; k++) {
        free(logits[k]);
        tw_model_free(m[k]);
    }
    tw_pool_destroy(pool);
}

/* Sixteen sequences of the shipped 24M model decoded in one batch on two
 * threads, against each decoded alone: a batch this wide has the pool
 * quantize its activations and compute its gate activations (16 x 1216
 * values), and every row must still get exactly its lone step's logits. */
static void test_wide_batch_matches_single(void **state)
{
    (void)state;
    char path[4096];
    if (!shipped_model(path, sizeof path))
        skip();
    enum { N = 16, PROMPT = 5 };
    tw_err err = {{0}};
    tw_pool *pool;
    assert_int_equal(tw_pool_create(2, &pool, &err), TW_OK);
    tw_model_opts o = {.max_context = 64, .max_batch = N};
    tw_model *m;
    if (tw_model_load(path, &o, &m, &err) != TW_OK)
        fail_msg("%s", err.msg);
    assert_true((size_t)N * m->cfg.ffn_dim >= 16384);
    size_t V = m->info.vocab_size;
    float *batch = malloc(N * V * sizeof(float)), *one = malloc(V * sizeof(float));
    assert_non_null(batch);
    assert_non_null(one);
    tw_seq *a[N], *b[N];
    uint32_t next[N];
    for (size_t i = 0; i < N; i++) {
        uint32_t ids[PROMPT];
        for (size_t t = 0; t < PROMPT; t++)
            ids[t] = (uint32_t)((i * 977 + t * 131 + 7) % V);
        next[i] = (uint32_t)((i * 389 + 11) % V);
        assert_int_equal(tw_seq_create(m, 0, &a[i], &err), TW_OK);
        assert_int_equal(tw_seq_create(m, 0, &b[i], &err), TW_OK);
        assert_int_equal(tw_model_forward(m, pool, a[i], ids, PROMPT, one, TW_LOGITS_NONE, &err),
                         TW_OK);
        assert_int_equal(tw_model_forward(m, pool, b[i], ids, PROMPT, one, TW_LOGITS_NONE, &err),
                         TW_OK);
    }
    assert_int_equal(tw_model_decode_batch(m, pool, a, next, N, batch, &err), TW_OK);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(tw_model_decode_batch(m, pool, &b[i], &next[i], 1, one, &err), TW_OK);
        if (memcmp(one, batch + i * V, V * sizeof(float)) != 0)
            fail_msg("row %zu of the batch differs from its lone decode step", i);
        tw_seq_free(a[i]);
        tw_seq_free(b[i]);
    }
    free(batch);
    free(one);
    tw_model_free(m);
    tw_pool_destroy(pool);
}

/* The hidden states a forward pass gives for embeddings are what its
 * logits are made from: each row times the output matrix is that row's
 * logits (the last-token form is the all-token form's last row), and those
 * logits are transformers' within the reference tolerance. */
static void hidden_states(const char *name)
{
    fixture f;
    if (!open_golden(name, &f))
        return;
    tw_err err = {{0}};
    const size_t n = 40, H = f.m->cfg.hidden, V = f.V;
    float *hidden = malloc(n * H * sizeof(float)), *last = malloc(H * sizeof(float));
    float *logits = malloc(n * V * sizeof(float)), *row = malloc(H * sizeof(float));
    float *made = malloc(V * sizeof(float));
    tw_seq *seq;
    assert_int_equal(tw_seq_create(f.m, 512, &seq, &err), TW_OK);
    assert_int_equal(tw_model_forward(f.m, f.pool, seq, f.ids, n, hidden, TW_HIDDEN_ALL, &err),
                     TW_OK);
    assert_int_equal(tw_seq_len(seq), n);
    tw_seq_reset(seq);
    assert_int_equal(tw_model_forward(f.m, f.pool, seq, f.ids, n, last, TW_HIDDEN_LAST, &err),
                     TW_OK);
    assert_memory_equal(last, hidden + (n - 1) * H, H * sizeof(float));
    tw_seq_reset(seq);
    assert_int_equal(tw_model_forward(f.m, f.pool, seq, f.ids, n, logits, TW_LOGITS_ALL, &err),
                     TW_OK);
    for (size_t p = 0; p < n; p += 13) {
        for (uint32_t v = 0; v < V; v++) {
            tw_mat_row(&f.m->lm_head, v, row);
            double dot = 0;
            for (size_t d = 0; d < H; d++)
                dot += (double)row[d] * hidden[p * H + d];
            made[v] = (float)dot;
        }
        double diff = max_rel_diff(made, logits + p * V, V);
        if (diff > 1e-4)
            fail_msg("%s: position %zu: hidden state x output matrix is %.2g from the logits", name,
                     p, diff);
    }
    tw_seq_free(seq);
    free(hidden);
    free(last);
    free(logits);
    free(row);
    free(made);
    close_golden(&f);
}

static void test_hidden_states(void **state)
{
    (void)state;
    hidden_states("qwen3");
    hidden_states("qwen3_5");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deltanet_chunk_equals_recurrence),
        cmocka_unit_test(test_hybrid_prefill_equals_decode),
        cmocka_unit_test(test_snapshot_hybrid),
        cmocka_unit_test(test_snapshot_attention),
        cmocka_unit_test(test_truncate),
        cmocka_unit_test(test_kv_pages_ahead),
        cmocka_unit_test(test_batch_moe_hybrid),
        cmocka_unit_test(test_batch_sliding),
        cmocka_unit_test(test_argument_checks),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_weights_placement),
        cmocka_unit_test(test_packed_weights),
        cmocka_unit_test(test_wide_batch_matches_single),
        cmocka_unit_test(test_hidden_states),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
