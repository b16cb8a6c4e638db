/* /v1/embeddings over real HTTP on the real engine serving the shipped
 * model: vectors of the model's hidden size at unit length, in input order;
 * a text and its tokens giving the same vector; base64 holding the same
 * float32 values; shortened, mean-pooled and unnormalized forms; usage;
 * the 400s for what cannot be embedded; and, unasked, the pooling the
 * served model's files name.
 *
 * Arguments: the model to serve. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge_fixture.h"
#include "test_support.h"
#include "tw/safetensors.h"

static const char *model_path;

static json_t *embeddings(twb_service *s, const char *body)
{
    twb_result r = twb_http(s, "POST", "/v1/embeddings", body, SIZE_MAX);
    return twb_ok_json(&r, body);
}

static const json_t *vector_of(const json_t *answer, size_t i)
{
    const json_t *item = json_array_get(json_object_get(answer, "data"), i);
    assert_string_equal(json_string_value(json_object_get(item, "object")), "embedding");
    assert_int_equal(json_integer_value(json_object_get(item, "index")), i);
    return json_object_get(item, "embedding");
}

static double length_of(const json_t *v)
{
    double n = 0;
    for (size_t d = 0; d < json_array_size(v); d++)
        n += json_real_value(json_array_get(v, d)) * json_real_value(json_array_get(v, d));
    return sqrt(n);
}

static void expect_400(twb_service *s, const char *body, const char *param)
{
    twb_result r = twb_http(s, "POST", "/v1/embeddings", body, SIZE_MAX);
    json_t *j = json_loads(r.body ? r.body : "", 0, NULL);
    const char *got = json_string_value(json_object_get(json_object_get(j, "error"), "param"));
    if (r.status != 400 || (param && (!got || strcmp(got, param) != 0)))
        fail_msg("%s: %ld %s; wanted 400 naming %s", body, r.status, r.body, param ? param : "-");
    json_decref(j);
    free(r.body);
}

static void test_embeddings(void **state)
{
    (void)state;
    twb_service s;
    twb_start(&s, model_path, NULL, NULL, NULL);

    json_t *a = embeddings(&s, "{\"input\":[\"def add(a, b):\",\"print(42)\",\"def add(a, b):\"]}");
    const json_t *v0 = vector_of(a, 0), *v1 = vector_of(a, 1), *v2 = vector_of(a, 2);
    const size_t H = json_array_size(v0);
    assert_true(H >= 64);
    assert_int_equal(json_array_size(v1), H);
    assert_true(fabs(length_of(v0) - 1) < 1e-5 && fabs(length_of(v1) - 1) < 1e-5);
    assert_true(json_equal(v0, v2));
    assert_false(json_equal(v0, v1));
    assert_string_equal(json_string_value(json_object_get(a, "object")), "list");
    assert_string_equal(json_string_value(json_object_get(a, "model")), "tokenwire-coder-24m-q8_0");

    /* the text's tokens (special ones included, as the text is read)
     * give the same vector; usage counts them */
    twb_result t =
        twb_http(&s, "POST", "/tokenize",
                 "{\"prompt\":\"def add(a, b):\",\"add_special_tokens\":true}", SIZE_MAX);
    json_t *tj = twb_ok_json(&t, "tokenize");
    const json_t *ids = json_object_get(tj, "tokens");
    json_t *body = json_pack("{s:[O]}", "input", ids);
    char *text = json_dumps(body, JSON_COMPACT);
    json_t *b = embeddings(&s, text);
    assert_true(json_equal(vector_of(b, 0), v0));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(b, "usage"), "prompt_tokens")),
        json_array_size(ids));
    const json_int_t usage3 =
        json_integer_value(json_object_get(json_object_get(a, "usage"), "prompt_tokens"));
    assert_true(usage3 > 2 * (json_int_t)json_array_size(ids));
    free(text);
    json_decref(body);
    json_decref(b);
    json_decref(tj);

    /* base64: the same float32 values, little-endian */
    b = embeddings(&s, "{\"input\":\"def add(a, b):\",\"encoding_format\":\"base64\"}");
    const char *b64 = json_string_value(vector_of(b, 0));
    assert_non_null(b64);
    unsigned char *raw = malloc(strlen(b64));
    int n = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)strlen(b64));
    assert_true(n >= (int)(H * sizeof(float)));
    for (size_t d = 0; d < H; d++) {
        float f;
        memcpy(&f, raw + d * sizeof f, sizeof f);
        if (f != (float)json_real_value(json_array_get(v0, d)))
            fail_msg("base64 element %zu: %g against %g", d, f,
                     json_real_value(json_array_get(v0, d)));
    }
    free(raw);
    json_decref(b);

    /* shortened: the first numbers at unit length again */
    b = embeddings(&s, "{\"input\":\"def add(a, b):\",\"dimensions\":8}");
    const json_t *short8 = vector_of(b, 0);
    assert_int_equal(json_array_size(short8), 8);
    double head = 0;
    for (size_t d = 0; d < 8; d++)
        head += pow(json_real_value(json_array_get(v0, d)), 2);
    for (size_t d = 0; d < 8; d++)
        assert_true(fabs(json_real_value(json_array_get(short8, d)) -
                         json_real_value(json_array_get(v0, d)) / sqrt(head)) < 1e-6);
    json_decref(b);

    /* unnormalized: the same direction, its own length; mean pooling is
     * another vector */
    b = embeddings(&s, "{\"input\":\"def add(a, b):\",\"normalize\":false}");
    const json_t *raw_v = vector_of(b, 0);
    const double len = length_of(raw_v);
    assert_true(fabs(len - 1) > 1e-3);
    for (size_t d = 0; d < H; d++)
        assert_true(fabs(json_real_value(json_array_get(raw_v, d)) / len -
                         json_real_value(json_array_get(v0, d))) < 1e-5);
    json_decref(b);
    b = embeddings(&s, "{\"input\":\"def add(a, b):\",\"pooling\":\"mean\"}");
    assert_false(json_equal(vector_of(b, 0), v0));
    assert_true(fabs(length_of(vector_of(b, 0)) - 1) < 1e-5);
    json_decref(b);
    json_decref(a);

    expect_400(&s, "{\"model\":\"x\"}", "input");
    expect_400(&s, "{\"input\":[]}", "input");
    expect_400(&s, "{\"input\":\"\"}", "input");
    expect_400(&s, "{\"input\":[\"a\",\"\"]}", "input[1]");
    expect_400(&s, "{\"input\":[\"a\",7]}", "input[1]");
    expect_400(&s, "{\"input\":[[1,-2]]}", "input[0][1]");
    expect_400(&s, "{\"input\":[[]]}", "input[0]");
    expect_400(&s, "{\"input\":{}}", "input");
    expect_400(&s, "{\"input\":\"a\",\"encoding_format\":\"hex\"}", "encoding_format");
    expect_400(&s, "{\"input\":\"a\",\"pooling\":\"max\"}", "pooling");
    expect_400(&s, "{\"input\":\"a\",\"dimensions\":0}", "dimensions");
    expect_400(&s, "{\"input\":\"a\",\"dimensions\":100000}", "dimensions");
    expect_400(&s, "{\"input\":[[99999999]]}", NULL);
    /* the shipped model's file names no pooling: /v1/models says none */
    twb_result r = twb_http(&s, "GET", "/v1/models", NULL, SIZE_MAX);
    json_t *models = twb_ok_json(&r, "models");
    assert_null(json_object_get(json_array_get(json_object_get(models, "data"), 0), "pooling"));
    json_decref(models);
    twb_stop(&s);
}

