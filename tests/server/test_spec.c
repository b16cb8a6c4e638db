/* Speculative decoding through tokenwired: a golden hybrid target started
 * with a draft model of the same vocabulary (--draft), greedy requests with
 * speculation by draft and by prompt lookup giving the golden continuation,
 * Usage and Stats counting drafted tokens, ModelInfo naming the draft,
 * LoadModel with draft_source (and refusing a draft of another vocabulary),
 * and the command-line client's --speculate / --draft-tokens / load --draft. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "daemon_fixture.h"
#include "test_support.h"

#define N_OUT 32

typedef struct golden {
    uint32_t input[64], greedy[64];
    size_t n_input, n_greedy;
} golden;

static void read_ids(json_t *arr, uint32_t *out, size_t cap, size_t *n)
{
    assert_true(json_is_array(arr));
    *n = json_array_size(arr);
    assert_true(*n <= cap);
    for (size_t i = 0; i < *n; i++)
        out[i] = (uint32_t)json_integer_value(json_array_get(arr, i));
}

static void load_golden(const char *model_dir, golden *g)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/golden.json", model_dir);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root)
        fail_msg("%s: %s", path, je.text);
    read_ids(json_object_get(root, "input_ids"), g->input, 64, &g->n_input);
    read_ids(json_object_get(root, "greedy_ids"), g->greedy, 64, &g->n_greedy);
    json_decref(root);
    assert_true(g->n_greedy >= N_OUT);
}

/* A greedy generation of N_OUT tokens with the given speculation settings;
 * checks the golden continuation and returns the usage's counters. */
static void generate(tw_client *c, const golden *g, const char *model,
                     Tokenwire__V1__SpeculationMode mode, uint32_t k, uint32_t *drafted,
                     uint32_t *accepted)
{
    Tokenwire__V1__TokenIds t = TOKENWIRE__V1__TOKEN_IDS__INIT;
    t.n_ids = g->n_input;
    t.ids = (uint32_t *)g->input;
    Tokenwire__V1__SamplingParams sp = TOKENWIRE__V1__SAMPLING_PARAMS__INIT;
    sp.has_temperature = 1;
    sp.temperature = 0.0f;
    Tokenwire__V1__StopRules stop = TOKENWIRE__V1__STOP_RULES__INIT;
    stop.has_max_tokens = 1;
    stop.max_tokens = N_OUT;
    stop.has_ignore_eos = 1;
    stop.ignore_eos = 1;
    Tokenwire__V1__SpeculativeOptions so = TOKENWIRE__V1__SPECULATIVE_OPTIONS__INIT;
    so.has_mode = 1;
    so.mode = mode;
    so.has_max_draft_tokens = 1;
    so.max_draft_tokens = k;
    Tokenwire__V1__GenerateRequest gr = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    gr.model = (char *)model;
    gr.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    gr.token_ids = &t;
    gr.sampling = &sp;
    gr.stop = &stop;
    gr.speculative = &so;
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    if (tw_client_generate(c, &gr, &rep, &err) != TW_OK)
        fail_msg("generate (mode %d, k %u): %s", (int)mode, k, err.msg);
    assert_int_equal(rep->generate->n_choices, 1);
    const Tokenwire__V1__Choice *ch = rep->generate->choices[0];
    assert_int_equal(ch->n_token_ids, N_OUT);
    for (size_t i = 0; i < N_OUT; i++)
        if (ch->token_ids[i] != g->greedy[i])
            fail_msg("mode %d, k %u: token %zu is %u, golden %u", (int)mode, k, i,
                     ch->token_ids[i], g->greedy[i]);
    assert_non_null(rep->generate->usage);
    *drafted = rep->generate->usage->drafted_tokens;
    *accepted = rep->generate->usage->accepted_tokens;
    assert_true(*accepted <= *drafted);
    tw_wire_free_reply(rep);
}

