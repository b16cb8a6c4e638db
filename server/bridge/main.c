/* tokenwire-bridge: the OpenAI-compatible HTTP front of tokenwired. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "bridge.h"
#include "http_server.h"

int main(int argc, char **argv)
{
    tw_bridge_config cfg;
    tw_bridge_config_defaults(&cfg);
    bool help = false;
    tw_err err = {{0}};
    if (tw_bridge_config_parse_args(&cfg, argc, argv, &help, &err) != TW_OK) {
        fprintf(stderr, "tokenwire-bridge: %s\n%s", err.msg, tw_bridge_config_usage());
        return 2;
    }
    if (help) {
        fputs(tw_bridge_config_usage(), stdout);
        return 0;
    }

    /* Signals are taken by sigwait below; every thread started from here on
     * inherits the mask, so none of them is interrupted by one. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    tw_bridge_engine engine;
    tw_bridge_engine_cfg ecfg = {
        .rpc_url = cfg.engine,
        .pub_url = cfg.engine_pub,
        .api_key = cfg.engine_api_key[0] ? cfg.engine_api_key : NULL,
        .request_timeout_ms = cfg.request_timeout_ms,
        .probe_timeout_ms = cfg.probe_timeout_ms,
        .probe_interval_ms = cfg.probe_interval_ms,
    };
    if (tw_bridge_engine_open(&engine, &ecfg, &err) != TW_OK) {
        fprintf(stderr, "tokenwire-bridge: %s\n", err.msg);
        return 1;
    }
    tw_bridge bridge;
    if (tw_bridge_init(&bridge, &cfg, &engine, &err) != TW_OK) {
        fprintf(stderr, "tokenwire-bridge: %s\n", err.msg);
        tw_bridge_engine_close(&engine);
        return 1;
    }
    const char *store_file = cfg.responses_store_file[0] ? cfg.responses_store_file : NULL;
    if (store_file && bridge.store) {
        size_t loaded, skipped;
        if (tw_bridge_resp_store_load(bridge.store, store_file, &loaded, &skipped, &err) != TW_OK) {
            fprintf(stderr, "tokenwire-bridge: %s\n", err.msg);
            tw_bridge_fini(&bridge);
            tw_bridge_engine_close(&engine);
            return 1;
        }
        fprintf(stderr, "tokenwire-bridge: %zu kept responses read from %s\n", loaded, store_file);
        if (skipped)
            fprintf(stderr, "tokenwire-bridge: %zu lines skipped, the first: %s\n", skipped,
                    err.msg);
        /* Written back at once, so that a file that cannot be written is
         * found now rather than later, and from then on every answer kept
         * or deleted is appended to it as it happens. */
        tw_bridge_resp_store_journal_sync(bridge.store, !cfg.responses_store_nosync);
        if (tw_bridge_resp_store_journal(bridge.store, store_file, &err) != TW_OK) {
            fprintf(stderr, "tokenwire-bridge: %s\n", err.msg);
            tw_bridge_fini(&bridge);
            tw_bridge_engine_close(&engine);
            return 1;
        }
    }
    tw_bridge_http *http = NULL;
    if (tw_bridge_http_start(&bridge, &http, &err) != TW_OK) {
        fprintf(stderr, "tokenwire-bridge: %s\n", err.msg);
        tw_bridge_fini(&bridge);
        tw_bridge_engine_close(&engine);
        return 1;
    }
    fprintf(stderr, "tokenwire-bridge: listening on %s (engine %s, %s; %s)\n", cfg.listen,
            cfg.engine, tw_bridge_engine_up(&engine) ? "up" : "not reachable yet",
            cfg.n_keys ? "API keys required" : "no API key required");

    int sig = 0;
    sigwait(&stop_signals, &sig);
    fprintf(stderr, "tokenwire-bridge: %s, stopping\n", strsignal(sig));
    tw_bridge_http_stop(http);
    int rc = 0;
    if (store_file && bridge.store) {
        size_t kept, bytes;
        tw_bridge_resp_store_usage(bridge.store, &kept, &bytes);
        if (tw_bridge_resp_store_save(bridge.store, store_file, &err) == TW_OK) {
            fprintf(stderr, "tokenwire-bridge: %zu kept responses written to %s\n", kept,
                    store_file);
        } else {
            fprintf(stderr, "tokenwire-bridge: %s\n", err.msg);
            rc = 1;
        }
    }
    tw_bridge_fini(&bridge);
    tw_bridge_engine_close(&engine);
    return rc;
}
