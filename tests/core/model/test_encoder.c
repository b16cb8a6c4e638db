/* The encoder (BERT) against what transformers computed for the shipped
 * random-weight checkpoint (tests/data/golden/bert_cls): every hidden state
 * of every text, the longest filling the position table; and the calls an
 * encoder refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "tw/model.h"
#include "tw/pool.h"
#include "tw/safetensors.h"

static const char *golden_dir;
static const char *model_path; /* golden_dir, or a GGUF written from it */
static double tolerance = 1e-4;

typedef struct fixture {
    tw_model *m;
    tw_pool *pool;
    tw_st_file *ref;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    tw_err err;
    char path[1024];
    if (tw_model_load(model_path, NULL, &f->m, &err) != TW_OK) {
        fprintf(stderr, "load %s: %s\n", model_path, err.msg);
        return -1;
    }
    snprintf(path, sizeof path, "%s/golden.safetensors", golden_dir);
    if (tw_st_open(path, &f->ref, &err) != TW_OK || tw_pool_create(2, &f->pool, &err) != TW_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    tw_pool_destroy(f->pool);
    tw_st_close(f->ref);
    tw_model_free(f->m);
    free(f);
    return 0;
}

static float *ref_floats(const fixture *f, const char *name, size_t *n)
{
    const tw_st_tensor *t = tw_st_find(f->ref, name);
    assert_non_null(t);
    float *v = malloc(t->n_elems * sizeof *v);
    tw_err err;
    assert_int_equal(tw_st_to_f32(t, v, t->n_elems, &err), TW_OK);
    *n = t->n_elems;
    return v;
}

static uint32_t *ref_ids(const fixture *f, int i, size_t *n)
{
    char name[32];
    snprintf(name, sizeof name, "ids_%d", i);
    const tw_st_tensor *t = tw_st_find(f->ref, name);
    if (!t)
        return NULL;
    assert_int_equal(t->dtype, TW_ST_I64);
    uint32_t *ids = malloc(t->n_elems * sizeof *ids);
    for (size_t k = 0; k < t->n_elems; k++) {
        int64_t v;
        memcpy(&v, (const char *)t->data + k * sizeof v, sizeof v);
        ids[k] = (uint32_t)v;
    }
    *n = t->n_elems;
    return ids;
}

static void test_info(void **state)
{
    const fixture *f = *state;
    const tw_model_info *in = tw_model_get_info(f->m);
    assert_true(in->encoder);
    assert_string_equal(in->model_type, "bert");
    assert_int_equal(in->max_context, 128);
    assert_int_equal(in->hidden, 96);
    /* the sentence-transformers pooling module beside it says CLS */
    assert_int_equal(in->pooling, TW_MODEL_POOLING_CLS);
}

/* Every hidden state of every reference text within 1e-4 of transformers'
 * (LayerNorm keeps them near unit scale), and so the CLS and mean vectors. */
static void test_matches_reference(void **state)
{
    const fixture *f = *state;
    const size_t H = tw_model_get_info(f->m)->hidden;
    int texts = 0;
    size_t longest = 0;
    for (int i = 0;; i++) {
        size_t n, nh, nc, nm;
        uint32_t *ids = ref_ids(f, i, &n);
        if (!ids)
            break;
        char name[32];
        snprintf(name, sizeof name, "hidden_%d", i);
        float *want = ref_floats(f, name, &nh);
        snprintf(name, sizeof name, "cls_%d", i);
        float *cls = ref_floats(f, name, &nc);
        snprintf(name, sizeof name, "mean_%d", i);
        float *mean = ref_floats(f, name, &nm);
        assert_int_equal(nh, n * H);
        assert_int_equal(nc, H);
        float *got = malloc(n * H * sizeof *got);
        tw_err err;
        if (tw_model_encode(f->m, f->pool, ids, n, got, &err) != TW_OK)
            fail_msg("encode text %d: %s", i, err.msg);
        double worst = 0;
        for (size_t k = 0; k < n * H; k++)
            worst = fmax(worst, fabs((double)got[k] - want[k]));
        if (worst > tolerance)
            fail_msg("text %d (%zu tokens): hidden states differ by up to %g", i, n, worst);
        /* each token's state points where transformers' does, which rounded
         * weights move a little and a wrong pass moves far */
        for (size_t r = 0; r < n; r++) {
            double dot = 0, a = 0, b = 0;
            for (size_t d = 0; d < H; d++) {
                dot += (double)got[r * H + d] * want[r * H + d];
                a += (double)got[r * H + d] * got[r * H + d];
                b += (double)want[r * H + d] * want[r * H + d];
            }
            if (dot / sqrt(a * b) < 0.9995)
                fail_msg("text %d, token %zu: cosine %.6f to the reference", i, r,
                         dot / sqrt(a * b));
        }
        for (size_t d = 0; d < H; d++) {
            double sum = 0;
            for (size_t r = 0; r < n; r++)
                sum += got[r * H + d];
            assert_true(fabs(got[d] - cls[d]) <= tolerance);
            assert_true(fabs(sum / (double)n - mean[d]) <= tolerance);
        }
        /* reading the same input again gives the same bits: nothing is kept */
        float *again = malloc(n * H * sizeof *again);
        assert_int_equal(tw_model_encode(f->m, f->pool, ids, n, again, &err), TW_OK);
        assert_memory_equal(got, again, n * H * sizeof *got);
        longest = n > longest ? n : longest;
        texts++;
        free(again);
        free(got);
        free(ids);
        free(want);
        free(cls);
        free(mean);
    }
    assert_int_equal(texts, 5);
    assert_true(longest > 100); /* the positions near the table's end were read */
}

/* Every reference text in one pass: each input's states are its own,
 * attending to itself alone, as read apart (to rounding) and as
 * transformers computed them; and what a batch refuses. */
static void test_batch(void **state)
{
    const fixture *f = *state;
    const size_t H = tw_model_get_info(f->m)->hidden;
    uint32_t *ids[8];
    size_t n[8], k = 0;
    float *got[8], *alone[8], *want[8];
    while (k < 8 && (ids[k] = ref_ids(f, (int)k, &n[k])) != NULL) {
        char name[32];
        size_t nh;
        snprintf(name, sizeof name, "hidden_%zu", k);
        want[k] = ref_floats(f, name, &nh);
        got[k] = malloc(n[k] * H * sizeof(float));
        alone[k] = malloc(n[k] * H * sizeof(float));
        k++;
    }
    assert_int_equal(k, 5);
    tw_err err;
    const uint32_t *const *in = (const uint32_t *const *)ids;
    if (tw_model_encode_batch(f->m, f->pool, k, in, n, got, &err) != TW_OK)
        fail_msg("batch: %s", err.msg);
    /* quantized weights meet activations rounded to 8 bits in short passes
     * and in f32 in long ones, so batched and alone agree only to the
     * weights' rounding there */
    const double apart = tolerance < 1e-3 ? 1e-5 : tolerance;
    for (size_t i = 0; i < k; i++) {
        assert_int_equal(tw_model_encode(f->m, f->pool, ids[i], n[i], alone[i], &err), TW_OK);
        for (size_t x = 0; x < n[i] * H; x++) {
            if (fabs(got[i][x] - alone[i][x]) > apart || fabs(got[i][x] - want[i][x]) > tolerance)
                fail_msg("input %zu, value %zu: %g batched, %g alone, %g wanted", i, x, got[i][x],
                         alone[i][x], want[i][x]);
        }
    }
    /* refusals: no input, too many, more tokens than one pass holds */
    assert_int_equal(tw_model_encode_batch(f->m, f->pool, 0, in, n, got, &err),
                     TW_INVALID_ARGUMENT);
    assert_int_equal(
        tw_model_encode_batch(f->m, f->pool, TW_ENCODE_MAX_INPUTS + 1, in, n, got, &err),
        TW_INVALID_ARGUMENT);
    const size_t rows = tw_model_encode_rows(f->m);
    assert_true(rows >= 128);
    size_t many = rows / n[4] + 1, lens[TW_ENCODE_MAX_INPUTS];
    const uint32_t *same[TW_ENCODE_MAX_INPUTS];
    float *outs[TW_ENCODE_MAX_INPUTS];
    float *big = malloc(many * n[4] * H * sizeof(float));
    for (size_t i = 0; i < many; i++) {
        same[i] = ids[4];
        lens[i] = n[4];
        outs[i] = big + i * n[4] * H;
    }
    assert_int_equal(tw_model_encode_batch(f->m, f->pool, many, same, lens, outs, &err),
                     TW_OUT_OF_RANGE);
    assert_non_null(strstr(err.msg, "one pass"));
    /* one input fewer fits, and each copy reads the same (to rounding: the
     * products may split the rows differently) */
    assert_int_equal(tw_model_encode_batch(f->m, f->pool, many - 1, same, lens, outs, &err), TW_OK);
    for (size_t i = 1; i + 1 < many; i++)
        for (size_t x = 0; x < n[4] * H; x++)
            assert_true(fabs(outs[i][x] - outs[0][x]) <= 1e-5);
    free(big);
    for (size_t i = 0; i < k; i++) {
        free(ids[i]);
        free(got[i]);
        free(alone[i]);
        free(want[i]);
    }
}

/* A token sees the tokens after it: changing the last token changes the
 * first one's state (a causal pass would leave it). */
static void test_bidirectional(void **state)
{
    const fixture *f = *state;
    const size_t H = tw_model_get_info(f->m)->hidden;
    uint32_t a[4] = {2, 50, 60, 3}, b[4] = {2, 50, 61, 3};
    float ha[4 * 96], hb[4 * 96];
    tw_err err;
    assert_int_equal(H, 96);
    assert_int_equal(tw_model_encode(f->m, f->pool, a, 4, ha, &err), TW_OK);
    assert_int_equal(tw_model_encode(f->m, f->pool, b, 4, hb, &err), TW_OK);
    assert_memory_not_equal(ha, hb, H * sizeof(float));
}

static void test_refusals(void **state)
{
    const fixture *f = *state;
    tw_err err;
    uint32_t ids[130] = {0};
    float *out = calloc(130 * 96, sizeof(float));
    assert_int_equal(tw_model_encode(f->m, f->pool, ids, 0, out, &err), TW_OUT_OF_RANGE);
    assert_int_equal(tw_model_encode(f->m, f->pool, ids, 129, out, &err), TW_OUT_OF_RANGE);
    assert_non_null(strstr(err.msg, "1 to 128"));
    ids[5] = 1200;
    assert_int_equal(tw_model_encode(f->m, f->pool, ids, 8, out, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "outside the vocabulary"));
    assert_int_equal(tw_model_encode(f->m, f->pool, NULL, 8, out, &err), TW_INVALID_ARGUMENT);

    /* the sequence calls refuse an encoder */
    tw_seq *seq;
    assert_int_equal(tw_seq_create(f->m, 16, &seq, &err), TW_OK);
    uint32_t t = 5;
    assert_int_equal(tw_model_forward(f->m, f->pool, seq, &t, 1, out, TW_LOGITS_LAST, &err),
                     TW_FAILED_PRECONDITION);
    assert_non_null(strstr(err.msg, "encoder"));
    assert_int_equal(tw_model_decode_batch(f->m, f->pool, &seq, &t, 1, out, &err),
                     TW_FAILED_PRECONDITION);
    tw_seq_free(seq);
    free(out);
}

/* A config an encoder cannot be read from: each refused with a message. */
static void test_bad_configs(void **state)
{
    (void)state;
    static const struct {
        const char *key, *value, *want;
    } cases[] = {
        {"position_embedding_type", "\"relative_key\"", "position_embedding_type"},
        {"hidden_act", "\"swish\"", "hidden_act"},
        {"is_decoder", "true", "decoder"},
        {"type_vocab_size", "0", "encoder sizes"},
        {"head_dim", "16", "encoder sizes"},
        {"max_position_embeddings", "64", "does not match"},
    };
    char src[1024], path[1024];
    snprintf(src, sizeof src, "%s/model.safetensors", golden_dir);
    size_t wlen;
    char *weights = tw_test_read_file(src, &wlen);
    assert_non_null(weights);
    snprintf(src, sizeof src, "%s/config.json", golden_dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *cfg = json_load_file(src, 0, NULL);
        assert_non_null(cfg);
        assert_int_equal(json_object_set_new(cfg, cases[i].key,
                                             json_loads(cases[i].value, JSON_DECODE_ANY, NULL)),
                         0);
        char *dir = tw_test_mkdtemp();
        snprintf(path, sizeof path, "%s/config.json", dir);
        assert_int_equal(json_dump_file(cfg, path, 0), 0);
        json_decref(cfg);
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        assert_true(tw_test_write_file(path, weights, wlen));
        tw_model *m = NULL;
        tw_err err;
        tw_status st = tw_model_load(dir, NULL, &m, &err);
        if (st == TW_OK || !strstr(err.msg, cases[i].want))
            fail_msg("case %zu (%s): status %d, \"%s\"", i, cases[i].key, (int)st,
                     st ? err.msg : "");
        tw_test_rmtree(dir);
        free(dir);
    }
    free(weights);
}

/* GOLDEN_DIR alone: the checkpoint itself, to 1e-4, and its config's
 * refusals. GOLDEN_DIR MODEL TOLERANCE: a GGUF written from it, held to
 * TOLERANCE (its weights may be rounded); a GGUF has no config to break. */
int main(int argc, char **argv)
{
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: %s GOLDEN_DIR [MODEL TOLERANCE]\n", argv[0]);
        return 2;
    }
    golden_dir = model_path = argv[1];
    if (argc == 4) {
        model_path = argv[2];
        tolerance = strtod(argv[3], NULL);
        if (!(tolerance > 0))
            return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info),     cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_batch),    cmocka_unit_test(test_bidirectional),
        cmocka_unit_test(test_refusals), cmocka_unit_test(test_bad_configs),
    };
    const size_t n = sizeof tests / sizeof tests[0] - (argc == 4 ? 1 : 0);
    return _cmocka_run_group_tests(model_path, tests, n, setup, teardown);
}
