#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenwire/wire.h"
#include "tw/kernels.h"

typedef enum opt_kind { K_STR, K_U32, K_SIZE, K_FLAG } opt_kind;

typedef struct opt_def {
    const char *name;
    opt_kind kind;
    const char *help;
} opt_def;

static const opt_def OPTS[] = {
    {"config", K_STR, "FILE      read settings from an INI file"},
    {"model", K_STR, "PATH       load a model at start (repeatable)"},
    {"model-name", K_STR, "NAME  serve the preceding --model under NAME"},
    {"draft", K_STR, "PATH       draft model (same vocabulary) for the preceding --model"},
    {"chat-template", K_STR,
     "FILE  Jinja chat template for the preceding --model, in place of its own"},
    {"models-dir", K_STR, "DIR   where downloaded models are kept"},
    {"max-download-bytes", K_SIZE, "N  largest model download accepted (0: no limit)"},
    {"listen", K_STR, "URL       RPC endpoint (repeatable; tcp://, ipc://, tls+tcp://)"},
    {"publish", K_STR, "URL      stream PUB endpoint"},
    {"threads", K_U32, "N|auto   compute threads (0 or auto: one per physical core)"},
    {"max-batch", K_U32, "N      sequences decoded together (0: from the hardware)"},
    {"prefill-chunk", K_U32,
     "N  prompt tokens per prefill step (0: from the hardware; above 64, taken down to a multiple "
     "of 64)"},
    {"mlock", K_FLAG, "           lock the weights in memory (needs RLIMIT_MEMLOCK)"},
    {"weight-pages", K_STR,
     "auto|map|huge  GGUF weights in a private huge-page copy (huge), "
     "the file mapping (map), or huge when the kernel has transparent "
     "huge pages (auto, default)"},
    {"isa", K_STR,
     "auto|scalar|avx2|avx2vnni|avx512  the instruction set the kernels run (auto, default: "
     "the widest this CPU has; avx2vnni is AVX2 with AVX-VNNI's 8-bit multiply-adds; a "
     "narrower one also asks OpenBLAS for kernels of its level)"},
    {"decode-prefetch", K_STR,
     "auto|on|off  whether kernels fetch weights ahead for single "
     "activations (auto, default: measured at start)"},
    {"f16-prefill", K_STR,
     "auto|tiles|panels|blas  how F16 and BF16 weights meet a prompt: "
     "the kernels' own tiles (decode's bits), their panels, or OpenBLAS's "
     "sgemm (auto, default: the fastest, measured at start)"},
    {"fetch-ahead-bytes", K_SIZE,
     "N|auto  bytes of the next weights each compute thread "
     "fetches while it waits within a decode step (auto, "
     "default: half the L2; 0: off)"},
    {"quantize", K_STR,
     "none|q8_0|q4_0|q4_k|q6_k  quantize a Hugging Face checkpoint's f32/f16/bf16 "
     "matrices as it loads, as tw-convert would (default none)"},
    {"kv-type", K_STR,
     "f16|f32      how sequences store attention K/V: f16 (default: half the "
     "memory per token and half the reads of a long context) or f32"},
    {"cache-bytes", K_SIZE, "N  in-memory prompt prefix cache per model (default 1 GiB)"},
    {"prefix-cache-pages", K_STR,
     "share|copy  how a restore from the prefix cache fills a sequence's "
     "K/V: by mapping the cache's pages, shared copy-on-write by every "
     "sequence restored from them (share, default, where K/V rows fill "
     "pages), or by copying the rows"},
    {"state-dir", K_STR,
     "DIR    persistent prompt state store (default "
     "$XDG_CACHE_HOME/tokenwire/state)"},
    {"state-bytes", K_SIZE, "N  persistent state store budget (default 4 GiB)"},
    {"state-entries", K_U32, "N  persistent state store entry limit (default 1024)"},
    {"no-state-store", K_FLAG, "  keep no prompt state on disk"},
    {"kv-budget-bytes", K_SIZE,
     "N  memory for sequence state (KV, recurrent state); requests "
     "that do not fit wait (0: half of available memory minus "
     "the models)"},
    {"long-context-thinking", K_STR,
     "on|off  think when a long context ends in a short "
     "question and the request did not choose (default on)"},
    {"long-context-chars", K_U32, "N  context length that counts as long (default 3000)"},
    {"short-question-chars", K_U32, "N  question length that counts as short (default 200)"},
    {"api-key", K_STR,
     "KEY      accepted API key (repeatable; visible in ps: prefer the "
     "file or TOKENWIRE_API_KEY)"},
    {"api-key-file", K_STR, "FILE accepted API keys, one per line"},
    {"tls-cert", K_STR, "FILE    PEM certificate for tls+tcp:// listeners"},
    {"tls-key", K_STR, "FILE     PEM private key for tls+tcp:// listeners"},
    {"max-message-bytes", K_SIZE, "N  largest request accepted"},
    {"max-prompt-tokens", K_U32, "N  longest token-id prompt accepted"},
    {"max-concurrent", K_U32, "N  generations running or queued at once"},
    {"default-deadline-ms", K_U32, "N  deadline of requests that set none (0: none)"},
    {"stream-grace-ms", K_U32, "N  how long a finished stream stays resumable"},
    {"max-stream-bytes", K_SIZE, "N  chunk bytes kept per stream"},
    {"max-streams", K_U32, "N  streams kept at once"},
    {"rpc-contexts", K_U32, "N  requests served at once"},
    {"max-resume-wait-ms", K_U32, "N  cap on Resume's wait_ms"},
    {"verbose", K_FLAG, "         log every request"},
    {"help", K_FLAG, "            this text"},
    {"version", K_FLAG, "         print the version"},
};
#define N_OPTS (sizeof OPTS / sizeof OPTS[0])

