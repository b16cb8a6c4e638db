/* tw-bench-spec: what speculative decoding buys through the engine API.
 *
 * Two greedy workloads on a target model with a draft model beside it:
 *   echo  the prompt holds a Python function and asks for it back with one
 *         change (the case prompt lookup is made for);
 *   open  the prompt asks for a new Python function (nothing to copy, the
 *         case a draft model is for).
 * Each runs with speculation off (plain), prompt lookup, the draft model and
 * auto, interleaved over several repetitions so that a busy machine slows
 * every mode alike. Generation speed is decoded tokens over the time from
 * the first token to the last (prefill excluded). Every mode must produce
 * the same tokens as plain decoding; the bench says so when one does not.
 * Reports ratios against plain from the same run, acceptance rates and the
 * state save/restore cost per verification. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "tw/blas.h"
#include "tw/engine.h"
#include "tw/hw.h"
#include "tw/kernels.h"
#include "tw/log.h"
#include "tw/spec.h"

#include "spec_costs.h"

#define PROG          "tw-bench-spec"
#define DEFAULT_MODEL "models/tokenwire-coder-24m-q8_0.gguf"
#define DEFAULT_DRAFT "models/tokenwire-coder-draft-3m-q8_0.gguf"
#define MAX_OUT 1024
#define MAX_REPS 32

typedef struct args {
    const char *model, *draft;
    uint32_t threads, tokens, reps, k;
    uint32_t parallel;    /* 1: a workload's prompts run together */
    const char *prefetch; /* --decode-prefetch auto|on|off */
} args;

/* ------------------------------------------------------------ workloads */

static const char ECHO_CODE_1[] =
    "def moving_average(values, window):\n"
    "    if window <= 0:\n"
    "        raise ValueError(\"window must be positive\")\n"
    "    result = []\n"
    "    total = 0.0\n"
    "    for i, value in enumerate(values):\n"
    "        total += value\n"
    "        if i >= window:\n"
    "            total -= values[i - window]\n"
    "        if i >= window - 1:\n"
    "            result.append(total / window)\n"
    "    return result\n";

static const char ECHO_CODE_2[] =
    "def merge_counts(first, second):\n"
    "    merged = dict(first)\n"
    "    for key, count in second.items():\n"
    "        if key in merged:\n"
    "            merged[key] += count\n"
    "        else:\n"
    "            merged[key] = count\n"
    "    return merged\n";

#define MAX_PROMPTS 4

typedef struct workload {
    const char *name;
    size_t n;
    char prompt[MAX_PROMPTS][2048];
    /* The start of each answer, appended after the rendered chat: it puts
     * the small default model on the path of writing the code out. */
    const char *answer_prefix[MAX_PROMPTS];
    char *text[MAX_PROMPTS]; /* the chat rendered with the model's template + prefix */
} workload;

static void make_workloads(workload w[2])
{
    memset(w, 0, 2 * sizeof *w);
    w[0].name = "echo";
    w[0].n = 2;
    snprintf(w[0].prompt[0], sizeof w[0].prompt[0],
             "Here is a Python function:\n\n```python\n%s```\n\nRepeat the function with "
             "`total` renamed to `running_sum`. Change nothing else.",
             ECHO_CODE_1);
    w[0].answer_prefix[0] = "```python\ndef moving_average(values, window):\n"
                            "    if window <= 0:\n";
    snprintf(w[0].prompt[1], sizeof w[0].prompt[1],
             "Here is a Python function:\n\n```python\n%s```\n\nRepeat the function with "
             "`merged` renamed to `result`. Change nothing else.",
             ECHO_CODE_2);
    w[0].answer_prefix[1] = "```python\ndef merge_counts(first, second):\n"
                            "    merged = dict(first)\n";
    static const char *const open[] = {
        "Write a Python function that returns the n-th Fibonacci number.",
        "Write a Python function that checks whether a string is a palindrome.",
        "Write a Python function that reads a file and returns its lines.",
        "Write a Python function that merges two sorted lists.",
    };
    w[1].name = "open";
    w[1].n = 4;
    for (size_t i = 0; i < 4; i++) {
        snprintf(w[1].prompt[i], sizeof w[1].prompt[i], "%s", open[i]);
        w[1].answer_prefix[i] = "";
    }
}

