/* Integration tests: the real tokenwired, started as a subprocess on ipc://
 * endpoints in a temporary directory, spoken to through libtokenwire. The
 * daemon must also exit 0 on SIGTERM (under ASan that includes no leaks). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <time.h>

#include <jansson.h>
#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon_fixture.h"
#include "proc_fixture.h"
#include "test_support.h"
#include "tw/kernels.h"

static void daemon_start(twt_daemon *d, const char *const *extra, const char *env_key)
{
    twt_daemon_init(d);
    d->api_key_env = env_key;
    twt_daemon_start(d, extra);
}

static void daemon_stop(twt_daemon *d)
{
    twt_daemon_stop(d);
    twt_daemon_cleanup(d);
}

static tw_client *connect_to(const twt_daemon *d, const char *key)
{
    return twt_connect_key(d, key, 20000);
}

/* Sends raw bytes on a plain REQ socket and decodes the answer. */
static Tokenwire__V1__Reply *raw_call(const twt_daemon *d, const void *buf, size_t len)
{
    nng_socket s;
    assert_int_equal(nng_req0_open(&s), 0);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 10000);
    assert_int_equal(nng_dial(s, d->rpc, NULL, 0), 0);
    assert_int_equal(nng_send(s, (void *)buf, len, 0), 0);
    char *ans = NULL;
    size_t n = 0;
    assert_int_equal(nng_recv(s, &ans, &n, NNG_FLAG_ALLOC), 0);
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_wire_decode_reply((uint8_t *)ans, n, NULL, &rep, &err), TW_OK);
    nng_free(ans, n);
    nng_close(s);
    return rep;
}

static void expect_health_ok(tw_client *c)
{
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_health(c, NULL, &rep, &err), TW_OK);
    assert_int_equal(rep->result_case, TOKENWIRE__V1__REPLY__RESULT_HEALTH);
    tw_wire_free_reply(rep);
}

/* ------------------------------------------------------------ without a model */