static void stats_of(tw_client *c, const char *model, uint64_t *drafted, uint64_t *accepted)
{
    Tokenwire__V1__StatsRequest m = TOKENWIRE__V1__STATS_REQUEST__INIT;
    m.model = (char *)model;
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    if (tw_client_stats(c, &m, &rep, &err) != TW_OK)
        fail_msg("stats: %s", err.msg);
    assert_true(rep->stats->has_spec_drafted);
    *drafted = rep->stats->spec_drafted;
    *accepted = rep->stats->spec_accepted;
    assert_true(rep->stats->spec_speedup >= 0.0f);
    tw_wire_free_reply(rep);
}

/* The draft_model of the listed model `name` ("" when it has none). */
static void listed_draft(tw_client *c, const char *name, char *out, size_t cap)
{
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_list_models(c, NULL, &rep, &err), TW_OK);
    bool found = false;
    for (size_t i = 0; i < rep->list_models->n_models; i++) {
        const Tokenwire__V1__ModelInfo *m = rep->list_models->models[i];
        if (m->name && strcmp(m->name, name) == 0) {
            found = true;
            snprintf(out, cap, "%s", m->draft_model ? m->draft_model : "");
        }
    }
    assert_true(found);
    tw_wire_free_reply(rep);
}

/* Runs the command-line client with args and returns its stdout. */
static char *run_cli(const twt_daemon *d, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "\"%s/client/cli/tokenwire\" --engine '%s' --pub '%s' %s",
             getenv("TW_BUILD_DIR"), d->rpc, d->pub, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    int status = pclose(p);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("tokenwire %s exited %d: %s", args, WEXITSTATUS(status), buf);
    return buf;
}

