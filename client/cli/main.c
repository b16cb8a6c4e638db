/* tokenwire: the command-line client of tokenwired.
 *
 * Exit codes: 0 success, 1 the engine refused or failed the call, 2 usage
 * error, 3 the engine could not be reached in time. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "answer.h"
#include "pull.h"
#include "tokenwire/client.h"

#define EXIT_REFUSED 1
#define EXIT_USAGE 2
#define EXIT_UNREACHABLE 3

typedef struct cli {
    const char *engine;
    const char *pub;
    const char *api_key;
    const char *ca_file;
    const char *tls_server_name;
    const char *sha256;
    unsigned timeout_ms;
    /* command options */
    const char *model;
    const char *ids;
    const char *system;
    const char *name;
    bool stream;
    bool hide_reasoning;
    bool make_default;
    bool has_temperature, has_top_p, has_seed, has_top_k;
    float temperature, top_p;
    unsigned long long seed;
    unsigned top_k;
    unsigned max_tokens;
    unsigned max_total_tokens; /* reasoning included */
    const char *chat_template; /* load: a template file in place of the model's */
    char *chat_template_text;  /* its text, read before connecting */
    /* generate / chat: a JSON answer, fitting the schema when one is given */
    bool json;
    bool mean, last, cls, raw; /* embed: mean, last- or first-token pooling, no unit length */
    const char *json_schema_file;
    char *json_schema; /* the file's text, read before connecting */
    /* speculative decoding */
    const char *draft;
    bool has_speculate, has_draft_tokens;
    int speculate; /* Tokenwire__V1__SpeculationMode */
    unsigned draft_tokens;
} cli;

/* The engine takes templates of up to 1 MiB and JSON Schemas of up to
 * 256 KiB. */
#define TEMPLATE_MAX (1u << 20)
#define JSON_SCHEMA_MAX (256u << 10)

/* A text file's bytes, NUL-terminated (free()); NULL, with the reason on
 * stderr, when it cannot be read, is larger than max, or holds a NUL. */
static char *read_text_file(const char *path, size_t max)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "tokenwire: cannot open %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(max + 1);
    size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
    bool failed = ferror(f);
    fclose(f);
    char too_large[48];
    if (max % (1u << 20) == 0)
        snprintf(too_large, sizeof too_large, "larger than %zu MiB", max >> 20);
    else
        snprintf(too_large, sizeof too_large, "larger than %zu KiB", max >> 10);
    const char *why = !buf                ? "out of memory"
                      : failed            ? "read error"
                      : n > max           ? too_large
                      : memchr(buf, 0, n) ? "holds a NUL byte"
                                          : NULL;
    if (why) {
        fprintf(stderr, "tokenwire: %s: %s\n", path, why);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    return buf;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tokenwire [global options] COMMAND [options] [args]\n\n"
            "commands:\n"
            "  health                     is the engine up?\n"
            "  models                     list loaded models\n"
            "  stats [--model M]          engine counters\n"
            "  load PATH [--name N] [--default] [--draft DRAFT_PATH] [--chat-template FILE]\n"
            "  pull URL [--sha256 HEX] [--name N]   download a model and load it\n"
            "  unload NAME\n"
            "  tokenize [--model M] TEXT\n"
            "  detokenize [--model M] ID...\n"
            "  generate [--model M] [--ids 1,2,3 | PROMPT] [--stream] [format] [sampling]\n"
            "  chat [--model M] [--system TEXT] [--stream] [format] [sampling] MESSAGE\n"
            "      the model's reasoning, if any, goes to stderr and the answer to\n"
            "      stdout; --hide-reasoning drops it, --show-reasoning keeps it\n"
            "  embed [--model M] [--mean | --last | --cls] [--raw] [--ids 1,2,3 | TEXT]\n"
            "      the prompt's vector, its final hidden states pooled as the model's\n"
            "      files say (when they say nothing, a decoder's last token's and an\n"
            "      encoder's mean), or with --mean every token's mean, with --last the\n"
            "      last token's, with --cls an encoder's first ([CLS]); unit length\n"
            "      unless --raw; a JSON array\n"
            "  watch                      print every stream the engine publishes\n\n"
            "sampling: --max-tokens N --temperature T --top-k K --top-p P --seed S\n"
            "  (--max-tokens bounds the answer; --max-total-tokens N every generated\n"
            "  token, reasoning included)\n"
            "format: --json (the answer is a JSON object) or --json-schema FILE (a JSON\n"
            "  document that fits the JSON Schema in FILE, at most 256 KiB)\n"
            "speculative decoding: --speculate auto|off|lookup|draft --draft-tokens K\n"
            "  (auto: the engine decides; draft needs a model loaded with --draft)\n\n"
            "global options:\n"
            "  --engine URL    RPC endpoint (default %s, or $TOKENWIRE_ENGINE)\n"
            "  --pub URL       stream endpoint (default: the engine's TCP port + 1)\n"
            "  --api-key KEY   API key (or $TOKENWIRE_API_KEY)\n"
            "  --ca FILE       CA bundle for tls+tcp:// engines\n"
            "  --tls-server-name NAME  name the engine's certificate must carry\n"
            "  --timeout MS    per-call timeout (default 30000)\n",
            TW_CLIENT_DEFAULT_RPC_URL);
}