/* ------------------------------------------------------------ one request */

typedef struct run_result {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    uint32_t ids[MAX_OUT];
    size_t n;
    double t_first, t_last;     /* wall clock */
    double cpu_first, cpu_last; /* the scheduler thread's CPU clock */
    tw_usage usage;
    tw_status error;
    char msg[TW_ERR_MSG_MAX];
} run_result;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs on the engine's scheduler thread, which with one compute thread does
 * every forward pass itself: its CPU clock measures the decode work without
 * the time other processes took the core away. */
static void on_chunk(void *user, const tw_gen_chunk *c)
{
    run_result *r = user;
    double t = now_s(), cpu = thread_cpu_s();
    pthread_mutex_lock(&r->mu);
    if (c->n_token_ids) {
        if (r->n == 0) {
            r->t_first = t;
            r->cpu_first = cpu;
        }
        r->t_last = t;
        r->cpu_last = cpu;
    }
    for (size_t i = 0; i < c->n_token_ids && r->n < MAX_OUT; i++)
        r->ids[r->n++] = c->token_ids[i];
    if (c->final) {
        r->usage = *c->usage;
        r->error = c->error;
        snprintf(r->msg, sizeof r->msg, "%s", c->error_msg ? c->error_msg : "");
        r->done = true;
        pthread_cond_signal(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

/* Renders prompt i of w with the model's chat template and appends its
 * answer prefix. The system prompt and the closed think block are what the
 * default model was trained with. */
static int render(tw_engine *e, workload *w, size_t i)
{
    tw_chat_message msg[2] = {
        {.role = "system", .content = "You are a helpful Python coding assistant."},
        {.role = "user", .content = w->prompt[i]},
    };
    tw_chat_input chat = {.messages = msg, .n_messages = 2, .add_generation_prompt = true};
    char *text;
    size_t len;
    tw_err err;
    if (tw_engine_apply_chat_template(e, "nodraft", &chat, TW_THINK_OFF, &text, &len, &err) !=
        TW_OK) {
        fprintf(stderr, "tw-bench-spec: chat template: %s\n", err.msg);
        return -1;
    }
    size_t plen = strlen(w->answer_prefix[i]);
    w->text[i] = malloc(len + plen + 1);
    if (!w->text[i]) {
        free(text);
        return -1;
    }
    memcpy(w->text[i], text, len);
    memcpy(w->text[i] + len, w->answer_prefix[i], plen + 1);
    free(text);
    return 0;
}

static int submit_one(tw_engine *e, const char *model, const char *prompt, tw_spec_mode mode,
                      const args *a, run_result *r)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    tw_gen_request q;
    tw_gen_request_init(&q);
    q.model = model;
    q.prompt_kind = TW_PROMPT_TEXT;
    q.prompt_text = prompt;
    q.prompt_text_len = strlen(prompt);
    q.add_special_tokens = false;
    q.sampling.temperature = 0.0f;
    q.stop.max_tokens = a->tokens;
    q.speculative.mode = mode;
    q.speculative.max_draft_tokens = a->k;
    tw_gen_callbacks cb = {on_chunk};
    uint64_t id;
    tw_err err;
    if (tw_engine_submit(e, &q, &cb, r, &id, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-spec: submit: %s\n", err.msg);
        r->done = true;
        r->error = TW_INTERNAL;
        snprintf(r->msg, sizeof r->msg, "%s", err.msg);
        return -1;
    }
    return 0;
}

static int wait_one(run_result *r)
{
    pthread_mutex_lock(&r->mu);
    while (!r->done)
        pthread_cond_wait(&r->cv, &r->mu);
    pthread_mutex_unlock(&r->mu);
    int rc = 0;
    if (r->error != TW_OK) {
        fprintf(stderr, "tw-bench-spec: generate: %s\n", r->msg);
        rc = -1;
    }
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    return rc;
}

/* ------------------------------------------------------------ the table */

enum { M_PLAIN, M_LOOKUP, M_DRAFT, M_AUTO, M_AUTO_NODRAFT, N_MODES };
static const char *const MODE_NAME[N_MODES] = {"plain", "lookup", "draft", "auto",
                                               "auto-nodraft"};
static const tw_spec_mode MODE_OF[N_MODES] = {TW_SPEC_OFF, TW_SPEC_LOOKUP, TW_SPEC_DRAFT,
                                              TW_SPEC_AUTO, TW_SPEC_AUTO};
static const char *const MODEL_OF[N_MODES] = {"nodraft", "nodraft", "withdraft", "withdraft",
                                              "nodraft"};

typedef struct mode_stats {
    double tps[MAX_REPS];     /* wall clock */
    double cpu_tps[MAX_REPS]; /* scheduler-thread CPU clock */
    uint32_t n_tps;
    uint64_t drafted, accepted, tokens;
    bool same; /* every run produced plain's tokens */
} mode_stats;

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(const double *v, uint32_t n)
{
    double s[MAX_REPS];
    memcpy(s, v, n * sizeof *v);
    qsort(s, n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void cpu_name(char *out, size_t cap)
{
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ')
                    p++;
                snprintf(out, cap, "%.*s", (int)strcspn(p, "\n"), p);
            }
            break;
        }
    }
    fclose(f);
}

static double load_avg(void)
{
    double l = 0.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = 0.0;
        fclose(f);
    }
    return l;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: tw-bench-spec [--model TARGET.gguf] [--draft DRAFT.gguf] [--threads N]\n"
        "                     [--tokens N] [--reps N] [--k K] [--isa scalar|avx2|avx2vnni|avx512]\n"
        "                     [--parallel 0|1] [--decode-prefetch auto|on|off]\n"
        "defaults: --model %s --draft %s\n"
        "          --threads 1, --tokens 192, --reps 5, --k 0 (engine default),\n"
        "          the best kernels the CPU has, --decode-prefetch auto (measured at\n"
        "          start, as tokenwired does)\n",
        DEFAULT_MODEL, DEFAULT_DRAFT);
}