static void test_health_and_bad_requests(void **state)
{
    (void)state;
    twt_daemon d;
    daemon_start(&d, NULL, NULL);
    tw_client *c = connect_to(&d, NULL);

    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_health(c, NULL, &rep, &err), TW_OK);
    assert_string_equal(rep->health->state, "loading"); /* no model loaded */
    assert_non_null(rep->health->version);
    assert_int_equal(rep->health->models_ready, 0);
    tw_wire_free_reply(rep);

    /* Garbage bytes: INVALID_ARGUMENT, and the engine goes on serving. */
    const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    rep = raw_call(&d, garbage, sizeof garbage);
    assert_int_equal(rep->status->code, TOKENWIRE__V1__STATUS_CODE__INVALID_ARGUMENT);
    assert_non_null(strstr(rep->status->message, "not a valid protobuf"));
    tw_wire_free_reply(rep);
    expect_health_ok(c);

    /* An empty message is a Request with no method. */
    rep = raw_call(&d, "", 0);
    assert_int_equal(rep->status->code, TOKENWIRE__V1__STATUS_CODE__UNIMPLEMENTED);
    tw_wire_free_reply(rep);

    /* A method this engine does not know (field 40). */
    const uint8_t unknown[] = {0x10, 0x07, 0xc2, 0x02, 0x00};
    rep = raw_call(&d, unknown, sizeof unknown);
    assert_int_equal(rep->status->code, TOKENWIRE__V1__STATUS_CODE__UNIMPLEMENTED);
    assert_int_equal(rep->request_id, 7);
    tw_wire_free_reply(rep);

    /* A newer protocol major version. */
    Tokenwire__V1__HealthRequest h = TOKENWIRE__V1__HEALTH_REQUEST__INIT;
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.has_version = 1;
    r.version = (Tokenwire__V1__ProtocolVersion)2;
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_HEALTH;
    r.health = &h;
    assert_int_equal(tw_client_call(c, &r, &rep, &err), TW_FAILED_PRECONDITION);
    assert_non_null(strstr(err.msg, "newer"));
    tw_wire_free_reply(rep);

    /* Resume of a stream nobody started; Cancel of nothing. */
    Tokenwire__V1__ResumeRequest rr = TOKENWIRE__V1__RESUME_REQUEST__INIT;
    rr.stream_id = "nope";
    assert_int_equal(tw_client_resume(c, &rr, &rep, &err), TW_NOT_FOUND);
    tw_wire_free_reply(rep);
    rr.stream_id = "bad/id";
    assert_int_equal(tw_client_resume(c, &rr, &rep, &err), TW_INVALID_ARGUMENT);
    tw_wire_free_reply(rep);
    Tokenwire__V1__CancelRequest cr = TOKENWIRE__V1__CANCEL_REQUEST__INIT;
    cr.stream_id = "nope";
    assert_int_equal(tw_client_cancel(c, &cr, &rep, &err), TW_OK);
    assert_false(rep->cancel->cancelled);
    tw_wire_free_reply(rep);

    /* Generate without a model, and without a prompt. */
    Tokenwire__V1__GenerateRequest g = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    assert_int_equal(tw_client_generate(c, &g, &rep, &err), TW_INVALID_ARGUMENT);
    tw_wire_free_reply(rep);
    uint32_t ids[] = {1, 2, 3};
    Tokenwire__V1__TokenIds t = TOKENWIRE__V1__TOKEN_IDS__INIT;
    t.n_ids = 3;
    t.ids = ids;
    g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    g.token_ids = &t;
    assert_int_equal(tw_client_generate(c, &g, &rep, &err), TW_NOT_FOUND);
    tw_wire_free_reply(rep);
    /* An output kind from a newer protocol is refused by name, before any
     * model is looked for. */
    Tokenwire__V1__OutputFormat fmt = TOKENWIRE__V1__OUTPUT_FORMAT__INIT;
    fmt.has_kind = 1;
    fmt.kind = (Tokenwire__V1__OutputKind)7;
    g.format = &fmt;
    assert_int_equal(tw_client_generate(c, &g, &rep, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "format.kind 7"));
    tw_wire_free_reply(rep);
    g.format = NULL;

    /* LoadModel of a path that is not a model. */
    Tokenwire__V1__LoadModelRequest lm = TOKENWIRE__V1__LOAD_MODEL_REQUEST__INIT;
    lm.source = d.dir;
    tw_status st = tw_client_load_model(c, &lm, &rep, &err);
    assert_int_not_equal(st, TW_OK);
    assert_true(st != TW_UNAVAILABLE && st != TW_DEADLINE_EXCEEDED);
    tw_wire_free_reply(rep);
    lm.source = "ftp://example.invalid/model.gguf";
    assert_int_equal(tw_client_load_model(c, &lm, &rep, &err), TW_INVALID_ARGUMENT);
    tw_wire_free_reply(rep);
    expect_health_ok(c);

    tw_client_close(c);
    daemon_stop(&d);
}

static void test_auth(void **state)
{
    (void)state;
    twt_daemon d;
    const char *extra[] = {"--api-key", "cli-key", NULL};
    daemon_start(&d, extra, "env-key");
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;

    tw_client *anon = connect_to(&d, NULL);
    assert_int_equal(tw_client_health(anon, NULL, &rep, &err), TW_UNAUTHENTICATED);
    assert_non_null(strstr(err.msg, "missing"));
    assert_null(rep->health);
    tw_wire_free_reply(rep);
    tw_client_close(anon);

    tw_client *wrong = connect_to(&d, "cli-kez");
    assert_int_equal(tw_client_health(wrong, NULL, &rep, &err), TW_UNAUTHENTICATED);
    assert_non_null(strstr(err.msg, "invalid"));
    tw_wire_free_reply(rep);
    tw_client_close(wrong);

    tw_client *cli = connect_to(&d, "cli-key");
    expect_health_ok(cli);
    tw_client_close(cli);
    tw_client *env = connect_to(&d, "env-key");
    expect_health_ok(env);
    tw_client_close(env);
    daemon_stop(&d);
}