static int exit_for(tw_status st)
{
    if (st == TW_OK)
        return 0;
    if (st == TW_UNAVAILABLE || st == TW_DEADLINE_EXCEEDED)
        return EXIT_UNREACHABLE;
    return EXIT_REFUSED;
}

static int report(tw_status st, const tw_err *err)
{
    if (st != TW_OK)
        fprintf(stderr, "tokenwire: %s: %s\n", tw_status_name(st), err->msg);
    return exit_for(st);
}

/* tcp://host:7470 -> tcp://host:7471; other schemes need --pub. */
static char *derive_pub(const char *rpc)
{
    const char *colon = strrchr(rpc, ':');
    if (strncmp(rpc, "tcp://", 6) != 0 && strncmp(rpc, "tls+tcp://", 10) != 0)
        return NULL;
    if (!colon || colon < rpc + 6)
        return NULL;
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end || errno || port == 0 || port >= 65535)
        return NULL;
    size_t n = (size_t)(colon - rpc);
    char *out = malloc(n + 8);
    if (out)
        snprintf(out, n + 8, "%.*s:%lu", (int)n, rpc, port + 1);
    return out;
}

static bool parse_u32(const char *s, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || v > 0xffffffffUL || s[0] == '-')
        return false;
    *out = (unsigned)v;
    return true;
}

static bool parse_float(const char *s, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (!*s || *end || errno)
        return false;
    *out = v;
    return true;
}

static bool parse_speculate(const char *s, int *out)
{
    static const struct {
        const char *name;
        int mode;
    } modes[] = {
        {"auto", TOKENWIRE__V1__SPECULATION_MODE__SPECULATE_AUTO},
        {"off", TOKENWIRE__V1__SPECULATION_MODE__SPECULATE_OFF},
        {"lookup", TOKENWIRE__V1__SPECULATION_MODE__SPECULATE_LOOKUP},
        {"draft", TOKENWIRE__V1__SPECULATION_MODE__SPECULATE_DRAFT},
    };
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (!strcmp(s, modes[i].name)) {
            *out = modes[i].mode;
            return true;
        }
    }
    return false;
}

/* "1,2,3" or "1 2 3" -> ids (malloc'd). */
static bool parse_ids(const char *s, uint32_t **ids, size_t *n)
{
    size_t cap = strlen(s) / 2 + 1;
    uint32_t *v = malloc(cap * sizeof *v);
    if (!v)
        return false;
    size_t k = 0;
    const char *p = s;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        unsigned long x = strtoul(p, &end, 10);
        if (end == p || errno || x > 0xffffffffUL || k == cap) {
            free(v);
            return false;
        }
        v[k++] = (uint32_t)x;
        p = end;
        if (*p && *p != ',' && *p != ' ') {
            free(v);
            return false;
        }
    }
    *ids = v;
    *n = k;
    return k > 0;
}

