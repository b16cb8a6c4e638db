/* tw-bench-cache: what the prompt caches buy on a long shared prefix.
 *
 * A long prefix (a system prompt / document, 12K tokens by default) plus a
 * short question, answered greedily:
 *   cold        nothing cached (the first request; it fills the caches)
 *   warm-mem    the same prompt again, from the in-memory prefix cache
 *               (the median of five; --prefix-cache-pages copy copies the
 *               cached K/V into the sequence instead of mapping its pages)
 *   warm-disk   the same prompt after the engine is destroyed and created
 *               again on the same state directory (persistent store)
 *   turn 1..N   a conversation on the prefix: each turn's prompt is the
 *               previous prompt + its answer + a new question
 * Every cached run's output is compared with a run that bypasses the caches
 * (greedy, so it must be identical). Prints a Markdown table and JSON.
 */
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "tw/blas.h"
#include "tw/engine.h"

#define MAX_ANSWER 256
/* tokens of the shared prefix (and of a question) at most: past any model's
 * context, so the engine's own limit is the one a run meets */
#define MAX_PREFIX ((size_t)1 << 20)
#define PROG       "tw-bench-cache"

typedef struct run_result {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t ids[MAX_ANSWER];
    size_t n;
    bool final;
    tw_status error;
    char msg[TW_ERR_MSG_MAX];
    tw_usage usage;
    double total_ms;
} run_result;

typedef struct opts {
    const char *model;
    size_t prefix, question, answer, turns;
    uint32_t threads;
    const char *state_dir;
    bool verify_turns;
    bool copy_pages; /* --prefix-cache-pages copy */
} opts;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void on_chunk(void *user, const tw_gen_chunk *ch)
{
    run_result *r = user;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < ch->n_token_ids && r->n < MAX_ANSWER; i++)
        r->ids[r->n++] = ch->token_ids[i];
    if (ch->final) {
        r->final = true;
        r->error = ch->error;
        snprintf(r->msg, sizeof r->msg, "%s", ch->error_msg ? ch->error_msg : "");
        r->usage = *ch->usage;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

static bool run(tw_engine *e, const uint32_t *prompt, size_t n, size_t answer, tw_cache_mode mode,
                bool persist, run_result *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_init(&out->mu, NULL);
    pthread_cond_init(&out->cv, NULL);
    tw_gen_request r;
    tw_gen_request_init(&r);
    r.prompt_ids = prompt;
    r.n_prompt_ids = n;
    r.sampling.temperature = 0.0f;
    r.stop.max_tokens = (uint32_t)answer;
    r.stop.ignore_eos = true;
    r.cache.mode = mode;
    r.cache.persist = persist;
    r.speculative.mode = TW_SPEC_OFF; /* time the prompt, not the drafts */
    tw_gen_callbacks cb = {.on_chunk = on_chunk};
    tw_err err;
    double t0 = now_ms();
    if (tw_engine_submit(e, &r, &cb, out, NULL, &err) != TW_OK) {
        fprintf(stderr, "submit: %s\n", err.msg);
        return false;
    }
    pthread_mutex_lock(&out->mu);
    while (!out->final)
        pthread_cond_wait(&out->cv, &out->mu);
    pthread_mutex_unlock(&out->mu);
    out->total_ms = now_ms() - t0;
    pthread_mutex_destroy(&out->mu);
    pthread_cond_destroy(&out->cv);
    if (out->error != TW_OK) {
        fprintf(stderr, "generate: %s\n", out->msg);
        return false;
    }
    return true;
}

static tw_engine *engine_open(const opts *o, uint32_t *vocab)
{
    tw_engine_opts eo;
    tw_engine_opts_init(&eo);
    eo.threads = o->threads;
    eo.max_batch = 4;
    eo.max_context = (uint32_t)(o->prefix + o->turns * (o->question + o->answer) + 256);
    eo.cache_bytes = (uint64_t)4 << 30;
    eo.state_dir = o->state_dir;
    eo.state_bytes = (uint64_t)16 << 30;
    eo.persist_min_tokens = UINT32_MAX; /* only the requests that ask */
    eo.prefix_cache_copy = o->copy_pages;
    tw_engine *e;
    tw_err err;
    if (tw_engine_create(&eo, &e, &err) != TW_OK) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return NULL;
    }
    tw_engine_model_info info;
    if (tw_engine_load_model(e, o->model, NULL, NULL, &info, &err) != TW_OK) {
        fprintf(stderr, "load %s: %s\n", o->model, err.msg);
        tw_engine_destroy(e);
        return NULL;
    }
    *vocab = info.vocab_size;
    return e;
}

typedef struct row {
    char name[32];
    size_t prompt, cached;
    double ttft_ms, total_ms, ratio;
    int identical; /* -1: not checked */
} row;

#define WARM_RUNS 5