/* Applies --decode-prefetch (auto: measured as tokenwired does at start)
 * and says what it is. */
static void print_decode_prefetch(const args *a)
{
    tw_prefetch_tune t;
    tw_err err;
    tw_hw_info hw;
    char text[256];
    tw_hw_detect(&hw, &err);
    if (tw_hw_decode_prefetch(a->prefetch, &hw, a->threads, &t, &err) != TW_OK)
        printf("decode prefetch: tuning failed (%s)\n", err.msg);
    tw_hw_decode_prefetch_text(a->prefetch, &t, text, sizeof text);
    printf("decode prefetch: %s\n", text);
}

static bool parse_args(int argc, char **argv, args *a)
{
    a->model = DEFAULT_MODEL;
    a->draft = DEFAULT_DRAFT;
    a->threads = 1;
    a->tokens = 192;
    a->reps = 5;
    a->k = 0;
    a->parallel = 0;
    a->prefetch = "auto";
    /* every option takes a value: they come in pairs */
    for (int i = 1; i < argc; i += 2) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t n = 0;
        bool ok = true;
        if (!strcmp(o, "--model"))
            ok = (a->model = bench_arg_value(PROG, o, v)) != NULL;
        else if (!strcmp(o, "--draft"))
            ok = (a->draft = bench_arg_value(PROG, o, v)) != NULL;
        else if (!strcmp(o, "--threads")) {
            ok = bench_arg_size(PROG, o, v, 1, 1024, &n);
            a->threads = ok ? (uint32_t)n : a->threads;
        } else if (!strcmp(o, "--tokens")) {
            ok = bench_arg_size(PROG, o, v, 2, MAX_OUT, &n);
            a->tokens = ok ? (uint32_t)n : a->tokens;
        } else if (!strcmp(o, "--reps")) {
            ok = bench_arg_size(PROG, o, v, 1, MAX_REPS, &n);
            a->reps = ok ? (uint32_t)n : a->reps;
        } else if (!strcmp(o, "--k")) {
            ok = bench_arg_size(PROG, o, v, 0, TW_SPEC_MAX_DRAFT, &n);
            a->k = (uint32_t)n;
        } else if (!strcmp(o, "--parallel")) {
            ok = bench_arg_size(PROG, o, v, 0, 1, &n);
            a->parallel = (uint32_t)n;
        } else if (!strcmp(o, "--decode-prefetch")) {
            ok = bench_arg_value(PROG, o, v) &&
                 (!strcmp(v, "auto") || !strcmp(v, "on") || !strcmp(v, "off"));
            if (ok)
                a->prefetch = v;
            else if (v)
                fprintf(stderr, PROG ": --decode-prefetch must be auto, on or off, not '%s'\n", v);
        } else if (!strcmp(o, "--isa"))
            /* a lower kernel level than the CPU offers, e.g. the AVX2 paths
             * machines without AVX-512 run */
            ok = bench_force_isa(PROG, v);
        else {
            bench_arg_unknown(PROG, o);
            ok = false;
        }
        if (!ok)
            return false;
    }
    return true;
}

