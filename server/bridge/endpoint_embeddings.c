/* POST /v1/embeddings: each input is one Generate whose embed options make
 * the engine read it and answer with its pooled hidden state, a few at a
 * time (batch.h), gathered into OpenAI's list in input order. */
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "bridge.h"
#include "hangup.h"
#include "json_field.h"

/* OpenAI's own limit on inputs per request. */
#define MAX_INPUTS 2048

typedef struct embed_input {
    const char *text; /* a text input (borrowed from the body), or NULL */
    uint32_t *ids;    /* a token input */
    size_t n_ids;
} embed_input;

typedef struct embed_job {
    tw_bridge *b;
    tw_bridge_hangup *h; /* a client gone: no more inputs start, those read are cancelled */
    const char *model;
    Tokenwire__V1__EmbedOptions opts;
    bool add_special;
    const embed_input *in;
    /* per input */
    float **vec;
    size_t *dims;
    uint32_t *tokens;
    tw_bridge_apierr *ae;
    tw_status *st;
    char answered_by[TW_BRIDGE_MAX_MODEL_NAME + 1];
} embed_job;

/* A token list of JSON integers 0..2^32-1 into *ids (malloc'd). */
static tw_status token_list(const json_t *arr, const char *path, uint32_t **ids, size_t *n,
                            tw_bridge_apierr *ae)
{
    *ids = NULL;
    *n = json_array_size(arr);
    if (*n == 0)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, path, "invalid_value",
                              "'%s' must not be empty.", path);
    *ids = malloc(*n * sizeof **ids);
    if (!*ids)
        return tw_bridge_fail_no_memory(ae);
    for (size_t i = 0; i < *n; i++) {
        const json_t *v = json_array_get(arr, i);
        json_int_t t = json_integer_value(v);
        if (!json_is_integer(v) || t < 0 || t > (json_int_t)UINT32_MAX) {
            char p[96];
            tw_bridge_path_index(p, sizeof p, path, i, NULL);
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, p, "invalid_value",
                                  "'%s' must be a token id (an integer from 0 to %u).", p,
                                  UINT32_MAX);
        }
        (*ids)[i] = (uint32_t)t;
    }
    return TW_OK;
}

/* input: a string, strings, a token list, or token lists. */
static tw_status parse_inputs(const json_t *input, embed_input **out, size_t *n,
                              tw_bridge_apierr *ae)
{
    *out = NULL;
    *n = 0;
    if (!input || json_is_null(input))
        return tw_bridge_fail_missing(ae, "input");
    const bool one_list = json_is_array(input) && json_array_size(input) > 0 &&
                          json_is_integer(json_array_get(input, 0));
    size_t count = json_is_string(input) || one_list ? 1 : json_array_size(input);
    if (!json_is_string(input) && !json_is_array(input))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "input", "invalid_type",
                              "'input' must be a string, an array of strings, an array of "
                              "token ids or an array of such arrays.");
    if (count == 0 || count > MAX_INPUTS)
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "input", "invalid_value",
                              "'input' must hold 1 to %d inputs.", MAX_INPUTS);
    embed_input *in = calloc(count, sizeof *in);
    if (!in)
        return tw_bridge_fail_no_memory(ae);
    *out = in;
    *n = count;
    if (json_is_string(input)) {
        in[0].text = json_string_value(input);
        if (!in[0].text[0])
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "input", "invalid_value",
                                  "'input' must not be empty.");
        return TW_OK;
    }
    if (one_list)
        return token_list(input, "input", &in[0].ids, &in[0].n_ids, ae);
    for (size_t i = 0; i < count; i++) {
        const json_t *v = json_array_get(input, i);
        char p[64];
        tw_bridge_path_index(p, sizeof p, "input", i, NULL);
        if (json_is_string(v) && json_string_length(v) > 0) {
            in[i].text = json_string_value(v);
        } else if (json_is_array(v)) {
            tw_status st = token_list(v, p, &in[i].ids, &in[i].n_ids, ae);
            if (st != TW_OK)
                return st;
        } else {
            return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, p, "invalid_value",
                                  "'%s' must be a non-empty string or an array of token ids.", p);
        }
    }
    return TW_OK;
}

static void free_inputs(embed_input *in, size_t n)
{
    for (size_t i = 0; in && i < n; i++)
        free(in[i].ids);
    free(in);
}

