/* tokenwired: the engine daemon. Reads its configuration, creates the engine,
 * loads the configured models, serves RPCs and streams until SIGINT or
 * SIGTERM, then drains and frees everything. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "server.h"
#include "tw/blas.h"
#include "tw/chat_template.h"
#include "tw/engine.h"
#include "tw/hw.h"
#include "tw/log.h"

#ifndef TWD_VERSION
#define TWD_VERSION "unknown"
#endif

/* A --chat-template file's text (*out, free()): at most the largest source
 * the template compiler takes, and text (no NUL byte). */
static tw_status read_template(const char *path, char **out, tw_err *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tw_errorf(err, TW_NOT_FOUND, "chat template %s: cannot open it", path);
    char *buf = malloc(TW_CHAT_TEMPLATE_MAX_SOURCE + 1);
    size_t n = buf ? fread(buf, 1, TW_CHAT_TEMPLATE_MAX_SOURCE + 1, f) : 0;
    bool failed = buf && ferror(f);
    fclose(f);
    tw_status st = TW_OK;
    if (!buf)
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    else if (failed)
        st = tw_errorf(err, TW_INVALID_ARGUMENT, "chat template %s: read error", path);
    else if (n > TW_CHAT_TEMPLATE_MAX_SOURCE)
        st = tw_errorf(err, TW_INVALID_ARGUMENT, "chat template %s: larger than %u bytes", path,
                       TW_CHAT_TEMPLATE_MAX_SOURCE);
    else if (n == 0 || memchr(buf, 0, n))
        st = tw_errorf(err, TW_INVALID_ARGUMENT, "chat template %s: %s", path,
                       n ? "holds a NUL byte" : "empty");
    if (st != TW_OK) {
        free(buf);
        return st;
    }
    buf[n] = 0;
    *out = buf;
    return TW_OK;
}

/* widest: the ISA the CPU would run by itself (cfg->isa is in force). */
static int run(const twd_config *cfg, const char *widest)
{
    tw_err err;
    tw_engine_opts eo;
    tw_engine_opts_init(&eo);
    /* every setting the user left at 0 comes from the hardware */
    tw_hw_info hw;
    tw_hw_choice hc;
    tw_hw_detect(&hw, &err);
    tw_hw_choose(&hw, &hc);
    eo.threads = cfg->threads ? cfg->threads : hc.threads;
    eo.max_batch = cfg->max_batch ? cfg->max_batch : hc.max_batch;
    eo.prefill_chunk = cfg->prefill_chunk ? cfg->prefill_chunk : hc.prefill_chunk;
    eo.cache_bytes = cfg->cache_bytes;
    eo.state_dir = cfg->state_dir;
    eo.state_bytes = cfg->state_bytes;
    eo.state_entries = cfg->state_entries;
    eo.no_state_store = cfg->no_state_store;
    eo.mem_budget_bytes = cfg->kv_budget_bytes;
    eo.no_long_context_thinking = cfg->no_long_context_thinking;
    eo.prefix_cache_copy = cfg->prefix_cache_copy;
    eo.weight_pages = cfg->weight_pages;
    eo.kv_type = cfg->kv_type;
    eo.quantize = cfg->quantize;
    eo.long_context_chars = cfg->long_context_chars;
    eo.short_question_chars = cfg->short_question_chars;
    tw_hw_choice used = {eo.threads, eo.max_batch, eo.prefill_chunk,
                         cfg->fetch_ahead_set ? cfg->fetch_ahead_bytes : hc.fetch_ahead};
    tw_kernels_set_fetch_ahead((size_t)used.fetch_ahead);
    tw_hw_log_choices(&hw, &used,
                      &(tw_hw_overrides){cfg->threads != 0, cfg->max_batch != 0,
                                         cfg->prefill_chunk != 0, cfg->fetch_ahead_set});
    if (cfg->isa == TWD_ISA_AUTO)
        tw_info("kernels %s (auto: the widest this CPU has)", tw_kernels_isa());
    else
        tw_info("kernels %s (set by --isa; this CPU has %s)", tw_kernels_isa(), widest);
    char blas[192];
    tw_blas_core_text(blas, sizeof blas);
    tw_info("%s", blas);
    static const char *const prefetch_modes[] = {"auto", "on", "off"};
    const char *pmode = prefetch_modes[cfg->decode_prefetch];
    tw_prefetch_tune tune;
    char ptext[256];
    if (tw_hw_decode_prefetch(pmode, &hw, eo.threads, &tune, &err) != TW_OK)
        tw_warn("decode prefetch off: %s", err.msg);
    tw_hw_decode_prefetch_text(pmode, &tune, ptext, sizeof ptext);
    tw_info("decode prefetch %s", ptext);
    static const char *const f16_modes[] = {"auto", "tiles", "panels", "blas"};
    const char *fmode = f16_modes[cfg->f16_prefill];
    tw_f16_prefill_tune ftune;
    if (tw_hw_f16_prefill(fmode, eo.threads, &ftune, &err) != TW_OK)
        tw_warn("F16 and BF16 prompts on the kernels' own tiles: %s", err.msg);
    tw_hw_f16_prefill_text(fmode, &ftune, ptext, sizeof ptext);
    tw_info("F16 and BF16 prompts %s", ptext);
    tw_engine *engine = NULL;
    tw_status st = tw_engine_create(&eo, &engine, &err);
    if (st != TW_OK) {
        fprintf(stderr, "tokenwired: cannot create the engine: %s\n", err.msg);
        return 1;
    }
    for (size_t i = 0; i < cfg->n_models; i++) {
        tw_load_opts lo;
        tw_load_opts_init(&lo);
        lo.draft_path = cfg->models[i].draft;
        char *tmpl = NULL;
        st = cfg->models[i].chat_template ? read_template(cfg->models[i].chat_template, &tmpl, &err)
                                          : TW_OK;
        lo.chat_template = tmpl;
        tw_engine_model_info info;
        if (st == TW_OK)
            st = tw_engine_load_model(engine, cfg->models[i].path, cfg->models[i].name, &lo, &info,
                                      &err);
        free(tmpl);
        if (st != TW_OK) {
            fprintf(stderr, "tokenwired: loading %s: %s\n", cfg->models[i].path, err.msg);
            tw_engine_destroy(engine);
            return 1;
        }
        if (info.draft_path[0])
            tw_info("loaded model %s from %s with draft model %s", info.name, info.path,
                    info.draft_path);
        else
            tw_info("loaded model %s from %s", info.name, info.path);
        if (cfg->models[i].chat_template)
            tw_info("model %s: chat template from %s (tool calls: %s)", info.name,
                    cfg->models[i].chat_template, info.tool_format);
    }
    if (cfg->mlock) {
        if (tw_hw_lock_memory(&err) == TW_OK)
            tw_info("mlock: weights locked in memory");
        else
            tw_warn("mlock: %s; running without it", err.msg);
    }

    twd_server srv;
    st = twd_server_start(&srv, cfg, engine, &err);
    if (st != TW_OK) {
        fprintf(stderr, "tokenwired: %s\n", err.msg);
        twd_server_drain(&srv);
        tw_engine_destroy(engine);
        twd_server_stop(&srv);
        return 1;
    }
    /* the listeners' own addresses: a port 0 asked for is the port given */
    for (size_t i = 0; i < cfg->n_listen; i++)
        tw_info("serving RPCs on %s", srv.listeners.v[i].url);
    tw_info("publishing streams on %s", srv.listeners.v[cfg->n_listen].url);

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    tw_info("%s: draining", sig == SIGINT ? "SIGINT" : "SIGTERM");

    /* Order matters: loader threads use the engine; destroying the engine
     * delivers every request's final chunk through still-open sockets. */
    twd_server_drain(&srv);
    tw_engine_destroy(engine);
    twd_server_stop(&srv);
    tw_info("stopped");
    return 0;
}