static void test_spec_daemon(void **state)
{
    (void)state;
    TW_REQUIRE_SHARED(dir);
    char target[1024], draft[1024];
    snprintf(target, sizeof target, "%s/golden/qwen3_5", dir);
    snprintf(draft, sizeof draft, "%s/golden/qwen3_5_moe", dir);
    golden g;
    load_golden(target, &g);

    twt_daemon d;
    twt_daemon_init(&d);
    /* --draft belongs to the --model before it: "plain" has none. */
    const char *extra[] = {"--model", target, "--model-name", "target", "--draft", draft,
                           "--model", draft, "--model-name", "plain", "--threads", "1", NULL};
    twt_daemon_start(&d, extra);
    tw_client *c = twt_connect(&d, 60000);

    char got[1200];
    listed_draft(c, "target", got, sizeof got);
    assert_string_equal(got, draft);
    listed_draft(c, "plain", got, sizeof got);
    assert_string_equal(got, "");

    uint32_t dr, ac;
    generate(c, &g, "target", TOKENWIRE__V1__SPECULATION_MODE__SPECULATE_DRAFT, 4, &dr, &ac);
    assert_true(dr > 0);
    uint32_t lookup_dr;
    generate(c, &g, "target", TOKENWIRE__V1__SPECULATION_MODE__SPECULATE_LOOKUP, 3, &lookup_dr,
             &ac);
    generate(c, &g, "target", TOKENWIRE__V1__SPECULATION_MODE__SPECULATE_OFF, 0, &dr, &ac);
    assert_int_equal(dr, 0);
    generate(c, &g, "target", TOKENWIRE__V1__SPECULATION_MODE__SPECULATE_AUTO, 0, &dr, &ac);

    uint64_t sd, sa;
    stats_of(c, "target", &sd, &sa);
    assert_true(sd > 0);
    assert_true(sa <= sd);
    stats_of(c, "plain", &sd, &sa);
    assert_int_equal(sd, 0);

    /* DRAFT on a model without one is refused. */
    Tokenwire__V1__TokenIds t = TOKENWIRE__V1__TOKEN_IDS__INIT;
    t.n_ids = g.n_input;
    t.ids = g.input;
    Tokenwire__V1__SpeculativeOptions so = TOKENWIRE__V1__SPECULATIVE_OPTIONS__INIT;
    so.has_mode = 1;
    so.mode = TOKENWIRE__V1__SPECULATION_MODE__SPECULATE_DRAFT;
    Tokenwire__V1__GenerateRequest gr = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    gr.model = "plain";
    gr.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
    gr.token_ids = &t;
    gr.speculative = &so;
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    assert_int_equal(tw_client_generate(c, &gr, &rep, &err), TW_FAILED_PRECONDITION);
    tw_wire_free_reply(rep);

    /* LoadModel with draft_source; a draft of another vocabulary fails. */
    Tokenwire__V1__LoadModelRequest lm = TOKENWIRE__V1__LOAD_MODEL_REQUEST__INIT;
    lm.source = target;
    lm.name = "loaded";
    lm.draft_source = draft;
    rep = NULL;
    if (tw_client_load_model(c, &lm, &rep, &err) != TW_OK)
        fail_msg("load with draft: %s", err.msg);
    assert_string_equal(rep->load_model->model->draft_model, draft);
    tw_wire_free_reply(rep);
    generate(c, &g, "loaded", TOKENWIRE__V1__SPECULATION_MODE__SPECULATE_DRAFT, 2, &dr, &ac);
    assert_true(dr > 0);
    lm.name = "mismatch";
    lm.draft_source = TW_REPO_GOLDEN "/qwen3_5_mix"; /* 512 tokens, the target 1024 */
    rep = NULL;
    assert_int_equal(tw_client_load_model(c, &lm, &rep, &err), TW_INVALID_ARGUMENT);
    assert_non_null(strstr(err.msg, "vocabulary"));
    tw_wire_free_reply(rep);
    lm.draft_source = "ftp://example.invalid/draft.gguf";
    rep = NULL;
    assert_int_equal(tw_client_load_model(c, &lm, &rep, &err), TW_INVALID_ARGUMENT);
    tw_wire_free_reply(rep);

    /* The command-line client. */
    char args[2048], want[1024];
    size_t k = 0, wk = 0;
    for (size_t i = 0; i < g.n_input; i++)
        k += (size_t)snprintf(args + k, sizeof args - k, "%s%u", i ? "," : "", g.input[i]);
    for (size_t i = 0; i < 8; i++)
        wk += (size_t)snprintf(want + wk, sizeof want - wk, "%s%u", i ? " " : "", g.greedy[i]);
    char cmd[4096];
    const char *modes[] = {"draft", "lookup", "auto", "off"};
    for (size_t i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd,
                 "generate --model target --ids %s --max-tokens 8 --temperature 0 "
                 "--speculate %s --draft-tokens 3",
                 args, modes[i]);
        char *out = run_cli(&d, cmd);
        out[strcspn(out, "\n")] = 0;
        if (strcmp(out, want) != 0)
            fail_msg("tokenwire generate --speculate %s printed '%s', want '%s'", modes[i], out,
                     want);
    }
    snprintf(cmd, sizeof cmd, "load '%s' --name cli --draft '%s'", target, draft);
    run_cli(&d, cmd);
    listed_draft(c, "cli", got, sizeof got);
    assert_string_equal(got, draft);
    assert_non_null(strstr(run_cli(&d, "models"), "draft="));
    assert_non_null(strstr(run_cli(&d, "stats --model target"), "spec_drafted: "));

    tw_client_close(c);
    twt_daemon_stop(&d);
    twt_daemon_cleanup(&d);
}

/* A --draft with no --model before it is a usage error. */
static void test_draft_needs_model(void **state)
{
    (void)state;
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "\"%s/server/engine/tokenwired\" --draft x.gguf --model y.gguf 2>&1",
             getenv("TW_BUILD_DIR"));
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char buf[2048];
    size_t n = fread(buf, 1, sizeof buf - 1, p);
    buf[n] = 0;
    int status = pclose(p);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);
    assert_non_null(strstr(buf, "draft must follow a model"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_draft_needs_model),
        cmocka_unit_test(test_spec_daemon),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