static void embed_one(size_t i, void *user)
{
    embed_job *j = user;
    const embed_input *in = &j->in[i];
    Tokenwire__V1__GenerateRequest gen = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    Tokenwire__V1__TokenIds ids = TOKENWIRE__V1__TOKEN_IDS__INIT;
    gen.model = (char *)j->model;
    if (in->text) {
        gen.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TEXT;
        gen.text = (char *)in->text;
    } else {
        ids.n_ids = in->n_ids;
        ids.ids = in->ids;
        gen.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
        gen.token_ids = &ids;
    }
    gen.has_add_special_tokens = 1;
    gen.add_special_tokens = j->add_special;
    gen.embed = &j->opts;
    Tokenwire__V1__Request req = TOKENWIRE__V1__REQUEST__INIT;
    req.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    req.generate = &gen;
    if (!tw_bridge_hangup_track(j->h, &req)) {
        j->st[i] = tw_bridge_fail(&j->ae[i], TW_CANCELLED, NULL, NULL, "The client went away.");
        return;
    }
    Tokenwire__V1__Reply *rep = NULL;
    j->st[i] = tw_bridge_engine_call(j->b->engine, &req, false, &rep, &j->ae[i]);
    tw_bridge_hangup_untrack(j->h, &req);
    if (j->st[i] != TW_OK)
        return;
    const Tokenwire__V1__GenerateReply *gr =
        rep->result_case == TOKENWIRE__V1__REPLY__RESULT_GENERATE ? rep->generate : NULL;
    const Tokenwire__V1__Choice *ch = gr && gr->n_choices ? gr->choices[0] : NULL;
    if (!ch || ch->n_embedding == 0) {
        j->st[i] = tw_bridge_fail(&j->ae[i], TW_INTERNAL, NULL, "engine_error",
                                  "The engine answered the embedding without a vector.");
    } else if (!(j->vec[i] = malloc(ch->n_embedding * sizeof(float)))) {
        j->st[i] = tw_bridge_fail_no_memory(&j->ae[i]);
    } else {
        memcpy(j->vec[i], ch->embedding, ch->n_embedding * sizeof(float));
        j->dims[i] = ch->n_embedding;
        j->tokens[i] = gr->usage ? gr->usage->prompt_tokens : 0;
        /* every call answers with the same model; any one names it */
        if (i == 0 && gr->model)
            snprintf(j->answered_by, sizeof j->answered_by, "%s", gr->model);
    }
    tw_wire_free_reply(rep);
}

/* The first `dims` numbers of v, at unit length again when the vectors
 * are normalized (Matryoshka-trained models keep their meaning so). */
static void shorten(float *v, size_t dims, bool normalize)
{
    if (!normalize)
        return;
    double norm = 0;
    for (size_t d = 0; d < dims; d++)
        norm += (double)v[d] * v[d];
    norm = sqrt(norm);
    for (size_t d = 0; norm > 0 && d < dims; d++)
        v[d] = (float)(v[d] / norm);
}

static json_t *vector_json(const float *v, size_t dims, bool base64)
{
    if (base64) {
        /* OpenAI's base64 form: the little-endian float32 bytes */
        char *text = malloc(4 * ((dims * sizeof(float) + 2) / 3) + 1);
        if (!text)
            return NULL;
        EVP_EncodeBlock((unsigned char *)text, (const unsigned char *)v,
                        (int)(dims * sizeof(float)));
        json_t *s = json_string(text);
        free(text);
        return s;
    }
    json_t *a = json_array();
    for (size_t d = 0; a && d < dims; d++)
        if (json_array_append_new(a, json_real(v[d])))
            json_decref(a), a = NULL;
    return a;
}

/* The embed options and the answer's shape from the body's fields. */
static tw_status parse_options(const json_t *root, embed_job *j, long long *dims, bool *base64,
                               tw_bridge_apierr *ae)
{
    const char *s = NULL;
    bool flag;
    *dims = 0;
    *base64 = false;
    tokenwire__v1__embed_options__init(&j->opts);
    j->opts.has_pooling = 1;
    /* unasked, the model's own (its GGUF's pooling_type; the last token's
     * when it names none) */
    j->opts.pooling = TOKENWIRE__V1__POOLING__POOLING_MODEL;
    j->opts.has_normalize = 1;
    j->opts.normalize = 1;
    j->add_special = true;
    int r;
    if ((r = tw_bridge_get_string(root, "model", NULL, TW_BRIDGE_MAX_MODEL_NAME, &j->model, NULL,
                                  ae)) < 0)
        return TW_INVALID_ARGUMENT;
    if ((r = tw_bridge_get_string(root, "encoding_format", NULL, 16, &s, NULL, ae)) < 0)
        return TW_INVALID_ARGUMENT;
    if (r == 1 && strcmp(s, "float") && strcmp(s, "base64"))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "encoding_format", "invalid_value",
                              "'encoding_format' must be 'float' or 'base64'.");
    *base64 = r == 1 && !strcmp(s, "base64");
    if (tw_bridge_get_int(root, "dimensions", NULL, 1, 1 << 20, dims, ae) < 0)
        return TW_INVALID_ARGUMENT;
    if ((r = tw_bridge_get_string(root, "pooling", NULL, 16, &s, NULL, ae)) < 0)
        return TW_INVALID_ARGUMENT;
    if (r == 1 && strcmp(s, "last") && strcmp(s, "mean") && strcmp(s, "cls"))
        return tw_bridge_fail(ae, TW_INVALID_ARGUMENT, "pooling", "invalid_value",
                              "'pooling' must be 'last', 'mean' or 'cls'.");
    if (r == 1)
        j->opts.pooling = !strcmp(s, "mean")  ? TOKENWIRE__V1__POOLING__POOLING_MEAN
                          : !strcmp(s, "cls") ? TOKENWIRE__V1__POOLING__POOLING_CLS
                                              : TOKENWIRE__V1__POOLING__POOLING_LAST;
    if ((r = tw_bridge_get_bool(root, "normalize", NULL, &flag, ae)) < 0)
        return TW_INVALID_ARGUMENT;
    if (r == 1)
        j->opts.normalize = flag;
    if ((r = tw_bridge_get_bool(root, "add_special_tokens", NULL, &flag, ae)) < 0)
        return TW_INVALID_ARGUMENT;
    if (r == 1)
        j->add_special = flag;
    return TW_OK;
}