void twd_config_defaults(twd_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_message_bytes = TW_WIRE_DEFAULT_MAX_MESSAGE_BYTES;
    cfg->max_prompt_tokens = 131072;
    cfg->max_concurrent = 64;
    cfg->stream_grace_ms = 60000;
    cfg->max_stream_bytes = (size_t)64 << 20;
    cfg->max_streams = 4096;
    cfg->rpc_contexts = 128;
    cfg->max_resume_wait_ms = 30000;
    /* Every reference checkpoint keeps its greedy tokens and top-1
     * agreement with half-precision K/V (tw-conform --kv-type f16), and a
     * long context decodes 1.1-1.2x faster on half the memory. */
    cfg->kv_type = TW_KV_F16;
}

void twd_config_free(twd_config *cfg)
{
    for (size_t i = 0; i < cfg->n_models; i++) {
        free(cfg->models[i].path);
        free(cfg->models[i].name);
        free(cfg->models[i].draft);
        free(cfg->models[i].chat_template);
    }
    for (size_t i = 0; i < cfg->n_listen; i++)
        free(cfg->listen[i]);
    for (size_t i = 0; i < cfg->n_api_keys; i++) {
        /* Keys are secrets: do not leave them in freed memory. */
        volatile char *p = cfg->api_keys[i];
        while (*p)
            *p++ = 0;
        free(cfg->api_keys[i]);
    }
    free(cfg->publish);
    free(cfg->tls_cert);
    free(cfg->tls_key);
    free(cfg->models_dir);
    free(cfg->state_dir);
    memset(cfg, 0, sizeof *cfg);
}

void twd_config_usage(void *fp, const char *prog)
{
    FILE *f = fp;
    fprintf(f, "usage: %s [options]\n\nThe tokenwire engine daemon.\n\n", prog);
    for (size_t i = 0; i < N_OPTS; i++)
        fprintf(f, "  --%s %s\n", OPTS[i].name, OPTS[i].help);
    fprintf(f,
            "\nEvery option is also a key of the --config INI file (e.g. "
            "max_concurrent = 8).\nTOKENWIRE_API_KEY adds an accepted API key.\n"
            "--model-name, --draft and --chat-template apply to the --model given just before\n"
            "them, e.g.\n"
            "  --model a.gguf --draft a-draft.gguf --model b.gguf\n"
            "speculates for a.gguf with a-draft.gguf and serves b.gguf without a draft.\n"
            "Defaults: --listen %s --publish %s\n",
            TWD_DEFAULT_LISTEN, TWD_DEFAULT_PUBLISH);
}

const char *twd_isa_name(twd_isa isa)
{
    static const char *const names[] = {"auto", "scalar", "avx2", "avx2vnni", "avx512"};
    return (unsigned)isa < sizeof names / sizeof *names ? names[isa] : "auto";
}

/* ------------------------------------------------------------ values */

