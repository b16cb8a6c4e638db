/* tokenwired: the engine daemon. Reads its configuration, creates the engine,
 * loads the configured models, serves RPCs and streams until SIGINT or
 * SIGTERM, then drains and frees everything. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "server.h"
#include "tw/engine.h"
#include "tw/log.h"

#ifndef TWD_VERSION
#define TWD_VERSION "unknown"
#endif

static int run(const twd_config *cfg)
{
    tw_err err;
    tw_engine_opts eo;
    tw_engine_opts_init(&eo);
    eo.threads = cfg->threads;
    tw_engine *engine = NULL;
    tw_status st = tw_engine_create(&eo, &engine, &err);
    if (st != TW_OK) {
        fprintf(stderr, "tokenwired: cannot create the engine: %s\n", err.msg);
        return 1;
    }
    for (size_t i = 0; i < cfg->n_models; i++) {
        tw_load_opts lo;
        tw_load_opts_init(&lo);
        tw_engine_model_info info;
        st = tw_engine_load_model(engine, cfg->models[i].path, cfg->models[i].name, &lo, &info,
                                  &err);
        if (st != TW_OK) {
            fprintf(stderr, "tokenwired: loading %s: %s\n", cfg->models[i].path, err.msg);
            tw_engine_destroy(engine);
            return 1;
        }
        tw_info("loaded model %s from %s", info.name, info.path);
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
    for (size_t i = 0; i < cfg->n_listen; i++)
        tw_info("serving RPCs on %s", cfg->listen[i]);
    tw_info("publishing streams on %s", cfg->publish);

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
    if (cfg.verbose)
        tw_log_set_level(TW_LOG_DEBUG);
    int rc = run(&cfg);
    twd_config_free(&cfg);
    return rc;
}