static void test_oversized_request(void **state)
{
    (void)state;
    twt_daemon d;
    const char *extra[] = {"--max-message-bytes", "4096", NULL};
    daemon_start(&d, extra, NULL);
    tw_client *c = connect_to(&d, NULL);
    char text[10000];
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = '\0';
    Tokenwire__V1__TokenizeRequest t = TOKENWIRE__V1__TOKENIZE_REQUEST__INIT;
    t.text = text;
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_tokenize(c, &t, &rep, &err), TW_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(err.msg, "limit"));
    tw_wire_free_reply(rep);
    expect_health_ok(c);
    tw_client_close(c);
    daemon_stop(&d);
}

typedef struct hammer_arg {
    tw_client *c;
    int ok;
} hammer_arg;

static void *hammer(void *p)
{
    hammer_arg *a = p;
    for (int i = 0; i < 25; i++) {
        Tokenwire__V1__Reply *rep = NULL;
        if (tw_client_health(a->c, NULL, &rep, NULL) == TW_OK &&
            rep->result_case == TOKENWIRE__V1__REPLY__RESULT_HEALTH)
            a->ok++;
        tw_wire_free_reply(rep);
    }
    return NULL;
}

static void test_concurrent_callers(void **state)
{
    (void)state;
    twt_daemon d;
    daemon_start(&d, NULL, NULL);
    tw_client *c = connect_to(&d, NULL);
    pthread_t th[8];
    hammer_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (hammer_arg){c, 0};
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &args[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].ok, 25);
    }
    tw_client_close(c);
    daemon_stop(&d);
}

/* ------------------------------------------------------------ with the golden model */

typedef struct golden {
    uint32_t input[64];
    size_t n_input;
    uint32_t greedy[64];
    size_t n_greedy;
} golden;

static void read_ids(json_t *arr, uint32_t *out, size_t cap, size_t *n)
{
    assert_true(json_is_array(arr));
    *n = json_array_size(arr);
    assert_true(*n > 0 && *n <= cap);
    for (size_t i = 0; i < *n; i++)
        out[i] = (uint32_t)json_integer_value(json_array_get(arr, i));
}