static void print_status_reply(const Tokenwire__V1__Reply *rep)
{
    switch (rep->result_case) {
    case TOKENWIRE__V1__REPLY__RESULT_HEALTH:
        printf("state: %s\nversion: %s\nuptime_s: %llu\nmodels_ready: %u\n",
               rep->health->state ? rep->health->state : "?",
               rep->health->version ? rep->health->version : "?",
               (unsigned long long)rep->health->uptime_s, rep->health->models_ready);
        break;
    case TOKENWIRE__V1__REPLY__RESULT_LIST_MODELS:
        for (size_t i = 0; i < rep->list_models->n_models; i++) {
            const Tokenwire__V1__ModelInfo *m = rep->list_models->models[i];
            printf("%s%s\t%s\t%s\tctx=%u\tvocab=%u\t%s", m->name ? m->name : "?",
                   m->is_default ? " (default)" : "", m->state ? m->state : "?",
                   m->architecture ? m->architecture : "?", m->max_context, m->vocab_size,
                   m->path ? m->path : "");
            if (m->draft_model && *m->draft_model)
                printf("\tdraft=%s", m->draft_model);
            if (m->pooling && *m->pooling && strcmp(m->pooling, "unsaid") != 0)
                printf("\tpooling=%s", m->pooling);
            printf("\n");
        }
        break;
    case TOKENWIRE__V1__REPLY__RESULT_STATS: {
        const Tokenwire__V1__StatsReply *s = rep->stats;
        printf("requests_total: %llu\nrequests_failed: %llu\nrequests_running: %u\n"
               "requests_queued: %u\nprompt_tokens_total: %llu\ngenerated_tokens_total: %llu\n"
               "decode_tokens_per_s: %.1f\nprefill_tokens_per_s: %.1f\nrss_bytes: %llu\n"
               "chunks_published: %llu\nresumes_served: %llu\n",
               (unsigned long long)s->requests_total, (unsigned long long)s->requests_failed,
               s->requests_running, s->requests_queued,
               (unsigned long long)s->prompt_tokens_total,
               (unsigned long long)s->generated_tokens_total, s->decode_tokens_per_s,
               s->prefill_tokens_per_s, (unsigned long long)s->rss_bytes,
               (unsigned long long)s->chunks_published, (unsigned long long)s->resumes_served);
        printf("spec_drafted: %llu\nspec_accepted: %llu\nspec_speedup: %.2f\n",
               (unsigned long long)s->spec_drafted, (unsigned long long)s->spec_accepted,
               s->spec_speedup);
        break;
    }
    case TOKENWIRE__V1__REPLY__RESULT_LOAD_MODEL:
        printf("loaded %s (%s)\n", rep->load_model->model->name,
               rep->load_model->model->architecture);
        break;
    case TOKENWIRE__V1__REPLY__RESULT_UNLOAD_MODEL:
        printf("unloaded\n");
        break;
    case TOKENWIRE__V1__REPLY__RESULT_TOKENIZE:
        for (size_t i = 0; i < rep->tokenize->n_token_ids; i++)
            printf("%s%u", i ? " " : "", rep->tokenize->token_ids[i]);
        printf("\n");
        break;
    case TOKENWIRE__V1__REPLY__RESULT_DETOKENIZE:
        printf("%s\n", rep->detokenize->text ? rep->detokenize->text : "");
        break;
    default:
        break;
    }
}

/* How streamed chunks are printed: a watcher tags each with its stream and
 * sequence number; token ids are printed for chunks without text only when
 * the prompt was given as ids (a model without tokenizer), never in the
 * middle of text (a chunk may carry only a control token such as </think>).
 * Outside watch, text and reasoning go through the answer printer, as a
 * whole reply does. */
typedef struct print_mode {
    bool watch;
    bool ids;
    cli_answer answer;
} print_mode;

static int print_chunk(void *user, const Tokenwire__V1__StreamChunk *ch)
{
    print_mode *pm = user;
    bool watch = pm->watch;
    if (watch) {
        printf("[%s #%llu] ", ch->stream_id, (unsigned long long)ch->seq);
        if (ch->reasoning_delta)
            fputs(ch->reasoning_delta, stdout);
        if (ch->text_delta)
            fputs(ch->text_delta, stdout);
    } else {
        cli_answer_reasoning(&pm->answer, ch->reasoning_delta);
        cli_answer_text(&pm->answer, ch->text_delta);
    }
    if (!ch->text_delta && !ch->reasoning_delta && pm->ids)
        for (size_t i = 0; i < ch->n_token_ids; i++)
            printf("%u ", ch->token_ids[i]);
    if (!watch && ch->final)
        cli_answer_close(&pm->answer);
    if (watch || ch->final)
        printf("\n");
    fflush(stdout);
    return 0;
}