static double best_of(const double *v, uint32_t n)
{
    double b = 0;
    for (uint32_t i = 0; i < n; i++)
        b = v[i] > b ? v[i] : b;
    return b;
}

/* The speed of mode m: best CPU-clock tokens/s with one compute thread (the
 * least disturbed repetition), median wall-clock tokens/s otherwise. */
static double speed(const mode_stats *s, bool cpu_clock)
{
    return cpu_clock ? best_of(s->cpu_tps, s->n_tps) : median(s->tps, s->n_tps);
}

static void print_results(const workload *w, const mode_stats *ms, bool cpu_clock)
{
    double plain = speed(&ms[M_PLAIN], cpu_clock);
    printf("\n[%s] %zu prompts, %llu tokens per repetition\n", w->name, w->n,
           (unsigned long long)(ms[M_PLAIN].tokens / (ms[M_PLAIN].n_tps ? ms[M_PLAIN].n_tps : 1)));
    printf("  %-13s %10s %10s %10s %7s %9s %9s %s\n", "mode", "wall-med", "wall-best",
           "cpu-best", "ratio", "drafted", "accepted", "same-output");
    for (int m = 0; m < N_MODES; m++) {
        const mode_stats *s = &ms[m];
        if (!s->n_tps)
            continue;
        char acc[32] = "-";
        if (s->drafted)
            snprintf(acc, sizeof acc, "%.1f%%", 100.0 * (double)s->accepted / (double)s->drafted);
        printf("  %-13s %10.1f %10.1f %10.1f %6.2fx %9llu %9s %s\n", MODE_NAME[m],
               median(s->tps, s->n_tps), best_of(s->tps, s->n_tps),
               best_of(s->cpu_tps, s->n_tps), plain > 0 ? speed(s, cpu_clock) / plain : 0.0,
               (unsigned long long)s->drafted, acc, s->same ? "yes" : "NO");
    }
}

/* Runs every prompt of w once in mode m, one after the other or (with
 * --parallel 1) all submitted together; adds the decode speed (tokens after
 * each request's first over the time from the first first token to the last
 * token: per request when sequential, the span of all when parallel) to ms
 * and compares the outputs with ref (NULL: fill ref instead). */