/* OpenBLAS's kernel set follows the kernels' ISA: a narrower --isa asks for
 * the AVX2 set, as a machine without AVX-512 runs. OpenBLAS reads its choice
 * only while loading, so this may start the program again (with the same
 * argv; a restart keeps only argv and the environment): it runs before any
 * thread or socket exists. */
static void pick_blas(const twd_config *cfg, char **argv)
{
    tw_blas_level cap = cfg->isa == TWD_ISA_AUTO || cfg->isa == TWD_ISA_AVX512
                            ? TW_BLAS_LEVEL_AVX512
                            : TW_BLAS_LEVEL_AVX2;
    tw_err err;
    if (tw_blas_pick_core(argv, cap, &err) != TW_OK)
        tw_warn("%s; going on with OpenBLAS's own choice", err.msg);
}

int main(int argc, char **argv)
{
    /* Signals are taken synchronously by sigwait in the main thread; every
     * thread created from here on inherits the blocked mask. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    twd_config cfg;
    tw_err err;
    if (twd_config_load(&cfg, argc, argv, &err) != TW_OK) {
        fprintf(stderr, "tokenwired: %s\n(see tokenwired --help)\n", err.msg);
        twd_config_free(&cfg);
        return 2;
    }
    if (cfg.help) {
        twd_config_usage(stdout, "tokenwired");
        twd_config_free(&cfg);
        return 0;
    }
    if (cfg.version) {
        printf("tokenwired %s\n", TWD_VERSION);
        twd_config_free(&cfg);
        return 0;
    }
    /* the ISA before anything measures or loads: the hardware report, the
     * start-up tunes and the weights' layout all follow it */
    const char *widest = tw_kernels_isa();
    if (tw_kernels_force_isa(twd_isa_name(cfg.isa), &err) != TW_OK) {
        fprintf(stderr, "tokenwired: isa %s: %s (it has %s)\n", twd_isa_name(cfg.isa), err.msg,
                widest);
        twd_config_free(&cfg);
        return 2;
    }
    pick_blas(&cfg, argv);
    if (cfg.verbose)
        tw_log_set_level(TW_LOG_DEBUG);
    int rc = run(&cfg, widest);
    twd_config_free(&cfg);
    return rc;
}