static void load_golden(const char *shared, golden *g, char *model_dir, size_t cap)
{
    snprintf(model_dir, cap, "%s/golden/qwen2", shared);
    char path[1200];
    snprintf(path, sizeof path, "%s/golden.json", model_dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    assert_non_null(root);
    read_ids(json_object_get(root, "input_ids"), g->input, 64, &g->n_input);
    read_ids(json_object_get(root, "greedy_ids"), g->greedy, 64, &g->n_greedy);
    json_decref(root);
}

static void greedy_request(const golden *gd, Tokenwire__V1__GenerateRequest *g,
                           Tokenwire__V1__TokenIds *t, Tokenwire__V1__SamplingParams *sp,
                           Tokenwire__V1__StopRules *stop)
{
    tokenwire__v1__generate_request__init(g);
    tokenwire__v1__token_ids__init(t);
    tokenwire__v1__sampling_params__init(sp);
    tokenwire__v1__stop_rules__init(stop);
    t->n_ids = gd->n_input;
    t->ids = (uint32_t *)gd->input;
    sp->has_temperature = 1;
    sp->temperature = 0;
    stop->has_max_tokens = 1;
    stop->max_tokens = (uint32_t)gd->n_greedy;
    stop->has_ignore_eos = 1;
    stop->ignore_eos = 1;
    g->prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    g->token_ids = t;
    g->sampling = sp;
    g->stop = stop;
}

typedef struct collected {
    uint32_t ids[256];
    size_t n;
    float lps[256], prompt_lps[256]; /* NaN: none sent */
    size_t n_lps, n_prompt_lps;
    int prompt_chunks;
    uint64_t last_seq;
    int chunks;
    int finals;
    uint64_t emitted[256]; /* each chunk's emitted_unix_us, 0 when absent */
} collected;

static uint64_t unix_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Every chunk says when it was handed over, in order, within [from, to]. */
static void check_emitted(const collected *c, uint64_t from, uint64_t to)
{
    assert_true(c->chunks > 0 && c->chunks <= 256);
    for (int i = 0; i < c->chunks; i++) {
        if (c->emitted[i] < from || c->emitted[i] > to)
            fail_msg("chunk %d emitted at %llu, outside [%llu, %llu]", i,
                     (unsigned long long)c->emitted[i], (unsigned long long)from,
                     (unsigned long long)to);
        if (i && c->emitted[i] < c->emitted[i - 1])
            fail_msg("chunk %d emitted before chunk %d", i, i - 1);
    }
}

static int collect(void *user, const Tokenwire__V1__StreamChunk *ch)
{
    collected *c = user;
    if (c->chunks > 0 && ch->seq != c->last_seq + 1)
        return 1; /* out of order: cancel, which fails the test */
    c->last_seq = ch->seq;
    if (c->chunks < 256)
        c->emitted[c->chunks] = ch->has_emitted_unix_us ? ch->emitted_unix_us : 0;
    c->chunks++;
    for (size_t i = 0; i < ch->n_token_ids && c->n < 256; i++)
        c->ids[c->n++] = ch->token_ids[i];
    for (size_t i = 0; i < ch->n_logprobs && c->n_lps < 256; i++)
        c->lps[c->n_lps++] = ch->logprobs[i]->logprob;
    if (ch->n_prompt_logprobs)
        c->prompt_chunks++;
    for (size_t i = 0; i < ch->n_prompt_logprobs && c->n_prompt_lps < 256; i++)
        c->prompt_lps[c->n_prompt_lps++] =
            ch->prompt_logprobs[i]->has_logprob ? ch->prompt_logprobs[i]->logprob : NAN;
    if (ch->final)
        c->finals++;
    return 0;
}

/* Log-probabilities of the answer (two alternatives each) and of the
 * prompt, whole and streamed: one per token, the greedy token first among
 * its alternatives, the prompt's first token without one, the same numbers
 * both ways. */
static void check_logprobs(tw_client *c, const golden *gd, Tokenwire__V1__GenerateRequest *g)
{
    Tokenwire__V1__LogprobOptions lo = TOKENWIRE__V1__LOGPROB_OPTIONS__INIT;
    lo.has_enabled = lo.has_top_logprobs = lo.has_prompt_logprobs = 1;
    lo.enabled = 1;
    lo.top_logprobs = 2;
    lo.prompt_logprobs = 1;
    g->logprobs = &lo;
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_generate(c, g, &rep, &err), TW_OK);
    const Tokenwire__V1__GenerateReply *gr = rep->generate;
    const Tokenwire__V1__Choice *ch = gr->choices[0];
    assert_int_equal(ch->n_logprobs, gd->n_greedy);
    for (size_t i = 0; i < gd->n_greedy; i++) {
        const Tokenwire__V1__TokenLogprob *lp = ch->logprobs[i];
        assert_int_equal(lp->token_id, gd->greedy[i]);
        assert_true(lp->has_logprob && lp->logprob <= 0.0f);
        assert_int_equal(lp->n_top, 2);
        assert_int_equal(lp->top[0]->token_id, gd->greedy[i]);
        assert_true(lp->top[1]->logprob <= lp->top[0]->logprob);
    }
    assert_int_equal(gr->n_prompt_logprobs, gd->n_input);
    assert_false(gr->prompt_logprobs[0]->has_logprob);
    for (size_t i = 0; i < gd->n_input; i++) {
        assert_int_equal(gr->prompt_logprobs[i]->token_id, gd->input[i]);
        if (i)
            assert_true(gr->prompt_logprobs[i]->has_logprob &&
                        gr->prompt_logprobs[i]->logprob <= 0.0f);
    }

    collected col;
    memset(&col, 0, sizeof col);
    char sid[TW_WIRE_STREAM_ID_MAX + 1];
    assert_int_equal(tw_client_generate_stream(c, g, collect, &col, sid, &err), TW_OK);
    assert_int_equal(col.prompt_chunks, 1);
    assert_int_equal(col.n_lps, gd->n_greedy);
    assert_int_equal(col.n_prompt_lps, gd->n_input);
    assert_true(isnan(col.prompt_lps[0]));
    for (size_t i = 0; i < gd->n_greedy; i++)
        assert_true(col.lps[i] == ch->logprobs[i]->logprob);
    for (size_t i = 1; i < gd->n_input; i++)
        assert_true(col.prompt_lps[i] == gr->prompt_logprobs[i]->logprob);
    tw_wire_free_reply(rep);
    g->logprobs = NULL;
}