static json_t *answer(const embed_job *j, size_t n, size_t dims, bool base64)
{
    json_t *data = json_array();
    long long tokens = 0;
    for (size_t i = 0; data && i < n; i++) {
        tokens += j->tokens[i];
        json_t *v = vector_json(j->vec[i], dims ? dims : j->dims[i], base64);
        json_t *item = v ? json_pack("{s:s, s:I, s:o}", "object", "embedding", "index",
                                     (json_int_t)i, "embedding", v)
                         : NULL;
        if (!item || json_array_append_new(data, item))
            json_decref(data), data = NULL;
    }
    if (!data)
        return NULL;
    return json_pack("{s:s, s:o, s:s, s:{s:I, s:I}}", "object", "list", "data", data, "model",
                     j->answered_by, "usage", "prompt_tokens", (json_int_t)tokens, "total_tokens",
                     (json_int_t)tokens);
}

/* How many of a request's inputs go to the engine at once: more for an
 * encoder, which reads the inputs waiting together in one pass. The model
 * is the one named, or the engine's default; asking costs a ListModels,
 * and a failed one leaves the usual width. */
static size_t inputs_in_flight(tw_bridge *b, const char *model)
{
    Tokenwire__V1__Reply *rep = NULL;
    tw_bridge_apierr ae;
    if (tw_bridge_engine_models(b->engine, &rep, &ae) != TW_OK)
        return TW_BRIDGE_BATCH_IN_FLIGHT;
    const Tokenwire__V1__ModelInfo *m = tw_bridge_model_named(rep->list_models, model);
    const bool encoder = m && m->has_encoder && m->encoder;
    tw_wire_free_reply(rep);
    return encoder ? TW_BRIDGE_ENCODER_IN_FLIGHT : TW_BRIDGE_BATCH_IN_FLIGHT;
}

void tw_bridge_ep_embeddings(tw_bridge *b, const tw_bridge_http_req *rq, const tw_bridge_sink *sink,
                             tw_bridge_http_resp *resp)
{
    json_t *root = NULL;
    tw_bridge_apierr ae;
    embed_input *in = NULL;
    size_t n = 0;
    long long dims = 0;
    bool base64 = false;
    embed_job j = {.b = b};
    tw_status st = tw_bridge_parse_body(rq, &root, &ae);
    if (st == TW_OK)
        st = parse_options(root, &j, &dims, &base64, &ae);
    if (st == TW_OK)
        st = parse_inputs(json_object_get(root, "input"), &in, &n, &ae);
    if (st == TW_OK) {
        j.in = in;
        j.vec = calloc(n, sizeof *j.vec);
        j.dims = calloc(n, sizeof *j.dims);
        j.tokens = calloc(n, sizeof *j.tokens);
        j.ae = calloc(n, sizeof *j.ae);
        j.st = calloc(n, sizeof *j.st);
        if (!j.vec || !j.dims || !j.tokens || !j.ae || !j.st)
            st = tw_bridge_fail_no_memory(&ae);
    }
    if (st == TW_OK) {
        /* Watching the connection costs its keep-alive (the answer goes
         * out with Connection: close), so only inputs that take more than
         * one round are watched: those a client may leave behind. */
        const size_t width = n > 1 ? inputs_in_flight(b, j.model) : 1;
        tw_bridge_hangup h;
        tw_bridge_hangup_begin(&h, b, n > width ? sink : NULL);
        j.h = &h;
        tw_bridge_for_each_prompt_at(n, width, embed_one, &j);
        tw_bridge_hangup_end(&h);
        st = tw_bridge_first_failure(j.st, j.ae, n, &ae);
    }
    if (st == TW_OK && dims && (size_t)dims > j.dims[0])
        st = tw_bridge_fail(&ae, TW_INVALID_ARGUMENT, "dimensions", "invalid_value",
                            "'dimensions' is at most %zu for this model.", j.dims[0]);
    for (size_t i = 0; st == TW_OK && dims && i < n; i++)
        shorten(j.vec[i], (size_t)dims, j.opts.normalize);
    json_t *out = st == TW_OK ? answer(&j, n, (size_t)dims, base64) : NULL;
    if (st == TW_OK && !out)
        st = tw_bridge_fail_no_memory(&ae);
    if (st == TW_OK)
        tw_bridge_resp_json(resp, 200, out);
    else
        tw_bridge_resp_error(resp, &ae);
    for (size_t i = 0; j.vec && i < n; i++)
        free(j.vec[i]);
    free(j.vec);
    free(j.dims);
    free(j.tokens);
    free(j.ae);
    free(j.st);
    free_inputs(in, n);
    json_decref(root);
}