static tw_status parse_u64(const char *name, const char *v, uint64_t max, bool size_suffix,
                           uint64_t *out, tw_err *err)
{
    if (!v || !*v)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s needs a number", name);
    const char *p = v;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '-' || *p == '+')
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: \"%s\" is not a non-negative number",
                         name, v);
    errno = 0;
    char *end;
    unsigned long long x = strtoull(p, &end, 10);
    if (end == p || errno == ERANGE)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: \"%s\" is not a number in range", name,
                         v);
    uint64_t mult = 1;
    if (size_suffix && *end) {
        switch (*end) {
        case 'k': case 'K': mult = 1ull << 10; end++; break;
        case 'm': case 'M': mult = 1ull << 20; end++; break;
        case 'g': case 'G': mult = 1ull << 30; end++; break;
        default: break;
        }
    }
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: trailing characters in \"%s\"", name,
                         v);
    if (x > max / mult)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: %s is larger than %llu", name, v,
                         (unsigned long long)max);
    *out = x * mult;
    return TW_OK;
}

static tw_status set_str(char **dst, const char *v, const char *name, tw_err *err)
{
    if (!v || !*v)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s needs a value", name);
    char *d = strdup(v);
    if (!d)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    free(*dst);
    *dst = d;
    return TW_OK;
}

/* A setting that takes one of a few words. */
typedef struct choice {
    const char *word;
    int value;
} choice;

/* The value of v's word in choices[0..n) into *out; otherwise an error
 * naming the setting and every word ("NAME must be a, b or c"). */
static tw_status set_choice(int *out, const char *v, const char *name, const choice *choices,
                            size_t n, tw_err *err)
{
    for (size_t i = 0; v && i < n; i++) {
        if (!strcmp(v, choices[i].word)) {
            *out = choices[i].value;
            return TW_OK;
        }
    }
    char words[128] = "";
    size_t len = 0;
    for (size_t i = 0; i < n && len < sizeof words; i++)
        len += (size_t)snprintf(words + len, sizeof words - len, "%s%s",
                                i == 0 ? "" : i + 1 == n ? " or " : ", ", choices[i].word);
    return tw_errorf(err, TW_INVALID_ARGUMENT, "%s must be %s", name, words);
}

static tw_status add_key(twd_config *cfg, const char *k, size_t n, tw_err *err)
{
    if (n == 0)
        return TW_OK;
    if (cfg->n_api_keys == TWD_MAX_API_KEYS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "more than %d API keys", TWD_MAX_API_KEYS);
    char *d = strndup(k, n);
    if (!d)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    cfg->api_keys[cfg->n_api_keys++] = d;
    return TW_OK;
}

static tw_status read_key_file(twd_config *cfg, const char *path, tw_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "api-key-file %s: %s", path, strerror(errno));
    char line[1024];
    tw_status st = TW_OK;
    int lineno = 0;
    while (st == TW_OK && fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            st = tw_errorf(err, TW_INVALID_ARGUMENT, "api-key-file %s:%d: line too long", path,
                           lineno);
            break;
        }
        char *s = line;
        while (isspace((unsigned char)*s))
            s++;
        n = strlen(s);
        while (n && isspace((unsigned char)s[n - 1]))
            n--;
        if (n == 0 || s[0] == '#')
            continue;
        st = add_key(cfg, s, n, err);
    }
    explicit_bzero(line, sizeof line);
    fclose(f);
    return st;
}

/* Loader state besides cfg: lists given on the command line replace those
 * from the file instead of adding to them. */
typedef struct loader {
    twd_config *cfg;
    bool from_cli;
    bool cli_listen_seen;
    const char *file;
    tw_err *err;
    tw_status st;
} loader;

static const opt_def *find_opt(const char *name)
{
    char norm[64];
    size_t n = strlen(name);
    if (n >= sizeof norm)
        return NULL;
    for (size_t i = 0; i <= n; i++)
        norm[i] = name[i] == '_' ? '-' : (char)tolower((unsigned char)name[i]);
    for (size_t i = 0; i < N_OPTS; i++)
        if (strcmp(OPTS[i].name, norm) == 0)
            return &OPTS[i];
    return NULL;
}