/* The reference greedy tokens, non-streamed, streamed and resumed, with
 * the sequences' K/V stored as kv_type ("f32" or "f16": the reference
 * margins are far above the rounding of K and V to half), on the kernels
 * of isa ("auto": the widest the CPU has). */
static void generate_golden(const char *shared, const char *kv_type, const char *isa)
{
    golden gd;
    char model_dir[1024];
    load_golden(shared, &gd, model_dir, sizeof model_dir);
    twt_daemon d;
    const char *extra[] = {"--model",   model_dir, "--model-name", "qwen2", "--threads", "2",
                           "--kv-type", kv_type,   "--isa",        isa,     NULL};
    daemon_start(&d, extra, NULL);
    tw_client *c = connect_to(&d, NULL);
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;

    Tokenwire__V1__GenerateRequest g;
    Tokenwire__V1__TokenIds t;
    Tokenwire__V1__SamplingParams sp;
    Tokenwire__V1__StopRules stop;
    greedy_request(&gd, &g, &t, &sp, &stop);

    /* Non-streaming. */
    assert_int_equal(tw_client_generate(c, &g, &rep, &err), TW_OK);
    assert_int_equal(rep->generate->n_choices, 1);
    const Tokenwire__V1__Choice *ch = rep->generate->choices[0];
    assert_int_equal(ch->n_token_ids, gd.n_greedy);
    assert_memory_equal(ch->token_ids, gd.greedy, gd.n_greedy * sizeof(uint32_t));
    assert_int_equal(ch->finish_reason, TOKENWIRE__V1__FINISH_REASON__FINISH_LENGTH);
    assert_string_equal(rep->generate->model, "qwen2");
    assert_int_equal(rep->generate->usage->prompt_tokens, gd.n_input);
    tw_wire_free_reply(rep);

    check_logprobs(c, &gd, &g);

    /* Streaming: the same tokens, in order, exactly once. */
    collected col;
    memset(&col, 0, sizeof col);
    char sid[TW_WIRE_STREAM_ID_MAX + 1];
    uint64_t asked = unix_us();
    assert_int_equal(tw_client_generate_stream(c, &g, collect, &col, sid, &err), TW_OK);
    check_emitted(&col, asked, unix_us());
    assert_int_equal(col.finals, 1);
    assert_int_equal(col.n, gd.n_greedy);
    assert_memory_equal(col.ids, gd.greedy, gd.n_greedy * sizeof(uint32_t));

    /* Resume after reading nothing: start a stream nobody subscribed to,
     * then fetch every chunk over REQ/REP. */
    g.has_stream = 1;
    g.stream = 1;
    g.stream_id = "unread-1";
    Tokenwire__V1__Request r = TOKENWIRE__V1__REQUEST__INIT;
    r.method_case = TOKENWIRE__V1__REQUEST__METHOD_GENERATE;
    r.generate = &g;
    asked = unix_us();
    assert_int_equal(tw_client_call(c, &r, &rep, &err), TW_OK);
    assert_string_equal(rep->generate->stream_id, "unread-1");
    tw_wire_free_reply(rep);
    /* The same id again while it is held: refused. */
    assert_int_equal(tw_client_call(c, &r, &rep, &err), TW_ALREADY_EXISTS);
    tw_wire_free_reply(rep);
    memset(&col, 0, sizeof col);
    bool finished = false;
    for (int round = 0; round < 200 && !finished; round++) {
        Tokenwire__V1__ResumeRequest rr = TOKENWIRE__V1__RESUME_REQUEST__INIT;
        rr.stream_id = "unread-1";
        rr.has_from_seq = 1;
        rr.from_seq = col.chunks ? col.last_seq + 1 : 0;
        rr.has_wait_ms = 1;
        rr.wait_ms = 2000;
        assert_int_equal(tw_client_resume(c, &rr, &rep, &err), TW_OK);
        assert_false(rep->resume->expired);
        for (size_t i = 0; i < rep->resume->n_chunks; i++)
            assert_int_equal(collect(&col, rep->resume->chunks[i]), 0);
        finished = rep->resume->finished;
        tw_wire_free_reply(rep);
    }
    assert_true(finished);
    check_emitted(&col, asked, unix_us());
    assert_int_equal(col.finals, 1);
    assert_int_equal(col.n, gd.n_greedy);
    assert_memory_equal(col.ids, gd.greedy, gd.n_greedy * sizeof(uint32_t));
    /* Everything is still there for a late reader, with the times the
     * chunks were first handed over. */
    Tokenwire__V1__ResumeRequest again = TOKENWIRE__V1__RESUME_REQUEST__INIT;
    again.stream_id = "unread-1";
    assert_int_equal(tw_client_resume(c, &again, &rep, &err), TW_OK);
    assert_int_equal(rep->resume->n_chunks, (size_t)col.chunks);
    assert_int_equal(rep->resume->chunks[0]->seq, 0);
    for (size_t i = 0; i < rep->resume->n_chunks; i++)
        assert_int_equal(rep->resume->chunks[i]->emitted_unix_us, col.emitted[i]);
    tw_wire_free_reply(rep);

    tw_client_close(c);
    /* the engine says how it stores K/V when the model loads */
    char *text = tw_test_read_file(d.log, NULL);
    char want[64];
    snprintf(want, sizeof want, "%s KV per token", kv_type);
    assert_non_null(text);
    if (!strstr(text, want))
        fail_msg("the load log does not mention \"%s\": %s", want, text);
    /* and which kernels it runs, and why */
    if (strcmp(isa, "auto") != 0)
        snprintf(want, sizeof want, "kernels %s (set by --isa; this CPU has %s)", isa,
                 tw_kernels_isa());
    else
        snprintf(want, sizeof want, "kernels %s (auto", tw_kernels_isa());
    if (!strstr(text, want))
        fail_msg("the start log does not say \"%s\": %s", want, text);
    free(text);
    daemon_stop(&d);
}