static int by_ttft(const void *a, const void *b)
{
    double x = ((const row *)a)->ttft_ms, y = ((const row *)b)->ttft_ms;
    return (x > y) - (x < y);
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: tw-bench-cache MODEL.gguf [--prefix N] [--question N] [--answer N]\n"
            "                      [--turns N] [--threads N] [--state-dir DIR]\n"
            "                      [--prefix-cache-pages share|copy] [--no-verify-turns]\n");
}

int main(int argc, char **argv)
{
    /* before anything exists: a restart keeps only argv and the environment */
    tw_err blas_err;
    if (tw_blas_pick_core(argv, TW_BLAS_LEVEL_AVX512, &blas_err) != TW_OK)
        fprintf(stderr, "%s: %s; going on with OpenBLAS's own choice\n", "tw-bench-cache",
                blas_err.msg);
    opts o = {.prefix = 12288, .question = 24, .answer = 30, .turns = 5, .verify_turns = true};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--no-verify-turns")) {
            o.verify_turns = false;
            continue;
        }
        if (a[0] != '-' && !o.model) {
            o.model = a;
            continue;
        }
        /* the other options take a value */
        const char *v = i + 1 < argc ? argv[++i] : NULL;
        size_t threads = 0;
        bool ok = true;
        if (!strcmp(a, "--prefix"))
            ok = bench_arg_size(PROG, a, v, 0, MAX_PREFIX, &o.prefix);
        else if (!strcmp(a, "--question"))
            ok = bench_arg_size(PROG, a, v, 1, MAX_PREFIX, &o.question);
        else if (!strcmp(a, "--answer"))
            ok = bench_arg_size(PROG, a, v, 1, MAX_ANSWER, &o.answer);
        else if (!strcmp(a, "--turns"))
            ok = bench_arg_size(PROG, a, v, 1, 50, &o.turns);
        else if (!strcmp(a, "--threads")) {
            ok = bench_arg_size(PROG, a, v, 0, 1024, &threads);
            o.threads = (uint32_t)threads;
        } else if (!strcmp(a, "--state-dir")) {
            ok = (o.state_dir = bench_arg_value(PROG, a, v)) != NULL;
        } else if (!strcmp(a, "--prefix-cache-pages")) {
            ok = (v = bench_arg_value(PROG, a, v)) != NULL;
            if (ok && (strcmp(v, "share") && strcmp(v, "copy"))) {
                fprintf(stderr, PROG ": --prefix-cache-pages takes share or copy, not '%s'\n", v);
                ok = false;
            }
            o.copy_pages = ok && !strcmp(v, "copy");
        } else {
            bench_arg_unknown(PROG, a);
            ok = false;
        }
        if (!ok) {
            usage();
            return 2;
        }
    }
    if (!o.model) {
        fprintf(stderr, PROG ": the model file is required\n");
        usage();
        return 2;
    }
    char tmpdir[] = "/tmp/tw-bench-cache.XXXXXX";
    if (!o.state_dir) {
        if (!mkdtemp(tmpdir)) {
            perror("mkdtemp");
            return 1;
        }
        o.state_dir = tmpdir;
    }
    uint32_t vocab = 0;
    tw_engine *e = engine_open(&o, &vocab);
    if (!e)
        return 1;
    size_t cap = o.prefix + o.turns * (o.question + o.answer);
    uint32_t *prompt = malloc(cap * sizeof *prompt);
    for (size_t i = 0; i < o.prefix + o.question; i++)
        prompt[i] = rnd(vocab);
    size_t n = o.prefix + o.question;

    row rows[64];
    size_t nr = 0;
    run_result ref, r;
    bool ok = true;
    /* The reference: the caches bypassed. */
    ok = ok && run(e, prompt, n, o.answer, TW_CACHE_BYPASS, false, &ref);
    /* Cold: nothing cached yet; this request fills memory and disk. */
    ok = ok && run(e, prompt, n, o.answer, TW_CACHE_USE, true, &r);
    if (!ok)
        return 1;
    double cold = (double)r.usage.time_to_first_token_us / 1e3;
    rows[nr++] = (row){"cold", n, r.usage.cached_prompt_tokens, cold, r.total_ms, 1.0,
                       !memcmp(r.ids, ref.ids, sizeof r.ids)};
    rows[nr] = (row){"cold (bypass)", n, ref.usage.cached_prompt_tokens,
                     (double)ref.usage.time_to_first_token_us / 1e3, ref.total_ms, 0, -1};
    rows[nr].ratio = rows[nr].ttft_ms / cold;
    nr++;
    /* A warm restore takes milliseconds, where a neighbour's burst on a
     * shared machine moves it: the median of WARM_RUNS, every one checked. */
    row warm[WARM_RUNS];
    for (size_t k = 0; ok && k < WARM_RUNS; k++) {
        ok = run(e, prompt, n, o.answer, TW_CACHE_USE, false, &r);
        warm[k] = (row){"warm (memory)",
                        n,
                        r.usage.cached_prompt_tokens,
                        (double)r.usage.time_to_first_token_us / 1e3,
                        r.total_ms,
                        (double)r.usage.time_to_first_token_us / 1e3 / cold,
                        !memcmp(r.ids, ref.ids, sizeof r.ids)};
    }
    if (!ok)
        return 1;
    qsort(warm, WARM_RUNS, sizeof *warm, by_ttft);
    rows[nr] = warm[WARM_RUNS / 2];
    for (size_t k = 0; k < WARM_RUNS; k++)
        if (!warm[k].identical)
            rows[nr].identical = 0;
    nr++;
    double t0 = now_ms();
    tw_engine_destroy(e); /* waits for the disk write */
    double destroy_ms = now_ms() - t0;
    t0 = now_ms();
    e = engine_open(&o, &vocab);
    double reopen_ms = now_ms() - t0;
    if (!e)
        return 1;
    ok = ok && run(e, prompt, n, o.answer, TW_CACHE_USE, false, &r);
    rows[nr++] = (row){"warm (disk, restarted)", n, r.usage.cached_prompt_tokens,
                       (double)r.usage.time_to_first_token_us / 1e3, r.total_ms,
                       (double)r.usage.time_to_first_token_us / 1e3 / cold,
                       !memcmp(r.ids, ref.ids, sizeof r.ids)};
    tw_engine_stats st;
    tw_err err;
    tw_engine_stats_get(e, NULL, &st, &err);
    uint64_t disk_hits = st.state_store_hits, disk_bytes = st.state_store_bytes;

    /* The conversation: turn 1 is the prompt above. */
    for (size_t t = 0; ok && t < o.turns; t++) {
        if (t > 0) {
            memcpy(prompt + n, r.ids, o.answer * sizeof *prompt);
            n += o.answer;
            for (size_t i = 0; i < o.question; i++)
                prompt[n++] = rnd(vocab);
        }
        run_result cur;
        ok = ok && run(e, prompt, n, o.answer, TW_CACHE_USE, false, &cur);
        int same = -1;
        if (ok && o.verify_turns) {
            run_result chk;
            ok = run(e, prompt, n, o.answer, TW_CACHE_BYPASS, false, &chk);
            same = !memcmp(cur.ids, chk.ids, sizeof cur.ids);
        }
        row *w = &rows[nr++];
        *w = (row){"", n, cur.usage.cached_prompt_tokens,
                   (double)cur.usage.time_to_first_token_us / 1e3, cur.total_ms,
                   (double)cur.usage.time_to_first_token_us / 1e3 / cold, same};
        snprintf(w->name, sizeof w->name, "turn %zu", t + 1);
        r = cur;
    }
    tw_engine_stats_get(e, NULL, &st, &err);
    tw_engine_destroy(e);
    if (!ok)
        return 1;

    printf("| run | prompt tokens | cached | TTFT ms | request ms | TTFT / cold | output = cold |\n");
    printf("|---|---:|---:|---:|---:|---:|---|\n");
    bool all_same = true;
    for (size_t i = 0; i < nr; i++) {
        printf("| %s | %zu | %zu | %.1f | %.1f | %.4f | %s |\n", rows[i].name, rows[i].prompt,
               rows[i].cached, rows[i].ttft_ms, rows[i].total_ms, rows[i].ratio,
               rows[i].identical < 0 ? "-" : rows[i].identical ? "yes" : "NO");
        if (rows[i].identical == 0)
            all_same = false;
    }
    printf("\nengine destroy (flushes the disk write): %.1f ms; engine re-create + load: %.1f ms\n",
           destroy_ms, reopen_ms);
    printf("state store after restart: %llu hit(s), %.1f MiB on disk; prefix cache %.1f MiB, "
           "its pages %s (%llu prompt tokens mapped after the restart)\n\n",
           (unsigned long long)disk_hits, (double)disk_bytes / (1 << 20),
           (double)st.prefix_cache_bytes / (1 << 20), o.copy_pages ? "copied" : "shared",
           (unsigned long long)st.cached_tokens_shared);
    printf("{\"model\": \"%s\", \"prefix\": %zu, \"question\": %zu, \"answer\": %zu, "
           "\"threads\": %u, \"prefix_cache_pages\": \"%s\", \"all_identical\": %s, \"runs\": [",
           o.model, o.prefix, o.question, o.answer, o.threads, o.copy_pages ? "copy" : "share",
           all_same ? "true" : "false");
    for (size_t i = 0; i < nr; i++)
        printf("%s{\"name\": \"%s\", \"prompt\": %zu, \"cached\": %zu, \"ttft_ms\": %.2f, "
               "\"request_ms\": %.2f, \"ttft_ratio\": %.5f, \"identical\": %s}",
               i ? ", " : "", rows[i].name, rows[i].prompt, rows[i].cached, rows[i].ttft_ms,
               rows[i].total_ms, rows[i].ratio,
               rows[i].identical < 0 ? "null" : rows[i].identical ? "true" : "false");
    printf("]}\n");
    free(prompt);
    if (o.state_dir == tmpdir)
        nftw(tmpdir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
    return all_same ? 0 : 3;
}