static int do_generate(tw_client *c, const cli *o, int argc, char **argv, bool chat)
{
    Tokenwire__V1__GenerateRequest g = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    Tokenwire__V1__TokenIds t = TOKENWIRE__V1__TOKEN_IDS__INIT;
    Tokenwire__V1__SamplingParams sp = TOKENWIRE__V1__SAMPLING_PARAMS__INIT;
    Tokenwire__V1__StopRules stop = TOKENWIRE__V1__STOP_RULES__INIT;
    Tokenwire__V1__ChatInput ci = TOKENWIRE__V1__CHAT_INPUT__INIT;
    Tokenwire__V1__SpeculativeOptions spec = TOKENWIRE__V1__SPECULATIVE_OPTIONS__INIT;
    Tokenwire__V1__OutputFormat format = TOKENWIRE__V1__OUTPUT_FORMAT__INIT;
    Tokenwire__V1__ChatMessage msgs[2];
    Tokenwire__V1__ChatMessage *mp[2];
    uint32_t *ids = NULL;
    size_t n_ids = 0;
    g.model = (char *)o->model;
    if (chat) {
        if (argc != 1) {
            fprintf(stderr, "tokenwire: chat needs one MESSAGE\n");
            return EXIT_USAGE;
        }
        size_t k = 0;
        if (o->system) {
            tokenwire__v1__chat_message__init(&msgs[k]);
            msgs[k].role = "system";
            msgs[k].content = (char *)o->system;
            mp[k] = &msgs[k];
            k++;
        }
        tokenwire__v1__chat_message__init(&msgs[k]);
        msgs[k].role = "user";
        msgs[k].content = argv[0];
        mp[k] = &msgs[k];
        k++;
        ci.n_messages = k;
        ci.messages = mp;
        g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_CHAT;
        g.chat = &ci;
    } else if (o->ids) {
        if (argc != 0 || !parse_ids(o->ids, &ids, &n_ids)) {
            fprintf(stderr, "tokenwire: --ids takes a list like 1,2,3 and no PROMPT\n");
            free(ids);
            return EXIT_USAGE;
        }
        t.n_ids = n_ids;
        t.ids = ids;
        g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
        g.token_ids = &t;
    } else {
        if (argc != 1) {
            fprintf(stderr, "tokenwire: generate needs a PROMPT or --ids\n");
            return EXIT_USAGE;
        }
        g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TEXT;
        g.text = argv[0];
    }
    sp.has_temperature = o->has_temperature;
    sp.temperature = o->temperature;
    sp.has_top_p = o->has_top_p;
    sp.top_p = o->top_p;
    sp.has_top_k = o->has_top_k;
    sp.top_k = o->top_k;
    sp.has_seed = o->has_seed;
    sp.seed = o->seed;
    g.sampling = &sp;
    if (o->max_tokens) {
        stop.has_max_tokens = 1;
        stop.max_tokens = o->max_tokens;
        g.stop = &stop;
    }
    if (o->max_total_tokens) {
        stop.has_max_total_tokens = 1;
        stop.max_total_tokens = o->max_total_tokens;
        g.stop = &stop;
    }
    if (o->has_speculate || o->has_draft_tokens) {
        spec.has_mode = o->has_speculate;
        spec.mode = (Tokenwire__V1__SpeculationMode)o->speculate;
        spec.has_max_draft_tokens = o->has_draft_tokens;
        spec.max_draft_tokens = o->draft_tokens;
        g.speculative = &spec;
    }
    if (o->json || o->json_schema) {
        format.has_kind = 1;
        format.kind = TOKENWIRE__V1__OUTPUT_KIND__OUTPUT_JSON;
        format.json_schema = o->json_schema;
        g.format = &format;
    }
    tw_err err;
    tw_status st;
    if (o->stream) {
        print_mode pm = {false, o->ids != NULL, {0}};
        cli_answer_init(&pm.answer, !o->hide_reasoning);
        st = tw_client_generate_stream(c, &g, print_chunk, &pm, NULL, &err);
        cli_answer_close(&pm.answer);
    } else {
        Tokenwire__V1__Reply *rep = NULL;
        st = tw_client_generate(c, &g, &rep, &err);
        if (st == TW_OK) {
            for (size_t i = 0; i < rep->generate->n_choices; i++) {
                const Tokenwire__V1__Choice *ch = rep->generate->choices[i];
                cli_answer answer;
                cli_answer_init(&answer, !o->hide_reasoning);
                cli_answer_reasoning(&answer, ch->reasoning);
                cli_answer_close(&answer);
                /* token ids stand in for text only when the prompt was
                 * given as ids (a model without tokenizer), as when
                 * streaming: an answer cut off inside the reasoning is
                 * empty, not its ids */
                if (ch->text && *ch->text) {
                    cli_answer_text(&answer, ch->text);
                    printf("\n");
                } else {
                    for (size_t k = 0; o->ids && k < ch->n_token_ids; k++)
                        printf("%s%u", k ? " " : "", ch->token_ids[k]);
                    printf("\n");
                }
            }
        }
        tw_wire_free_reply(rep);
    }
    free(ids);
    return report(st, &err);
}