static void test_generate_golden(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    generate_golden(shared, "f32", "auto");
}

/* --verbose logs each Generate's end-user id, its bytes made safe for a
 * log line and cut to 48. */
static void test_verbose_logs_user(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    golden gd;
    char model_dir[1024];
    load_golden(shared, &gd, model_dir, sizeof model_dir);
    twt_daemon d;
    const char *extra[] = {"--model", model_dir, "--threads", "2", "--verbose", NULL};
    daemon_start(&d, extra, NULL);
    tw_client *c = connect_to(&d, NULL);
    Tokenwire__V1__GenerateRequest g;
    Tokenwire__V1__TokenIds t;
    Tokenwire__V1__SamplingParams sp;
    Tokenwire__V1__StopRules stop;
    greedy_request(&gd, &g, &t, &sp, &stop);
    stop.max_tokens = 1;
    char user[80];
    snprintf(user, sizeof user, "alice\nrequest 1: forged%060d", 7);
    g.user = user;
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_generate(c, &g, &rep, &err), TW_OK);
    tw_wire_free_reply(rep);
    tw_client_close(c);
    twt_daemon_stop(&d);
    char *text = tw_test_read_file(d.log, NULL);
    assert_non_null(text);
    char want[96];
    user[5] = '?';
    snprintf(want, sizeof want, "(user \"%.48s\"...)", user);
    if (!strstr(text, want))
        fail_msg("no %s in the log: %s", want,
                 text + (strlen(text) > 600 ? strlen(text) - 600 : 0));
    assert_null(strstr(text, "\nrequest 1: forged"));
    free(text);
    twt_daemon_cleanup(&d);
}

