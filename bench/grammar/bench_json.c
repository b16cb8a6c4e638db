/* tw-bench-json: what JSON answers cost.
 *
 * 1. The vocabulary mask, per decode step: the index walk (tokens in byte
 *    order, shared prefixes walked once, string bodies by the plain-token
 *    fast path) against the plain definition (every token's bytes fed to a
 *    copy of the state), alternated state by state over every prefix of a
 *    schema-bound document; then the same document under a schema whose
 *    strings have patterns (no fast path: every byte asked of PCRE2); then
 *    64 tags as a plain list and as a set (uniqueItems, whose items the
 *    state keeps).
 * 2. With --model: greedy decode of the same chat with a JSON answer
 *    against a free-text answer, alternated, as decode tokens per second.
 *
 *   tw-bench-json --vocab V.gguf [--model M.gguf] [--threads N] [--reps N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "tw/engine.h"
#include "tw/hw.h"
#include "tw/json_mask.h"
#include "tw/log.h"

static const char *const g_schema =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
    "\"integer\"},\"email\":{\"type\":\"string\"},\"tags\":{\"type\":\"array\",\"items\":{"
    "\"type\":\"string\"}},\"address\":{\"type\":\"object\",\"properties\":{\"city\":{"
    "\"type\":\"string\"},\"zip\":{\"type\":\"string\"}},\"required\":[\"city\"]}},"
    "\"required\":[\"name\",\"age\"]}";

/* The same record with its strings held to patterns: a walk of the whole
 * vocabulary in each of them, each byte asked of PCRE2. */
static const char *const g_pattern_schema =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"pattern\":"
    "\"^[A-Z][a-z]+( [A-Z][a-z]+)*$\"},\"age\":{\"type\":\"integer\"},\"email\":{\"type\":"
    "\"string\",\"pattern\":\"^[a-z.]+@[a-z]+\\\\.[a-z]{2,}$\"},\"tags\":{\"type\":\"array\","
    "\"items\":{\"type\":\"string\"}},\"address\":{\"type\":\"object\","
    "\"properties\":{\"city\":{\"type\":\"string\",\"pattern\":\"^[A-Z]\"},\"zip\":{\"type\":"
    "\"string\",\"pattern\":\"^[A-Z]{1,2}[0-9]{1,2}$\"}},\"required\":[\"city\"]}},"
    "\"required\":[\"name\",\"age\"]}";

/* A list of tags, and the same list as a set (uniqueItems), whose items'
 * records the state then carries: the walk copies them state by state. */
static const char *const g_list_schema = "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}";
static const char *const g_set_schema =
    "{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"type\":\"string\"}}";
/* set_doc(): 64 different tags of 12 characters */
#define SET_TAGS 64

/* A dict of counts with open keys, and the same dict keyed by an enum of
 * 16 names (propertyNames, as pydantic writes dict[Enum, int]): its keys
 * are asked of the names byte by byte, with no plain-string fast path. */
#define DICT_NAMES 16
static const char *const g_dict_schema =
    "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}";

static const char *const g_doc =
    "{\n  \"name\": \"Ada Lovelace\",\n  \"age\": 36,\n  \"email\": \"ada@example.org\",\n"
    "  \"tags\": [\"math\", \"engines\", \"poetry \\u00e9\"],\n  \"address\": {\"city\": "
    "\"London\", \"zip\": \"W1\"}\n}";