/* embed: one Generate asking for the prompt's vector. */
static int do_embed(tw_client *c, const cli *o, int argc, char **argv)
{
    Tokenwire__V1__GenerateRequest g = TOKENWIRE__V1__GENERATE_REQUEST__INIT;
    Tokenwire__V1__TokenIds t = TOKENWIRE__V1__TOKEN_IDS__INIT;
    Tokenwire__V1__EmbedOptions eo = TOKENWIRE__V1__EMBED_OPTIONS__INIT;
    uint32_t *ids = NULL;
    size_t n_ids = 0;
    if (o->ids ? argc != 0 || !parse_ids(o->ids, &ids, &n_ids) : argc != 1) {
        fprintf(stderr, "tokenwire: embed takes a TEXT or --ids, not both\n");
        free(ids);
        return EXIT_USAGE;
    }
    g.model = (char *)o->model;
    if (o->ids) {
        t.n_ids = n_ids;
        t.ids = ids;
        g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TOKEN_IDS;
        g.token_ids = &t;
    } else {
        g.prompt_case = TOKENWIRE__V1__GENERATE_REQUEST__PROMPT_TEXT;
        g.text = argv[0];
    }
    eo.has_pooling = 1;
    eo.pooling = o->mean   ? TOKENWIRE__V1__POOLING__POOLING_MEAN
                 : o->last ? TOKENWIRE__V1__POOLING__POOLING_LAST
                 : o->cls  ? TOKENWIRE__V1__POOLING__POOLING_CLS
                           : TOKENWIRE__V1__POOLING__POOLING_MODEL;
    eo.has_normalize = 1;
    eo.normalize = !o->raw;
    g.embed = &eo;
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    tw_status st = tw_client_generate(c, &g, &rep, &err);
    const Tokenwire__V1__Choice *ch =
        st == TW_OK && rep->generate->n_choices ? rep->generate->choices[0] : NULL;
    if (st == TW_OK && (!ch || ch->n_embedding == 0))
        st = tw_errorf(&err, TW_INTERNAL, "the engine answered without a vector");
    for (size_t i = 0; st == TW_OK && i < ch->n_embedding; i++)
        printf("%s%.9g", i ? ", " : "[", (double)ch->embedding[i]);
    if (st == TW_OK)
        printf("]\n");
    tw_wire_free_reply(rep);
    free(ids);
    return report(st, &err);
}

