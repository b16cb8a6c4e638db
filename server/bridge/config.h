/* tokenwire-bridge settings: defaults, INI file, command-line flags.
 *
 * Every INI key (section [bridge]) has a flag of the same name with dashes:
 * `request_timeout_s = 60` ⇔ `--request-timeout-s 60`. Flags win over the
 * file. API keys are kept only as SHA-256 digests, so that checking a
 * presented key takes the same time whatever it is.
 */
#ifndef TW_BRIDGE_CONFIG_H
#define TW_BRIDGE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

#define TW_BRIDGE_MAX_API_KEYS 64
#define TW_BRIDGE_URL_MAX 512

typedef struct tw_bridge_config {
    char listen[TW_BRIDGE_URL_MAX];     /* http://host:port */
    char engine[TW_BRIDGE_URL_MAX];     /* the engine's REP URL */
    char engine_pub[TW_BRIDGE_URL_MAX]; /* the engine's PUB URL */
    char engine_api_key[256];           /* sent to the engine; "" none */
    unsigned char key_digests[TW_BRIDGE_MAX_API_KEYS][32];
    size_t n_keys;                       /* 0: no authentication */
    size_t max_body_bytes;               /* larger bodies get 413 */
    uint32_t request_timeout_ms;         /* per request, engine work included */
    uint32_t read_timeout_ms;            /* a request body must arrive within this */
    uint32_t probe_interval_ms;
    uint32_t probe_timeout_ms;
    unsigned workers;                    /* requests handled at once */
    unsigned queue;                      /* requests waiting for a worker */
    size_t responses_store_bytes;        /* kept /v1/responses answers; 0: none */
    char responses_store_file[TW_BRIDGE_URL_MAX]; /* kept across restarts; "": not */
    bool responses_store_nosync;                  /* journal lines not synced to disk one by one */
    bool quiet;                          /* no access log on stderr */
} tw_bridge_config;

/* Fills the defaults: listen http://127.0.0.1:8080, engine
 * tcp://127.0.0.1:7470 / :7471, 8 MiB bodies, 600 s timeout, 30 s to read a
 * body, 64 workers, 64 MiB of kept responses. */
void tw_bridge_config_defaults(tw_bridge_config *c);

/* Adds an API key (stored as its digest). INVALID_ARGUMENT for an empty key
 * or past TW_BRIDGE_MAX_API_KEYS. */
tw_status tw_bridge_config_add_key(tw_bridge_config *c, const char *key, tw_err *err);

/* Reads keys from a file: one per line, blank lines and '#' comments skipped. */
tw_status tw_bridge_config_load_key_file(tw_bridge_config *c, const char *path, tw_err *err);

/* Applies the INI file at path. */
tw_status tw_bridge_config_load_ini(tw_bridge_config *c, const char *path, tw_err *err);

/* Applies argv (argv[0] is the program). --config FILE is applied first,
 * wherever it appears. *help is set by --help / -h (usage then printed by the
 * caller). INVALID_ARGUMENT names a bad flag or value. */
tw_status tw_bridge_config_parse_args(tw_bridge_config *c, int argc, char **argv, bool *help,
                                      tw_err *err);

/* The usage text of the flags. */
const char *tw_bridge_config_usage(void);

/* True when the Authorization header value carries one of the keys (or no
 * key is configured). Takes the same time whichever key matches. */
bool tw_bridge_config_check_auth(const tw_bridge_config *c, const char *authorization);

/* Who a request speaks for, as what it keeps is filed: the digest of its
 * Bearer key, or all zeros when the bridge takes no keys. */
void tw_bridge_config_owner(const tw_bridge_config *c, const char *authorization,
                            unsigned char owner[32]);

#endif