/* Unasked, the pooling is the one the served model's files name: a
 * checkpoint whose config names the mean answers a request that names none
 * with the mean's vector, and one that names the last token with another. */
static void test_model_pooling(void **state)
{
    (void)state;
    if (!tw_test_shared_dir()) {
        tw_test_print_skip();
        skip();
    }
    char *dir = tw_test_mkdtemp();
    assert_non_null(dir);
    assert_int_equal(tw_test_golden_checkpoint(dir, "mean", "mean", NULL), 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/mean", dir);
    twb_service s;
    twb_start(&s, path, NULL, NULL, NULL);
    json_t *unasked = embeddings(&s, "{\"input\":[[5,6,7,8,9]]}");
    json_t *mean = embeddings(&s, "{\"input\":[[5,6,7,8,9]],\"pooling\":\"mean\"}");
    json_t *last = embeddings(&s, "{\"input\":[[5,6,7,8,9]],\"pooling\":\"last\"}");
    assert_true(json_array_size(vector_of(unasked, 0)) > 0);
    assert_true(json_equal(vector_of(unasked, 0), vector_of(mean, 0)));
    assert_false(json_equal(vector_of(unasked, 0), vector_of(last, 0)));
    /* and /v1/models says so */
    twb_result r = twb_http(&s, "GET", "/v1/models", NULL, SIZE_MAX);
    json_t *models = twb_ok_json(&r, "models");
    const json_t *m0 = json_array_get(json_object_get(models, "data"), 0);
    assert_string_equal(json_string_value(json_object_get(m0, "pooling")), "mean");
    json_decref(models);
    json_decref(unasked);
    json_decref(mean);
    json_decref(last);
    twb_stop(&s);
    tw_test_rmtree(dir);
    free(dir);
}

/* Row `name` of the encoder's reference file scaled to unit length. */
static void reference_unit(const char *name, float *out, size_t n)
{
    tw_st_file *g;
    tw_err err;
    assert_int_equal(tw_st_open(TW_BERT_DIR "/golden.safetensors", &g, &err), TW_OK);
    const tw_st_tensor *t = tw_st_find(g, name);
    assert_non_null(t);
    assert_int_equal(t->n_elems, n);
    assert_int_equal(tw_st_to_f32(t, out, n, &err), TW_OK);
    tw_st_close(g);
    double len = 0;
    for (size_t d = 0; d < n; d++)
        len += (double)out[d] * out[d];
    for (size_t d = 0; d < n; d++)
        out[d] = (float)(out[d] / sqrt(len));
}

static void expect_vector(const json_t *v, const char *reference)
{
    float want[96];
    assert_int_equal(json_array_size(v), 96);
    reference_unit(reference, want, 96);
    for (size_t d = 0; d < 96; d++)
        if (fabs(json_real_value(json_array_get(v, d)) - want[d]) > 1e-4)
            fail_msg("%s, dimension %zu: %g against %g", reference, d,
                     json_real_value(json_array_get(v, d)), want[d]);
}

/* An encoder (the shipped random-weight BERT with its WordPiece tokenizer)
 * served whole: a text's vector is what transformers computed for it,
 * pooled by the model's own CLS unasked, by the mean when asked; /v1/models
 * says cls; an input past its position table, or a chat answer, is refused
 * with the reason. */
static void test_encoder(void **state)
{
    (void)state;
    twb_service s;
    twb_start(&s, TW_BERT_DIR, NULL, NULL, NULL);
    json_t *a = embeddings(&s, "{\"input\":[\"Hello world\",\"a\"]}");
    expect_vector(vector_of(a, 0), "cls_0");
    expect_vector(vector_of(a, 1), "cls_3");
    /* [CLS] hello world [SEP]: the tokenizer's special tokens are counted */
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(a, "usage"), "prompt_tokens")), 8 + 3);
    json_t *m = embeddings(&s, "{\"input\":\"Hello world\",\"pooling\":\"mean\"}");
    expect_vector(vector_of(m, 0), "mean_0");
    json_t *c = embeddings(&s, "{\"input\":\"Hello world\",\"pooling\":\"cls\"}");
    assert_true(json_equal(vector_of(c, 0), vector_of(a, 0)));
    json_decref(a);
    json_decref(m);
    json_decref(c);

    twb_result r = twb_http(&s, "GET", "/v1/models", NULL, SIZE_MAX);
    json_t *models = twb_ok_json(&r, "models");
    const json_t *m0 = json_array_get(json_object_get(models, "data"), 0);
    assert_string_equal(json_string_value(json_object_get(m0, "pooling")), "cls");
    assert_true(json_is_true(json_object_get(m0, "encoder")));
    json_decref(models);

    /* 40 inputs, sixteen at a time to the engine, which reads the ones
     * waiting together in one pass: each vector is its text's (the passes
     * over more rows may take other products: to rounding) */
    json_t *alone = embeddings(&s, "{\"input\":[\"tokens, [MASK] and caf\u00e9\"]}");
    char many[4096];
    size_t len0 = (size_t)snprintf(many, sizeof many, "{\"input\":[");
    for (int i = 0; i < 40; i++)
        len0 += (size_t)snprintf(many + len0, sizeof many - len0, "%s\"%s\"", i ? "," : "",
                                 i % 2 ? "tokens, [MASK] and caf\u00e9" : "Hello world");
    snprintf(many + len0, sizeof many - len0, "]}");
    json_t *all = embeddings(&s, many);
    assert_int_equal(json_array_size(json_object_get(all, "data")), 40);
    for (size_t i = 0; i < 40; i++) {
        const json_t *got = vector_of(all, i);
        if (i % 2 == 0) {
            expect_vector(got, "cls_0");
            continue;
        }
        const json_t *want = vector_of(alone, 0);
        for (size_t d = 0; d < 96; d++)
            assert_true(fabs(json_real_value(json_array_get(got, d)) -
                             json_real_value(json_array_get(want, d))) < 1e-5);
    }
    json_decref(all);
    json_decref(alone);

    /* 130 words of one piece each, past the 128 positions */
    char body[2048];
    size_t len = (size_t)snprintf(body, sizeof body, "{\"input\":\"");
    for (int i = 0; i < 130; i++)
        len += (size_t)snprintf(body + len, sizeof body - len, "a ");
    snprintf(body + len, sizeof body - len, "\"}");
    r = twb_http(&s, "POST", "/v1/embeddings", body, SIZE_MAX);
    if (r.status != 400 || !r.body || !strstr(r.body, "128"))
        fail_msg("long input: %ld %s", r.status, r.body ? r.body : "");
    free(r.body);
    r = twb_http(&s, "POST", "/v1/chat/completions",
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", SIZE_MAX);
    if (r.status < 400 || r.status >= 500 || !r.body || !strstr(r.body, "encoder"))
        fail_msg("chat on an encoder: %ld %s", r.status, r.body ? r.body : "");
    free(r.body);
    twb_stop(&s);
}