static void test_generate_kv_f16(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    generate_golden(shared, "f16", "auto");
}

/* --isa runs narrower kernels than the CPU's widest, to the same reference
 * tokens, and says so; an ISA the CPU lacks is refused at start, named. */
static void test_generate_narrower_isa(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    const char *widest = tw_kernels_isa();
    const char *narrower =
        strcmp(widest, "avx512") == 0 || strcmp(widest, "avx2vnni") == 0 ? "avx2" : "scalar";
    generate_golden(shared, "f16", narrower);
    if (tw_kernels_isa_available("avx512"))
        return;
    char prog[4096];
    tw_test_build_path(prog, sizeof prog, "server/engine/tokenwired");
    char *dir = tw_test_mkdtemp();
    char log[4200];
    snprintf(log, sizeof log, "%s/out.log", dir);
    const char *argv[] = {prog, "--isa", "avx512", NULL};
    tw_test_spawn_opts o = {.log_path = log, .stdin_null = true};
    assert_int_equal(tw_test_run(argv, &o, 10000), 2);
    char *text = tw_test_read_file(log, NULL);
    assert_non_null(text);
    if (!strstr(text, "cannot run the avx512 kernels"))
        fail_msg("--isa avx512 on an AVX2 CPU: %s", text);
    free(text);
    tw_test_rmtree(dir);
    free(dir);
}

/* --quantize q8_0: a Hugging Face checkpoint (the shipped qwen3_deep) is
 * served quantized, which the model list says, and answers. */
static void test_quantize_at_load(void **state)
{
    (void)state;
    char model_dir[1024];
    snprintf(model_dir, sizeof model_dir, "%s/tests/data/golden/qwen3_deep",
             getenv("TW_SOURCE_DIR") ? getenv("TW_SOURCE_DIR") : ".");
    twt_daemon d;
    const char *extra[] = {"--model", model_dir,    "--model-name", "q", "--threads",
                           "2",       "--quantize", "q8_0",         NULL};
    daemon_start(&d, extra, NULL);
    tw_client *c = connect_to(&d, NULL);
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_list_models(c, NULL, &rep, &err), TW_OK);
    assert_int_equal(rep->list_models->n_models, 1);
    assert_string_equal(rep->list_models->models[0]->weight_type, "Q8_0");
    tw_wire_free_reply(rep);

    Tokenwire__V1__GenerateRequest g = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    Tokenwire__V1__TokenIds t = TOKENWIRE__V1__TOKEN_IDS__INIT;
    uint32_t ids[4] = {5, 6, 7, 8};
    t.n_ids = 4;
    t.ids = ids;
    g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    g.token_ids = &t;
    Tokenwire__V1__StopRules stop = TOKENWIRE__V1__STOP_RULES__INIT;
    stop.has_max_tokens = 1;
    stop.max_tokens = 4;
    g.stop = &stop;
    assert_int_equal(tw_client_generate(c, &g, &rep, &err), TW_OK);
    assert_int_equal(rep->generate->choices[0]->n_token_ids, 4);
    tw_wire_free_reply(rep);
    tw_client_close(c);
    daemon_stop(&d);
}