static size_t brute(const tw_tokenizer *tok, const tw_json_state *s, uint8_t *allowed)
{
    const uint32_t n = tw_tokenizer_vocab_size(tok);
    tw_json_state t;
    size_t kept = 0;
    for (uint32_t id = 0; id < n; id++) {
        size_t len;
        const char *b = tw_tokenizer_token_bytes(tok, id, &len);
        allowed[id] = 0;
        if (!tw_json_vocab_has(tok, id, NULL, 0))
            continue;
        tw_json_state_copy(&t, s);
        if (tw_json_state_feed(&t, b, len)) {
            allowed[id] = 1;
            kept++;
        }
    }
    return kept;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The mask's cost at every prefix of doc under schema; the mean of its
 * index walk in microseconds, or -1. */
static double bench_mask(const tw_tokenizer *tok, const char *vocab, const char *schema,
                         const char *doc, const char *row, unsigned reps)
{
    tw_err err;
    double t0 = bench_now();
    tw_json_vocab *v;
    tw_json_masker *mk;
    tw_json_grammar *g;
    if (tw_json_vocab_build(tok, NULL, 0, &v, &err) != TW_OK ||
        tw_json_masker_create(v, &mk, &err) != TW_OK ||
        tw_json_grammar_compile(schema, strlen(schema), &g, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-json: %s\n", err.msg);
        return -1;
    }
    const double build_ms = (bench_now() - t0) * 1e3;
    const uint32_t n = tw_tokenizer_vocab_size(tok);
    uint8_t *a = malloc(n), *b = malloc(n);
    const size_t len = strlen(doc);
    double *walk_us = malloc((len + 1) * sizeof *walk_us);
    double *brute_us = malloc((len + 1) * sizeof *brute_us);
    if (!a || !b || !walk_us || !brute_us)
        return -1;
    size_t states = 0, in_string = 0;
    tw_json_state s;
    tw_json_state_init(&s, g);
    double walk_sum = 0, brute_sum = 0;
    for (size_t at = 0; at <= len; at++) {
        double best_w = 1e30, best_b = 1e30;
        size_t kw = 0, kb = 0;
        for (unsigned r = 0; r < reps; r++) {
            double t = bench_now();
            kw = tw_json_mask_allowed(mk, &s, NULL, 0, a, n);
            double w = bench_now() - t;
            t = bench_now();
            kb = brute(tok, &s, b);
            double bt = bench_now() - t;
            best_w = w < best_w ? w : best_w;
            best_b = bt < best_b ? bt : best_b;
        }
        if (kw != kb || memcmp(a, b, n) != 0) {
            fprintf(stderr, "tw-bench-json: the two masks differ at byte %zu\n", at);
            return -1;
        }
        uint32_t room;
        in_string += tw_json_state_in_plain_string(&s, &room);
        walk_us[states] = best_w * 1e6;
        brute_us[states] = best_b * 1e6;
        walk_sum += best_w;
        brute_sum += best_b;
        states++;
        if (at < len && !tw_json_state_feed_byte(&s, (unsigned char)doc[at])) {
            fprintf(stderr, "tw-bench-json: the document breaks the schema at byte %zu\n", at);
            return -1;
        }
        if (at % 32 == 0)
            bench_progress("mask: %zu of %zu states", at, len + 1);
    }
    qsort(walk_us, states, sizeof *walk_us, cmp_double);
    qsort(brute_us, states, sizeof *brute_us, cmp_double);
    printf("schema: %s\n", row);
    printf("vocabulary: %s (%u tokens), index built in %.1f ms\n", vocab, n, build_ms);
    printf("states: %zu (every prefix of a %zu-byte document; %zu in a string body)\n", states,
           len, in_string);
    printf("%-22s %10s %10s %10s %10s\n", "mask, us per step", "median", "p90", "max", "mean");
    printf("%-22s %10.1f %10.1f %10.1f %10.1f\n", "index walk", walk_us[states / 2],
           walk_us[states * 9 / 10], walk_us[states - 1], walk_sum / states * 1e6);
    printf("%-22s %10.1f %10.1f %10.1f %10.1f\n", "every token fed", brute_us[states / 2],
           brute_us[states * 9 / 10], brute_us[states - 1], brute_sum / states * 1e6);
    printf("index walk: %.1fx faster (mean)\n", brute_sum / walk_sum);
    char extra[128];
    snprintf(extra, sizeof extra, "\"states\":%zu,\"vocab\":%u", states, n);
    bench_row("json", row, vocab, walk_sum / states * 1e6, "us", brute_sum / states * 1e6,
              "every_token_fed", extra);
    free(walk_us);
    free(brute_us);
    free(a);
    free(b);
    tw_json_grammar_free(g);
    tw_json_masker_destroy(mk);
    tw_json_vocab_free(v);
    return walk_sum / states * 1e6;
}

/* The array of SET_TAGS different tags that the list and set schemas read
 * (static storage). */
static const char *set_doc(void)
{
    static char doc[SET_TAGS * 20 + 8];
    size_t at = 0;
    doc[at++] = '[';
    for (int i = 0; i < SET_TAGS; i++)
        at += (size_t)snprintf(doc + at, sizeof doc - at, "%s\"tag-%c%c-item\"", i ? ", " : "",
                               'a' + i / 8, 'a' + i % 8);
    snprintf(doc + at, sizeof doc - at, "]");
    return doc;
}

/* dict_doc(): the 16 names with counts; names_schema(): the dict keyed by
 * them. */
static const char *dict_doc(void)
{
    static char doc[DICT_NAMES * 24 + 8];
    size_t at = 0;
    doc[at++] = '{';
    for (int i = 0; i < DICT_NAMES; i++)
        at += (size_t)snprintf(doc + at, sizeof doc - at, "%s\"region_%c%c\": %d", i ? ", " : "",
                               'a' + i / 4, 'a' + i % 4, i * 7);
    snprintf(doc + at, sizeof doc - at, "}");
    return doc;
}

static const char *names_schema(void)
{
    static char schema[DICT_NAMES * 16 + 160];
    size_t at = (size_t)snprintf(schema, sizeof schema,
                                 "{\"type\":\"object\",\"propertyNames\":{"
                                 "\"enum\":[");
    for (int i = 0; i < DICT_NAMES; i++)
        at += (size_t)snprintf(schema + at, sizeof schema - at, "%s\"region_%c%c\"", i ? "," : "",
                               'a' + i / 4, 'a' + i % 4);
    snprintf(schema + at, sizeof schema - at,
             "]},\"additionalProperties\":{\"type\":\"integer\"}}");
    return schema;
}

/* The plain schema's masks, then the patterns', then a list's and a set's,
 * then a dict's with open and with named keys, and what the patterns, the
 * set and the names cost against their plain forms in the same run. */
static int bench_masks(const char *vocab, unsigned reps)
{
    tw_tokenizer *tok;
    tw_err err;
    if (tw_tokenizer_load_gguf(vocab, &tok, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-json: %s: %s\n", vocab, err.msg);
        return 1;
    }
    const double plain = bench_mask(tok, vocab, g_schema, g_doc, "mask_us_mean", reps);
    const double pattern =
        plain < 0 ? -1
                  : bench_mask(tok, vocab, g_pattern_schema, g_doc, "mask_us_mean_pattern", reps);
    const double list =
        pattern < 0 ? -1
                    : bench_mask(tok, vocab, g_list_schema, set_doc(), "mask_us_mean_list", reps);
    const double set =
        list < 0 ? -1 : bench_mask(tok, vocab, g_set_schema, set_doc(), "mask_us_mean_set", reps);
    const double dict =
        set < 0 ? -1 : bench_mask(tok, vocab, g_dict_schema, dict_doc(), "mask_us_mean_dict", reps);
    const double named = dict < 0 ? -1
                                  : bench_mask(tok, vocab, names_schema(), dict_doc(),
                                               "mask_us_mean_dict_names", reps);
    tw_tokenizer_free(tok);
    if (named < 0)
        return 1;
    printf("strings held to patterns: %.1fx the plain schema's mean mask time\n", pattern / plain);
    printf("%d tags as a set (uniqueItems): %.2fx their list's mean mask time\n", SET_TAGS,
           set / list);
    printf("a dict keyed by %d names (propertyNames): %.2fx its open keys' mean mask time\n",
           DICT_NAMES, named / dict);
    return 0;
}

typedef struct run_result {
    volatile int done;
    tw_usage usage;
    tw_status error;
} run_result;

static void on_chunk(void *user, const tw_gen_chunk *ch)
{
    run_result *r = user;
    if (ch->final) {
        r->usage = *ch->usage;
        r->error = ch->error;
        __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
    }
}

/* a text prompt: the real-shape bench models have no chat template */
static const char g_ask[] = "A user record for Ada Lovelace, as JSON:\n";
/* records to copy from, as extraction answers do, where prompt lookup
 * drafts well */
static const char g_echo[] =
    "{\"name\": \"Ada Lovelace\", \"age\": 36, \"email\": \"ada@example.org\", \"tags\": "
    "[\"math\", \"engines\"], \"active\": true}\n{\"name\": \"Ada Lovelace\", \"age\": 36, "
    "\"email\": \"ada@example.org\", \"tags\": [\"math\", \"engines\"], \"active\": true}\n";

/* Decode tokens per second of one greedy answer (after the first token). */
static double decode_rate(tw_engine *e, const char *prompt, bool json, tw_spec_mode spec,
                          uint32_t *tokens)
{
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.prompt_kind = TW_PROMPT_TEXT;
    r.prompt_text = prompt;
    r.prompt_text_len = strlen(prompt);
    r.sampling.temperature = 0.0f;
    r.stop.max_tokens = 256;
    r.thinking.enable_thinking = TW_THINK_OFF;
    r.speculative.mode = spec;
    r.cache.mode = TW_CACHE_BYPASS;
    if (json) {
        r.format.kind = TW_OUTPUT_JSON;
        r.format.json_schema = g_schema;
        r.format.json_schema_len = strlen(g_schema);
    }
    run_result res = {0};
    tw_gen_callbacks cb = {.on_chunk = on_chunk};
    tw_err err;
    uint64_t id;
    if (tw_engine_submit(e, &r, &cb, &res, &id, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-json: submit: %s\n", err.msg);
        return -1;
    }
    while (!__atomic_load_n(&res.done, __ATOMIC_ACQUIRE))
        nanosleep(&(struct timespec){0, 200000}, NULL);
    if (res.error != TW_OK || res.usage.completion_tokens < 2 || !res.usage.decode_us)
        return -1;
    *tokens = res.usage.completion_tokens;
    return (res.usage.completion_tokens - 1) / (res.usage.decode_us / 1e6);
}

static int bench_decode(const char *model, uint32_t threads, unsigned reps)
{
    tw_engine_opts o;
    tw_engine_opts_init(&o);
    o.threads = threads;
    o.max_context = 2048;
    tw_engine *e;
    tw_err err;
    if (tw_engine_create(&o, &e, &err) != TW_OK ||
        tw_engine_load_model(e, model, NULL, NULL, NULL, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-json: %s: %s\n", model, err.msg);
        return 1;
    }
    double best_free = 0, best_json = 0, best_off = 0, best_look = 0;
    uint32_t n_free = 0, n_json = 0, n_off = 0, n_look = 0;
    for (unsigned r = 0; r < reps; r++) {
        double f = decode_rate(e, g_ask, false, TW_SPEC_OFF, &n_free),
               j = decode_rate(e, g_ask, true, TW_SPEC_OFF, &n_json),
               off = decode_rate(e, g_echo, true, TW_SPEC_OFF, &n_off),
               look = decode_rate(e, g_echo, true, TW_SPEC_LOOKUP, &n_look);
        if (f < 0 || j < 0 || off < 0 || look < 0 || n_off != n_look) {
            fprintf(stderr, "tw-bench-json: a generation failed (or speculation changed a greedy "
                            "answer)\n");
            tw_engine_destroy(e);
            return 1;
        }
        best_free = f > best_free ? f : best_free;
        best_json = j > best_json ? j : best_json;
        best_off = off > best_off ? off : best_off;
        best_look = look > best_look ? look : best_look;
        bench_progress("decode: round %u of %u", r + 1, reps);
    }
    printf("model: %s, %u threads, greedy, best of %u alternated rounds\n", model, threads,
           reps);
    printf("free text:   %7.1f tok/s (%u tokens)\n", best_free, n_free);
    printf("JSON schema: %7.1f tok/s (%u tokens), %.2fx free text\n", best_json, n_json,
           best_json / best_free);
    bench_row("json", "decode_tok_s", model, best_json, "tok/s", best_free, "free_text", NULL);
    printf("JSON copying from the prompt: %7.1f tok/s with prompt lookup, %7.1f without "
           "(%u tokens), %.2fx\n",
           best_look, best_off, n_look, best_look / best_off);
    bench_row("json", "lookup_decode_tok_s", model, best_look, "tok/s", best_off, "no_speculation",
              NULL);
    tw_engine_destroy(e);
    return 0;
}

int main(int argc, char **argv)
{
    const char *vocab = NULL, *model = NULL;
    uint32_t threads = 2;
    unsigned reps = 5;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--vocab") == 0 && v)
            vocab = argv[++i];
        else if (strcmp(argv[i], "--model") == 0 && v)
            model = argv[++i];
        else if (strcmp(argv[i], "--threads") == 0 && v && atoi(v) > 0 && atoi(v) <= 256)
            threads = (uint32_t)atoi(argv[++i]);
        else if (strcmp(argv[i], "--reps") == 0 && v && atoi(v) > 0 && atoi(v) <= 1000)
            reps = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: tw-bench-json --vocab V.gguf [--model M.gguf] [--threads N] "
                    "[--reps N]\n");
            return 2;
        }
    }
    if (!vocab && !model) {
        fprintf(stderr, "tw-bench-json: give --vocab, --model or both\n");
        return 2;
    }
    tw_log_set_level(TW_LOG_WARN);
    tw_hw_info hw;
    tw_err err;
    tw_hw_detect(&hw, &err);
    printf("tw-bench-json\nmachine: %s (family %u, model %u), %u CPUs, kernels %s\n",
           hw.cpu_model, hw.cpu_family, hw.cpu_model_number, hw.cpus_online, hw.isa);
    int rc = vocab ? bench_masks(vocab, reps) : 0;
    if (rc == 0 && model)
        rc = bench_decode(model, threads, reps);
    return rc;
}