/* A client that hangs up on many inputs stops them: the bridge starts no
 * more and cancels those the engine is reading, so far fewer than all of
 * them reach the engine; the bridge answers the next client as before. */
static void test_hangup_stops_inputs(void **state)
{
    (void)state;
    twb_service s;
    twb_start(&s, model_path, NULL, NULL, NULL);
    enum { INPUTS = 1024, TOKENS = 200 };
    size_t cap = (size_t)INPUTS * TOKENS * 5 + 64, len = 0;
    char *body = malloc(cap);
    assert_non_null(body);
    len += (size_t)snprintf(body + len, cap - len, "{\"input\":[");
    for (int i = 0; i < INPUTS; i++) {
        len += (size_t)snprintf(body + len, cap - len, "%s[", i ? "," : "");
        for (int t = 0; t < TOKENS; t++)
            len += (size_t)snprintf(body + len, cap - len, "%s%d", t ? "," : "",
                                    10 + (i * 31 + t * 7) % 900);
        len += (size_t)snprintf(body + len, cap - len, "]");
    }
    len += (size_t)snprintf(body + len, cap - len, "]}");
    char head[256];
    snprintf(head, sizeof head,
             "POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n",
             len);
    const twb_stats before = twb_engine_stats(&s);
    int fd = twb_connect(&s);
    twb_send_all(fd, head, strlen(head));
    twb_send_all(fd, body, len);
    uint64_t t0 = twb_now_ms();
    while (twb_engine_stats(&s).requests_total < before.requests_total + 8 &&
           twb_now_ms() - t0 < 30000)
        usleep(5000);
    /* the inputs were taken and are being read */
    assert_true(twb_engine_stats(&s).requests_total >= before.requests_total + 8);
    close(fd);
    t0 = twb_now_ms();
    twb_stats after;
    do {
        usleep(100000);
        after = twb_engine_stats(&s);
    } while ((after.running || after.queued) && twb_now_ms() - t0 < 60000);
    assert_int_equal(after.running + after.queued, 0);
    const uint64_t read = after.requests_total - before.requests_total;
    if (read >= INPUTS / 2)
        fail_msg("%llu of %d inputs reached the engine after the client hung up",
                 (unsigned long long)read, INPUTS);
    json_t *a = embeddings(&s, "{\"input\":\"print(42)\"}");
    assert_true(json_array_size(vector_of(a, 0)) > 0);
    json_decref(a);
    free(body);
    twb_stop(&s);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_embeddings, twb_teardown),
        cmocka_unit_test_teardown(test_model_pooling, twb_teardown),
        cmocka_unit_test_teardown(test_encoder, twb_teardown),
        cmocka_unit_test_teardown(test_hangup_stops_inputs, twb_teardown),
    };
    return twb_main(argc, argv, &model_path, tests, sizeof tests / sizeof tests[0]);
}