static tw_status apply(loader *l, const opt_def *o, const char *v)
{
    twd_config *cfg = l->cfg;
    tw_err *err = l->err;
    const char *n = o->name;
    uint64_t x = 0;
    if (!strcmp(n, "threads") && v && !strcmp(v, "auto")) {
        cfg->threads = 0;
        return TW_OK;
    }
    if (!strcmp(n, "fetch-ahead-bytes") && v && !strcmp(v, "auto")) {
        cfg->fetch_ahead_set = false;
        return TW_OK;
    }
    if (o->kind == K_U32 || o->kind == K_SIZE) {
        tw_status st = parse_u64(n, v, o->kind == K_U32 ? UINT32_MAX : SIZE_MAX / 2,
                                 o->kind == K_SIZE, &x, err);
        if (st != TW_OK)
            return st;
    }
    if (!strcmp(n, "config"))
        return TW_OK; /* handled before everything else */
    if (!strcmp(n, "model")) {
        if (cfg->n_models == TWD_MAX_MODELS)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "more than %d models", TWD_MAX_MODELS);
        tw_status st = set_str(&cfg->models[cfg->n_models].path, v, n, err);
        if (st == TW_OK)
            cfg->n_models++;
        return st;
    }
    if (!strcmp(n, "model-name")) {
        if (cfg->n_models == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "model-name must follow a model");
        return set_str(&cfg->models[cfg->n_models - 1].name, v, n, err);
    }
    if (!strcmp(n, "draft")) {
        if (cfg->n_models == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "draft must follow a model");
        return set_str(&cfg->models[cfg->n_models - 1].draft, v, n, err);
    }
    if (!strcmp(n, "chat-template")) {
        if (cfg->n_models == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "chat-template must follow a model");
        return set_str(&cfg->models[cfg->n_models - 1].chat_template, v, n, err);
    }
    if (!strcmp(n, "listen")) {
        if (l->from_cli && !l->cli_listen_seen) {
            for (size_t i = 0; i < cfg->n_listen; i++)
                free(cfg->listen[i]);
            cfg->n_listen = 0;
            l->cli_listen_seen = true;
        }
        if (cfg->n_listen == TWD_MAX_LISTEN)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "more than %d listen URLs",
                             TWD_MAX_LISTEN);
        cfg->listen[cfg->n_listen] = NULL;
        tw_status st = set_str(&cfg->listen[cfg->n_listen], v, n, err);
        if (st == TW_OK)
            cfg->n_listen++;
        return st;
    }
    if (!strcmp(n, "publish"))
        return set_str(&cfg->publish, v, n, err);
    if (!strcmp(n, "models-dir"))
        return set_str(&cfg->models_dir, v, n, err);
    if (!strcmp(n, "state-dir"))
        return set_str(&cfg->state_dir, v, n, err);
    if (!strcmp(n, "api-key"))
        return v && *v ? add_key(cfg, v, strlen(v), err)
                       : tw_errorf(err, TW_INVALID_ARGUMENT, "api-key needs a value");
    if (!strcmp(n, "api-key-file"))
        return read_key_file(cfg, v, err);
    if (!strcmp(n, "tls-cert"))
        return set_str(&cfg->tls_cert, v, n, err);
    if (!strcmp(n, "tls-key"))
        return set_str(&cfg->tls_key, v, n, err);
    int c;
    tw_status cs;
    if (!strcmp(n, "weight-pages")) {
        static const choice pages[] = {
            {"auto", TW_WEIGHTS_AUTO}, {"map", TW_WEIGHTS_MAP}, {"huge", TW_WEIGHTS_HUGE}};
        cs = set_choice(&c, v, n, pages, 3, err);
        if (cs == TW_OK)
            cfg->weight_pages = (tw_weight_pages)c;
        return cs;
    }
    if (!strcmp(n, "isa")) {
        static const choice isas[] = {{"auto", TWD_ISA_AUTO},
                                      {"scalar", TWD_ISA_SCALAR},
                                      {"avx2", TWD_ISA_AVX2},
                                      {"avx2vnni", TWD_ISA_AVX2VNNI},
                                      {"avx512", TWD_ISA_AVX512}};
        cs = set_choice(&c, v, n, isas, 5, err);
        if (cs == TW_OK)
            cfg->isa = (twd_isa)c;
        return cs;
    }
    if (!strcmp(n, "decode-prefetch")) {
        static const choice modes[] = {
            {"auto", TWD_PREFETCH_AUTO}, {"on", TWD_PREFETCH_ON}, {"off", TWD_PREFETCH_OFF}};
        cs = set_choice(&c, v, n, modes, 3, err);
        if (cs == TW_OK)
            cfg->decode_prefetch = (twd_prefetch)c;
        return cs;
    }
    if (!strcmp(n, "f16-prefill")) {
        static const choice modes[] = {{"auto", TWD_F16_PREFILL_AUTO},
                                       {"tiles", TWD_F16_PREFILL_TILES},
                                       {"panels", TWD_F16_PREFILL_PANELS},
                                       {"blas", TWD_F16_PREFILL_BLAS}};
        cs = set_choice(&c, v, n, modes, 4, err);
        if (cs == TW_OK)
            cfg->f16_prefill = (twd_f16_prefill)c;
        return cs;
    }
    if (!strcmp(n, "quantize")) {
        static const choice types[] = {{"none", TW_TYPE_F32},
                                       {"q8_0", TW_TYPE_Q8_0},
                                       {"q4_0", TW_TYPE_Q4_0},
                                       {"q4_k", TW_TYPE_Q4_K},
                                       {"q6_k", TW_TYPE_Q6_K}};
        cs = set_choice(&c, v, n, types, 5, err);
        if (cs == TW_OK)
            cfg->quantize = (tw_type)c;
        return cs;
    }
    if (!strcmp(n, "kv-type")) {
        static const choice types[] = {{"f32", TW_KV_F32}, {"f16", TW_KV_F16}};
        cs = set_choice(&c, v, n, types, 2, err);
        if (cs == TW_OK)
            cfg->kv_type = (tw_kv_type)c;
        return cs;
    }
    if (!strcmp(n, "prefix-cache-pages")) {
        static const choice modes[] = {{"share", 0}, {"copy", 1}};
        cs = set_choice(&c, v, n, modes, 2, err);
        if (cs == TW_OK)
            cfg->prefix_cache_copy = c == 1;
        return cs;
    }
    if (!strcmp(n, "long-context-thinking")) {
        if (v && (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1")))
            cfg->no_long_context_thinking = false;
        else if (v && (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0")))
            cfg->no_long_context_thinking = true;
        else
            return tw_errorf(err, TW_INVALID_ARGUMENT, "long-context-thinking must be on or off");
        return TW_OK;
    }
    if (!strcmp(n, "threads"))
        cfg->threads = (uint32_t)x;
    else if (!strcmp(n, "max-batch"))
        cfg->max_batch = (uint32_t)x;
    else if (!strcmp(n, "prefill-chunk"))
        cfg->prefill_chunk = (uint32_t)x;
    else if (!strcmp(n, "fetch-ahead-bytes")) {
        if (x > TW_FETCH_AHEAD_MAX)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "fetch-ahead-bytes must be at most %zu",
                             TW_FETCH_AHEAD_MAX);
        cfg->fetch_ahead_set = true;
        cfg->fetch_ahead_bytes = x;
    } else if (!strcmp(n, "mlock"))
        cfg->mlock = true;
    else if (!strcmp(n, "cache-bytes"))
        cfg->cache_bytes = x;
    else if (!strcmp(n, "state-bytes"))
        cfg->state_bytes = x;
    else if (!strcmp(n, "state-entries"))
        cfg->state_entries = (uint32_t)x;
    else if (!strcmp(n, "no-state-store"))
        cfg->no_state_store = true;
    else if (!strcmp(n, "kv-budget-bytes"))
        cfg->kv_budget_bytes = x;
    else if (!strcmp(n, "long-context-chars"))
        cfg->long_context_chars = (uint32_t)x;
    else if (!strcmp(n, "short-question-chars"))
        cfg->short_question_chars = (uint32_t)x;
    else if (!strcmp(n, "max-message-bytes")) {
        if (x < 1024)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "max-message-bytes must be at least 1024");
        cfg->max_message_bytes = (size_t)x;
    } else if (!strcmp(n, "max-download-bytes"))
        cfg->max_download_bytes = x;
    else if (!strcmp(n, "max-prompt-tokens"))
        cfg->max_prompt_tokens = (uint32_t)x;
    else if (!strcmp(n, "max-concurrent"))
        cfg->max_concurrent = (uint32_t)x;
    else if (!strcmp(n, "default-deadline-ms"))
        cfg->default_deadline_ms = (uint32_t)x;
    else if (!strcmp(n, "stream-grace-ms"))
        cfg->stream_grace_ms = (uint32_t)x;
    else if (!strcmp(n, "max-stream-bytes"))
        cfg->max_stream_bytes = (size_t)x;
    else if (!strcmp(n, "max-streams"))
        cfg->max_streams = (uint32_t)x;
    else if (!strcmp(n, "rpc-contexts"))
        cfg->rpc_contexts = (uint32_t)x;
    else if (!strcmp(n, "max-resume-wait-ms"))
        cfg->max_resume_wait_ms = (uint32_t)x;
    else if (!strcmp(n, "verbose"))
        cfg->verbose = true;
    else if (!strcmp(n, "help"))
        cfg->help = true;
    else if (!strcmp(n, "version"))
        cfg->version = true;
    return TW_OK;
}

static int on_ini_entry(void *user, const char *section, const char *name, const char *value)
{
    (void)section;
    loader *l = user;
    if (l->st != TW_OK)
        return 0;
    const opt_def *o = find_opt(name);
    if (!o || !strcmp(o->name, "config") || !strcmp(o->name, "help") ||
        !strcmp(o->name, "version")) {
        l->st = tw_errorf(l->err, TW_INVALID_ARGUMENT, "%s: unknown key \"%s\"", l->file, name);
        return 0;
    }
    if (o->kind == K_FLAG) {
        if (strcmp(value, "true") && strcmp(value, "1") && strcmp(value, "yes")) {
            if (strcmp(value, "false") && strcmp(value, "0") && strcmp(value, "no")) {
                l->st = tw_errorf(l->err, TW_INVALID_ARGUMENT, "%s: %s must be true or false",
                                  l->file, name);
                return 0;
            }
            return 1;
        }
    }
    l->st = apply(l, o, value);
    if (l->st != TW_OK) {
        tw_error_wrap(l->err, l->st, "%s", l->file);
        return 0;
    }
    return 1;
}

tw_status twd_config_load(twd_config *cfg, int argc, char **argv, tw_err *err)
{
    twd_config_defaults(cfg);
    struct option longopts[N_OPTS + 1];
    for (size_t i = 0; i < N_OPTS; i++) {
        longopts[i].name = OPTS[i].name;
        longopts[i].has_arg = OPTS[i].kind == K_FLAG ? no_argument : required_argument;
        longopts[i].flag = NULL;
        longopts[i].val = 0;
    }
    memset(&longopts[N_OPTS], 0, sizeof longopts[N_OPTS]);

    /* Pass 1: find --config and check the syntax of everything. */
    const char *config_file = NULL;
    opterr = 0;
    optind = 1;
    int idx;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
        if (c == '?' || c == ':')
            return tw_errorf(err, TW_INVALID_ARGUMENT, "unknown option or missing value: %s",
                             argv[optind - 1]);
        if (!strcmp(OPTS[idx].name, "config"))
            config_file = optarg;
    }
    if (optind < argc)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "unexpected argument: %s", argv[optind]);

    loader l = {.cfg = cfg, .err = err, .st = TW_OK, .file = config_file};
    if (config_file) {
        int rc = ini_parse(config_file, on_ini_entry, &l);
        if (l.st != TW_OK)
            return l.st;
        if (rc < 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "cannot read config file %s",
                             config_file);
        if (rc > 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "%s:%d: syntax error", config_file, rc);
    }

    const char *env_key = getenv("TOKENWIRE_API_KEY");
    if (env_key && *env_key) {
        tw_status st = add_key(cfg, env_key, strlen(env_key), err);
        if (st != TW_OK)
            return st;
    }

    /* Pass 2: the command line overrides. */
    l.from_cli = true;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
        tw_status st = apply(&l, &OPTS[idx], optarg);
        if (st != TW_OK)
            return tw_error_wrap(err, st, "--%s", OPTS[idx].name);
    }

    if (cfg->n_listen == 0) {
        cfg->listen[0] = strdup(TWD_DEFAULT_LISTEN);
        if (!cfg->listen[0])
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        cfg->n_listen = 1;
    }
    if (!cfg->publish && !(cfg->publish = strdup(TWD_DEFAULT_PUBLISH)))
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    if (cfg->max_concurrent == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "max-concurrent must be at least 1");
    if (cfg->rpc_contexts < 2)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "rpc-contexts must be at least 2");
    if (cfg->max_streams == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "max-streams must be at least 1");
    if (!cfg->tls_cert != !cfg->tls_key)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tls-cert and tls-key go together");
    return TW_OK;
}