static int run_workload(tw_engine *e, const workload *w, int m, const args *a, mode_stats *ms,
                        run_result *ref)
{
    static run_result res[MAX_PROMPTS];
    double tokens = 0, seconds = 0, cpu_seconds = 0;
    double t_first = 0, t_last = 0, c_first = 0, c_last = 0;
    int rc = 0;
    for (size_t i = 0; i < w->n; i++) {
        run_result *r = ms ? &res[i] : &ref[i];
        rc |= submit_one(e, MODEL_OF[m], w->text[i], MODE_OF[m], a, r);
        if (!a->parallel)
            rc |= wait_one(r);
    }
    for (size_t i = 0; a->parallel && i < w->n; i++)
        rc |= wait_one(ms ? &res[i] : &ref[i]);
    if (rc)
        return -1;
    for (size_t i = 0; i < w->n; i++) {
        run_result *r = ms ? &res[i] : &ref[i];
        if (r->n > 1) {
            tokens += (double)(r->n - 1);
            seconds += r->t_last - r->t_first;
            cpu_seconds += r->cpu_last - r->cpu_first;
            if (t_first == 0 || r->t_first < t_first)
                t_first = r->t_first, c_first = r->cpu_first;
            if (r->t_last > t_last)
                t_last = r->t_last, c_last = r->cpu_last;
        }
        if (!ms)
            continue;
        if (r->n != ref[i].n || memcmp(r->ids, ref[i].ids, r->n * sizeof *r->ids) != 0)
            ms->same = false;
        ms->drafted += r->usage.drafted_tokens;
        ms->accepted += r->usage.accepted_tokens;
        ms->tokens += r->n;
    }
    if (a->parallel) {
        seconds = t_last - t_first;
        cpu_seconds = c_last - c_first;
    }
    if (ms && seconds > 0 && cpu_seconds > 0) {
        ms->cpu_tps[ms->n_tps] = tokens / cpu_seconds;
        ms->tps[ms->n_tps++] = tokens / seconds;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* before anything exists: a restart keeps only argv and the environment */
    tw_err blas_err;
    if (tw_blas_pick_core(argv, TW_BLAS_LEVEL_AVX512, &blas_err) != TW_OK)
        fprintf(stderr, "%s: %s; going on with OpenBLAS's own choice\n", "tw-bench-spec",
                blas_err.msg);
    args a;
    if (!parse_args(argc, argv, &a)) {
        usage(stderr);
        return 2;
    }
    if (access(a.model, R_OK) != 0 || access(a.draft, R_OK) != 0) {
        fprintf(stderr, "tw-bench-spec: cannot read %s or %s; give --model and --draft\n",
                a.model, a.draft);
        usage(stderr);
        return 2;
    }
    tw_log_set_level(TW_LOG_WARN);
    char cpu[256];
    cpu_name(cpu, sizeof cpu);
    printf("tw-bench-spec\nmachine: %s, %ld CPUs online, load average %.2f at start\n", cpu,
           sysconf(_SC_NPROCESSORS_ONLN), load_avg());
    printf("kernels: %s\n", tw_kernels_isa());
    print_decode_prefetch(&a);
    printf("threads: %u, max tokens per prompt: %u, repetitions: %u, max draft tokens: %u%s\n",
           a.threads, a.tokens, a.reps, a.k, a.k ? "" : " (engine default)");
    printf("target: %s\ndraft:  %s\n", a.model, a.draft);
    bool cpu_clock = a.threads == 1;
    printf("tokens/s: decoded tokens after the first over the time to the last; ratios use %s\n",
           cpu_clock ? "the best repetition by the scheduler thread's CPU clock (one compute "
                       "thread: immune to other processes)"
                     : "the median wall clock");

    tw_engine_opts eo;
    tw_engine_opts_init(&eo);
    eo.threads = a.threads;
    tw_engine *e;
    tw_err err;
    if (tw_engine_create(&eo, &e, &err) != TW_OK) {
        fprintf(stderr, "tw-bench-spec: engine: %s\n", err.msg);
        return 1;
    }
    /* Two instances of the target, so that the stats (state cost per
     * verification) of lookup and draft rounds stay apart, and auto is seen
     * both with and without a draft model. */
    tw_load_opts lo;
    tw_load_opts_init(&lo);
    tw_status st = tw_engine_load_model(e, a.model, "nodraft", &lo, NULL, &err);
    if (st == TW_OK) {
        lo.draft_path = a.draft;
        st = tw_engine_load_model(e, a.model, "withdraft", &lo, NULL, &err);
    }
    if (st != TW_OK) {
        fprintf(stderr, "tw-bench-spec: load: %s\n", err.msg);
        tw_engine_destroy(e);
        return 1;
    }

    workload w[2];
    make_workloads(w);
    int rc = 0;
    for (int wi = 0; wi < 2 && rc == 0; wi++)
        for (size_t i = 0; i < w[wi].n && rc == 0; i++)
            rc = render(e, &w[wi], i) != 0;
    static run_result ref[MAX_PROMPTS];
    double ratio[2][N_MODES] = {{0}}, accept[2][N_MODES] = {{0}};
    float snap_lookup = 0, snap_draft = 0;
    for (int wi = 0; wi < 2 && rc == 0; wi++) {
        mode_stats ms[N_MODES];
        memset(ms, 0, sizeof ms);
        for (int m = 0; m < N_MODES; m++)
            ms[m].same = true;
        /* The reference output; it also pages in the weights. */
        if (run_workload(e, &w[wi], M_PLAIN, &a, NULL, ref) != 0) {
            rc = 1;
            break;
        }
        for (uint32_t rep = 0; rep < a.reps && rc == 0; rep++)
            for (int m = 0; m < N_MODES && rc == 0; m++)
                rc = run_workload(e, &w[wi], m, &a, &ms[m], ref) != 0;
        if (rc)
            break;
        tw_engine_stats sl, sd;
        tw_engine_stats_get(e, "nodraft", &sl, NULL);
        tw_engine_stats_get(e, "withdraft", &sd, NULL);
        snap_lookup = sl.spec_snapshot_us_per_verify;
        snap_draft = sd.spec_snapshot_us_per_verify;
        print_results(&w[wi], ms, cpu_clock);
        double plain = speed(&ms[M_PLAIN], cpu_clock);
        for (int m = 0; m < N_MODES; m++) {
            ratio[wi][m] = plain > 0 ? speed(&ms[m], cpu_clock) / plain : 0;
            accept[wi][m] = ms[m].drafted ? (double)ms[m].accepted / (double)ms[m].drafted : 0;
            if (!ms[m].same)
                rc = 3;
        }
        char *text = NULL;
        size_t len = 0;
        if (tw_engine_detokenize(e, "nodraft", ref[0].ids, ref[0].n, true, &text, &len, NULL) ==
            TW_OK)
            printf("  first output (plain, %zu tokens): %s%.240s%s\n", ref[0].n,
                   w[wi].answer_prefix[0], text, len > 240 ? "..." : "");
        free(text);
    }
    tw_engine_destroy(e);
    for (int wi = 0; wi < 2; wi++)
        for (size_t i = 0; i < w[wi].n; i++)
            free(w[wi].text[i]);
    if (rc != 0 && rc != 3)
        return rc;

    printf("\nstate save/restore per verification (engine stats): %.1f us in lookup rounds, "
           "%.1f us in draft rounds\n",
           (double)snap_lookup, (double)snap_draft);
    tw_spec_costs costs;
    if (tw_bench_spec_costs(a.model, a.draft, a.threads, &costs) == 0)
        tw_bench_spec_costs_print(&costs);

    printf("\ntargets:\n");
    printf("  lookup on echo >= 1.80x plain:      %.2fx  %s\n", ratio[0][M_LOOKUP],
           ratio[0][M_LOOKUP] >= 1.8 ? "met" : "MISSED");
    printf("  draft on open >= 1.30x plain:       %.2fx  %s\n", ratio[1][M_DRAFT],
           ratio[1][M_DRAFT] >= 1.3 ? "met" : "MISSED");
    printf("  draft acceptance on open >= 60%%:    %.1f%%  %s\n", 100 * accept[1][M_DRAFT],
           accept[1][M_DRAFT] >= 0.6 ? "met" : "MISSED");
    double worst = 1e9;
    for (int wi = 0; wi < 2; wi++)
        worst = fmin(worst, fmin(ratio[wi][M_AUTO], ratio[wi][M_AUTO_NODRAFT]));
    printf("  auto >= 0.95x plain everywhere:     %.2fx worst  %s\n", worst,
           worst >= 0.95 ? "met" : "MISSED");
    if (rc == 3)
        printf("\nA speculative mode changed the output: that is a bug.\n");
    return rc;
}