static int run_command(tw_client *c, const cli *o, const char *cmd, int argc, char **argv)
{
    Tokenwire__V1__Reply *rep = NULL;
    tw_err err;
    tw_status st;
    if (!strcmp(cmd, "generate") || !strcmp(cmd, "chat"))
        return do_generate(c, o, argc, argv, !strcmp(cmd, "chat"));
    if (!strcmp(cmd, "embed"))
        return do_embed(c, o, argc, argv);
    if (!strcmp(cmd, "pull") && argc == 1) {
        cli_pull_args pa = {argv[0], o->name, o->sha256, true, 250};
        st = cli_pull(c, &pa, &err);
        return report(st, &err);
    }
    if (!strcmp(cmd, "watch")) {
        print_mode pm = {true, true, {0}};
        st = tw_client_watch(c, print_chunk, &pm, 0, &err);
        return report(st, &err);
    }
    if (!strcmp(cmd, "health") && argc == 0) {
        st = tw_client_health(c, NULL, &rep, &err);
    } else if (!strcmp(cmd, "models") && argc == 0) {
        st = tw_client_list_models(c, NULL, &rep, &err);
    } else if (!strcmp(cmd, "stats") && argc == 0) {
        Tokenwire__V1__StatsRequest m = TOKENWIRE__V1__STATS_REQUEST__INIT;
        m.model = (char *)o->model;
        st = tw_client_stats(c, &m, &rep, &err);
    } else if (!strcmp(cmd, "load") && argc == 1) {
        Tokenwire__V1__LoadModelRequest m = TOKENWIRE__V1__LOAD_MODEL_REQUEST__INIT;
        m.source = argv[0];
        m.name = (char *)o->name;
        m.has_make_default = o->make_default;
        m.make_default = o->make_default;
        m.draft_source = (char *)o->draft;
        m.chat_template = o->chat_template_text;
        st = tw_client_load_model(c, &m, &rep, &err);
    } else if (!strcmp(cmd, "unload") && argc == 1) {
        Tokenwire__V1__UnloadModelRequest m = TOKENWIRE__V1__UNLOAD_MODEL_REQUEST__INIT;
        m.name = argv[0];
        st = tw_client_unload_model(c, &m, &rep, &err);
    } else if (!strcmp(cmd, "tokenize") && argc == 1) {
        Tokenwire__V1__TokenizeRequest m = TOKENWIRE__V1__TOKENIZE_REQUEST__INIT;
        m.model = (char *)o->model;
        m.text = argv[0];
        st = tw_client_tokenize(c, &m, &rep, &err);
    } else if (!strcmp(cmd, "detokenize") && argc >= 1) {
        uint32_t *ids = calloc((size_t)argc, sizeof *ids);
        if (!ids)
            return EXIT_REFUSED;
        for (int i = 0; i < argc; i++) {
            unsigned v;
            if (!parse_u32(argv[i], &v)) {
                fprintf(stderr, "tokenwire: \"%s\" is not a token id\n", argv[i]);
                free(ids);
                return EXIT_USAGE;
            }
            ids[i] = v;
        }
        Tokenwire__V1__DetokenizeRequest m = TOKENWIRE__V1__DETOKENIZE_REQUEST__INIT;
        m.model = (char *)o->model;
        m.n_token_ids = (size_t)argc;
        m.token_ids = ids;
        st = tw_client_detokenize(c, &m, &rep, &err);
        free(ids);
    } else {
        fprintf(stderr, "tokenwire: unknown command or wrong arguments: %s\n", cmd);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (st == TW_OK)
        print_status_reply(rep);
    tw_wire_free_reply(rep);
    return report(st, &err);
}

int main(int argc, char **argv)
{
    cli o = {0};
    /* NNG frees a closed socket's dialers on its own threads; at exit, wait
     * for that so that nothing is left half-freed. */
    atexit(tw_client_fini);
    o.engine = getenv("TOKENWIRE_ENGINE");
    o.api_key = getenv("TOKENWIRE_API_KEY");
    o.timeout_ms = 30000;
    enum {
        O_ENGINE = 1,
        O_PUB,
        O_KEY,
        O_CA,
        O_TIMEOUT,
        O_MODEL,
        O_IDS,
        O_SYSTEM,
        O_NAME,
        O_STREAM,
        O_DEFAULT,
        O_TEMP,
        O_TOPP,
        O_TOPK,
        O_SEED,
        O_MAXTOK,
        O_HELP,
        O_SERVER_NAME,
        O_SHA256,
        O_SPECULATE,
        O_DRAFT_TOKENS,
        O_DRAFT,
        O_SHOW_REASONING,
        O_HIDE_REASONING,
        O_MAXTOTAL,
        O_CHAT_TEMPLATE,
        O_JSON,
        O_JSON_SCHEMA,
        O_MEAN,
        O_LAST,
        O_CLS,
        O_RAW
    };
    static const struct option opts[] = {
        {"engine", required_argument, NULL, O_ENGINE},
        {"pub", required_argument, NULL, O_PUB},
        {"api-key", required_argument, NULL, O_KEY},
        {"ca", required_argument, NULL, O_CA},
        {"tls-server-name", required_argument, NULL, O_SERVER_NAME},
        {"sha256", required_argument, NULL, O_SHA256},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"model", required_argument, NULL, O_MODEL},
        {"ids", required_argument, NULL, O_IDS},
        {"system", required_argument, NULL, O_SYSTEM},
        {"name", required_argument, NULL, O_NAME},
        {"stream", no_argument, NULL, O_STREAM},
        {"show-reasoning", no_argument, NULL, O_SHOW_REASONING},
        {"hide-reasoning", no_argument, NULL, O_HIDE_REASONING},
        {"default", no_argument, NULL, O_DEFAULT},
        {"temperature", required_argument, NULL, O_TEMP},
        {"top-p", required_argument, NULL, O_TOPP},
        {"top-k", required_argument, NULL, O_TOPK},
        {"seed", required_argument, NULL, O_SEED},
        {"max-tokens", required_argument, NULL, O_MAXTOK},
        {"max-total-tokens", required_argument, NULL, O_MAXTOTAL},
        {"speculate", required_argument, NULL, O_SPECULATE},
        {"draft-tokens", required_argument, NULL, O_DRAFT_TOKENS},
        {"draft", required_argument, NULL, O_DRAFT},
        {"chat-template", required_argument, NULL, O_CHAT_TEMPLATE},
        {"json", no_argument, NULL, O_JSON},
        {"json-schema", required_argument, NULL, O_JSON_SCHEMA},
        {"mean", no_argument, NULL, O_MEAN},
        {"last", no_argument, NULL, O_LAST},
        {"cls", no_argument, NULL, O_CLS},
        {"raw", no_argument, NULL, O_RAW},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    int c;
    bool bad = false;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case O_ENGINE: o.engine = optarg; break;
        case O_PUB: o.pub = optarg; break;
        case O_KEY: o.api_key = optarg; break;
        case O_CA: o.ca_file = optarg; break;
        case O_SERVER_NAME: o.tls_server_name = optarg; break;
        case O_SHA256: o.sha256 = optarg; break;
        case O_TIMEOUT: bad |= !parse_u32(optarg, &o.timeout_ms); break;
        case O_MODEL: o.model = optarg; break;
        case O_IDS: o.ids = optarg; break;
        case O_SYSTEM: o.system = optarg; break;
        case O_NAME: o.name = optarg; break;
        case O_STREAM: o.stream = true; break;
        case O_SHOW_REASONING: o.hide_reasoning = false; break;
        case O_HIDE_REASONING: o.hide_reasoning = true; break;
        case O_DEFAULT: o.make_default = true; break;
        case O_TEMP: o.has_temperature = parse_float(optarg, &o.temperature); bad |= !o.has_temperature; break;
        case O_TOPP: o.has_top_p = parse_float(optarg, &o.top_p); bad |= !o.has_top_p; break;
        case O_TOPK: o.has_top_k = parse_u32(optarg, &o.top_k); bad |= !o.has_top_k; break;
        case O_SEED: {
            char *end;
            errno = 0;
            o.seed = strtoull(optarg, &end, 10);
            o.has_seed = *optarg && !*end && !errno;
            bad |= !o.has_seed;
            break;
        }
        case O_MAXTOK: bad |= !parse_u32(optarg, &o.max_tokens); break;
        case O_MAXTOTAL: bad |= !parse_u32(optarg, &o.max_total_tokens); break;
        case O_SPECULATE: o.has_speculate = parse_speculate(optarg, &o.speculate); bad |= !o.has_speculate; break;
        case O_DRAFT_TOKENS: o.has_draft_tokens = parse_u32(optarg, &o.draft_tokens); bad |= !o.has_draft_tokens; break;
        case O_DRAFT: o.draft = optarg; break;
        case O_CHAT_TEMPLATE:
            o.chat_template = optarg;
            break;
        case O_JSON:
            o.json = true;
            break;
        case O_JSON_SCHEMA:
            o.json_schema_file = optarg;
            break;
        case O_MEAN:
            o.mean = true;
            break;
        case O_LAST:
            o.last = true;
            break;
        case O_CLS:
            o.cls = true;
            break;
        case O_RAW:
            o.raw = true;
            break;
        case O_HELP: usage(stdout); return 0;
        default: bad = true; break;
        }
        if (bad) {
            fprintf(stderr, "tokenwire: unknown option or bad value: %s\n",
                    argv[optind - 1 < argc ? optind - 1 : argc - 1]);
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[optind];
    static const char *const commands[] = {"health",   "models", "stats",    "load",
                                           "unload",   "pull",   "tokenize", "detokenize",
                                           "generate", "chat",   "embed",    "watch"};
    bool known = false;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        known |= !strcmp(cmd, commands[i]);
    if (!known) {
        fprintf(stderr, "tokenwire: unknown command: %s\n", cmd);
        usage(stderr);
        return EXIT_USAGE;
    }
    if (o.ids) {
        /* Usage errors are reported before any connection is made. */
        uint32_t *ids = NULL;
        size_t n_ids = 0;
        bool ok = parse_ids(o.ids, &ids, &n_ids);
        free(ids);
        if (!ok) {
            fprintf(stderr, "tokenwire: --ids takes a list like 1,2,3\n");
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    /* embed takes a TEXT or --ids; told before connecting, as above */
    if (!strcmp(cmd, "embed") && argc - optind - 1 != (o.ids ? 0 : 1)) {
        fprintf(stderr, "tokenwire: embed takes a TEXT or --ids, not both\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    if (o.mean + o.last + o.cls > 1) {
        fprintf(stderr, "tokenwire: --mean, --last and --cls pool different ways; give one\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    /* A client that dials and hangs up before its handshake is done can
     * leave an NNG 1.5 IPC listener taking no more connections until the
     * daemon notices and reopens it, which cuts the calls then in flight;
     * so what can be refused here is refused before dialling. */
    for (int i = optind + 1; !strcmp(cmd, "detokenize") && i < argc; i++) {
        unsigned v;
        if (!parse_u32(argv[i], &v)) {
            fprintf(stderr, "tokenwire: \"%s\" is not a token id\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!strcmp(cmd, "load") && o.chat_template &&
        !(o.chat_template_text = read_text_file(o.chat_template, TEMPLATE_MAX)))
        return EXIT_USAGE;
    bool generates = !strcmp(cmd, "generate") || !strcmp(cmd, "chat");
    if (generates && o.json_schema_file &&
        !(o.json_schema = read_text_file(o.json_schema_file, JSON_SCHEMA_MAX))) {
        free(o.chat_template_text);
        return EXIT_USAGE;
    }
    const char *rpc = o.engine && *o.engine ? o.engine : TW_CLIENT_DEFAULT_RPC_URL;
    char *derived = NULL;
    const char *pub = o.pub;
    if (!pub) {
        derived = derive_pub(rpc);
        pub = derived ? derived : "";
    }
    if (!*pub && (o.stream || !strcmp(cmd, "watch"))) {
        fprintf(stderr, "tokenwire: give --pub URL for streaming with this engine URL\n");
        free(o.json_schema);
        free(o.chat_template_text);
        return EXIT_USAGE;
    }
    tw_client_opts co;
    tw_client_opts_init(&co);
    co.rpc_url = rpc;
    co.pub_url = pub;
    co.api_key = o.api_key;
    co.tls_ca_file = o.ca_file;
    co.tls_server_name = o.tls_server_name;
    co.timeout_ms = o.timeout_ms;
    tw_client *client = NULL;
    tw_err err;
    tw_status st = tw_client_open(&co, &client, &err);
    free(derived);
    if (st != TW_OK) {
        fprintf(stderr, "tokenwire: %s\n", err.msg);
        free(o.json_schema);
        free(o.chat_template_text);
        return st == TW_INVALID_ARGUMENT ? EXIT_USAGE : exit_for(st);
    }
    int rc = run_command(client, &o, cmd, argc - optind - 1, argv + optind + 1);
    tw_client_close(client);
    free(o.json_schema);
    free(o.chat_template_text);
    return rc;
}