/* Settings with a fixed set of values refuse anything else at start, with
 * the setting named and a non-zero exit, before serving anything. */
static void test_bad_setting_values(void **state)
{
    (void)state;
    char prog[4096];
    tw_test_build_path(prog, sizeof prog, "server/engine/tokenwired");
    char *dir = tw_test_mkdtemp();
    char log[4200];
    snprintf(log, sizeof log, "%s/out.log", dir);
    const char *cases[][2] = {{"--weight-pages", "tiny"},
                              {"--long-context-thinking", "maybe"},
                              {"--kv-type", "f8"},
                              {"--decode-prefetch", "sometimes"},
                              {"--f16-prefill", "gpu"},
                              {"--fetch-ahead-bytes", "lots"},
                              {"--fetch-ahead-bytes", "1G"},
                              {"--isa", "sse9"},
                              {"--prefix-cache-pages", "maybe"},
                              {"--quantize", "q3_k"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *argv[] = {prog, cases[i][0], cases[i][1], NULL};
        tw_test_spawn_opts o = {.log_path = log, .stdin_null = true};
        int rc = tw_test_run(argv, &o, 10000);
        assert_true(rc != 0 && rc < 128);
        char *text = tw_test_read_file(log, NULL);
        assert_non_null(text);
        if (!strstr(text, cases[i][0] + 2))
            fail_msg("%s %s: the message does not name the setting: %s", cases[i][0],
                     cases[i][1], text);
        free(text);
    }
    tw_test_rmtree(dir);
    free(dir);
}

/* --chat-template: a file that cannot be read, that does not compile, or
 * given for a model without a tokenizer stops the start with the reason;
 * before any --model it is a usage error. */
static void test_chat_template_errors(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(shared);
    char prog[4096], model[1024], log[4200], bad[4200], good[4200];
    tw_test_build_path(prog, sizeof prog, "server/engine/tokenwired");
    snprintf(model, sizeof model, "%s/golden/qwen2", shared);
    char *dir = tw_test_mkdtemp();
    snprintf(log, sizeof log, "%s/out.log", dir);
    snprintf(bad, sizeof bad, "%s/bad.jinja", dir);
    snprintf(good, sizeof good, "%s/good.jinja", dir);
    assert_true(tw_test_write_file(bad, "{% for %}", 9));
    assert_true(tw_test_write_file(good, "{{ messages[0].content }}", 25));
    const struct {
        const char *first, *file, *says;
    } cases[] = {{"--chat-template", good, "chat-template must follow a model"},
                 {"--model", "/nonexistent/x.jinja", "cannot open"},
                 {"--model", bad, "chat template"},
                 {"--model", good, "no tokenizer"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *with_model[] = {
            prog,       "--model",           model, "--chat-template", cases[i].file,
            "--listen", "tcp://127.0.0.1:0", NULL};
        const char *alone[] = {prog, "--chat-template", cases[i].file, NULL};
        tw_test_spawn_opts o = {.log_path = log, .stdin_null = true};
        int rc = tw_test_run(strcmp(cases[i].first, "--model") ? alone : with_model, &o, 30000);
        assert_true(rc != 0 && rc < 128);
        char *text = tw_test_read_file(log, NULL);
        assert_non_null(text);
        if (!strstr(text, cases[i].says))
            fail_msg("--chat-template %s: the message does not say \"%s\": %s", cases[i].file,
                     cases[i].says, text);
        free(text);
    }
    tw_test_rmtree(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_health_and_bad_requests, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_auth, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_oversized_request, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_concurrent_callers, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_generate_kv_f16, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_generate_golden, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_verbose_logs_user, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_generate_narrower_isa, twt_daemon_teardown),
        cmocka_unit_test_teardown(test_quantize_at_load, twt_daemon_teardown),
        cmocka_unit_test(test_bad_setting_values),
        cmocka_unit_test(test_chat_template_errors),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    tw_client_fini(); /* lets NNG finish freeing closed sockets before the leak check */
    return rc;
}
