#include "config.h"

#include <errno.h>
#include <ini.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void tw_bridge_config_defaults(tw_bridge_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->listen, sizeof c->listen, "http://127.0.0.1:8080");
    snprintf(c->engine, sizeof c->engine, "tcp://127.0.0.1:7470");
    snprintf(c->engine_pub, sizeof c->engine_pub, "tcp://127.0.0.1:7471");
    c->max_body_bytes = (size_t)8 << 20;
    c->request_timeout_ms = 600000;
    c->read_timeout_ms = 30000;
    c->probe_interval_ms = 500;
    c->probe_timeout_ms = 1000;
    c->workers = 64;
    c->queue = 256;
    c->responses_store_bytes = (size_t)64 << 20;
}

tw_status tw_bridge_config_add_key(tw_bridge_config *c, const char *key, tw_err *err)
{
    size_t len = strlen(key);
    if (len == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "an API key must not be empty");
    if (c->n_keys >= TW_BRIDGE_MAX_API_KEYS)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "at most %d API keys are allowed",
                         TW_BRIDGE_MAX_API_KEYS);
    SHA256((const unsigned char *)key, len, c->key_digests[c->n_keys++]);
    return TW_OK;
}

tw_status tw_bridge_config_load_key_file(tw_bridge_config *c, const char *path, tw_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return tw_errorf(err, TW_NOT_FOUND, "api key file %s: %s", path, strerror(errno));
    char line[1024];
    tw_status st = TW_OK;
    unsigned lineno = 0;
    while (st == TW_OK && fgets(line, sizeof line, f)) {
        lineno++;
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {
            st = tw_errorf(err, TW_INVALID_ARGUMENT, "api key file %s:%u: line too long", path,
                           lineno);
            break;
        }
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' ||
                         line[n - 1] == '\t'))
            line[--n] = '\0';
        char *k = line;
        while (*k == ' ' || *k == '\t')
            k++;
        if (*k == '\0' || *k == '#')
            continue;
        st = tw_bridge_config_add_key(c, k, err);
    }
    fclose(f);
    return st;
}

static tw_status parse_u64(const char *name, const char *v, uint64_t lo, uint64_t hi,
                           uint64_t *out, tw_err *err)
{
    char *end = NULL;
    errno = 0;
    if (!v || !*v || *v == '-')
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: expected a number, got '%s'", name,
                         v ? v : "");
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end != '\0' || x < lo || x > hi)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: expected a number in %llu..%llu, got '%s'",
                         name, (unsigned long long)lo, (unsigned long long)hi, v);
    *out = x;
    return TW_OK;
}

static tw_status parse_bool(const char *name, const char *v, bool *out, tw_err *err)
{
    if (!strcasecmp(v, "true") || !strcmp(v, "1") || !strcasecmp(v, "yes"))
        *out = true;
    else if (!strcasecmp(v, "false") || !strcmp(v, "0") || !strcasecmp(v, "no"))
        *out = false;
    else
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: expected true or false, got '%s'", name, v);
    return TW_OK;
}

static tw_status set_string(char *dst, size_t cap, const char *name, const char *v,
                            tw_err *err)
{
    size_t n = strlen(v);
    if (n >= cap)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: value too long (%zu bytes)", name, n);
    memcpy(dst, v, n + 1);
    return TW_OK;
}

/* One setting by its INI name (flags are translated to it). */
static tw_status apply(tw_bridge_config *c, const char *name, const char *v, tw_err *err)
{
    uint64_t x;
    tw_status st;
    if (!strcmp(name, "listen"))
        return set_string(c->listen, sizeof c->listen, name, v, err);
    if (!strcmp(name, "engine"))
        return set_string(c->engine, sizeof c->engine, name, v, err);
    if (!strcmp(name, "engine_pub"))
        return set_string(c->engine_pub, sizeof c->engine_pub, name, v, err);
    if (!strcmp(name, "engine_api_key"))
        return set_string(c->engine_api_key, sizeof c->engine_api_key, name, v, err);
    if (!strcmp(name, "api_key"))
        return tw_bridge_config_add_key(c, v, err);
    if (!strcmp(name, "api_key_file"))
        return tw_bridge_config_load_key_file(c, v, err);
    if (!strcmp(name, "max_body_bytes")) {
        if ((st = parse_u64(name, v, 1024, (uint64_t)1 << 30, &x, err)) == TW_OK)
            c->max_body_bytes = (size_t)x;
        return st;
    }
    if (!strcmp(name, "request_timeout_s")) {
        if ((st = parse_u64(name, v, 1, 86400, &x, err)) == TW_OK)
            c->request_timeout_ms = (uint32_t)(x * 1000);
        return st;
    }
    if (!strcmp(name, "read_timeout_ms")) {
        if ((st = parse_u64(name, v, 10, 3600000, &x, err)) == TW_OK)
            c->read_timeout_ms = (uint32_t)x;
        return st;
    }
    if (!strcmp(name, "probe_interval_ms")) {
        if ((st = parse_u64(name, v, 50, 60000, &x, err)) == TW_OK)
            c->probe_interval_ms = (uint32_t)x;
        return st;
    }
    if (!strcmp(name, "probe_timeout_ms")) {
        if ((st = parse_u64(name, v, 50, 60000, &x, err)) == TW_OK)
            c->probe_timeout_ms = (uint32_t)x;
        return st;
    }
    if (!strcmp(name, "workers")) {
        if ((st = parse_u64(name, v, 1, 4096, &x, err)) == TW_OK)
            c->workers = (unsigned)x;
        return st;
    }
    if (!strcmp(name, "queue")) {
        if ((st = parse_u64(name, v, 0, 65536, &x, err)) == TW_OK)
            c->queue = (unsigned)x;
        return st;
    }
    if (!strcmp(name, "responses_store_mb")) {
        if ((st = parse_u64(name, v, 0, 65536, &x, err)) == TW_OK)
            c->responses_store_bytes = (size_t)x << 20;
        return st;
    }
    if (!strcmp(name, "responses_store_file"))
        return set_string(c->responses_store_file, sizeof c->responses_store_file, name, v, err);
    if (!strcmp(name, "responses_store_sync")) {
        bool sync;
        if ((st = parse_bool(name, v, &sync, err)) == TW_OK)
            c->responses_store_nosync = !sync;
        return st;
    }
    if (!strcmp(name, "quiet"))
        return parse_bool(name, v, &c->quiet, err);
    return tw_errorf(err, TW_INVALID_ARGUMENT, "unknown setting '%s'", name);
}

typedef struct ini_ctx {
    tw_bridge_config *c;
    tw_err *err;
    tw_status st;
} ini_ctx;

static int on_ini_entry(void *user, const char *section, const char *name, const char *value)
{
    ini_ctx *ic = user;
    if (ic->st != TW_OK)
        return 0;
    /* Other programs' sections may share the file. */
    if (strcmp(section, "bridge") != 0)
        return 1;
    ic->st = apply(ic->c, name, value, ic->err);
    return ic->st == TW_OK;
}

tw_status tw_bridge_config_load_ini(tw_bridge_config *c, const char *path, tw_err *err)
{
    ini_ctx ic = {c, err, TW_OK};
    int rc = ini_parse(path, on_ini_entry, &ic);
    if (rc < 0)
        return tw_errorf(err, TW_NOT_FOUND, "config %s: cannot open", path);
    if (ic.st != TW_OK)
        return tw_error_wrap(err, ic.st, "config %s", path);
    if (rc > 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "config %s:%d: syntax error", path, rc);
    return TW_OK;
}

const char *tw_bridge_config_usage(void)
{
    return "usage: tokenwire-bridge [options]\n"
           "  --config FILE            INI file (section [bridge], keys as below with _)\n"
           "  --listen URL             HTTP address (default http://127.0.0.1:8080)\n"
           "  --engine URL             the engine's RPC (REP) address (tcp://127.0.0.1:7470)\n"
           "  --engine-pub URL         the engine's stream (PUB) address (tcp://127.0.0.1:7471)\n"
           "  --engine-api-key KEY     key the bridge presents to the engine\n"
           "  --api-key KEY            accept this Bearer key (repeatable)\n"
           "  --api-key-file FILE      accept the keys in FILE, one per line\n"
           "  --max-body-bytes N       larger request bodies get 413 (default 8388608)\n"
           "  --request-timeout-s N    per-request limit (default 600)\n"
           "  --read-timeout-ms N      a request body must arrive within N ms (default 30000)\n"
           "  --probe-interval-ms N    engine reachability check period (default 500)\n"
           "  --probe-timeout-ms N     engine health call timeout (default 1000)\n"
           "  --workers N              requests handled at once (default 64)\n"
           "  --queue N                requests waiting for a worker (default 256)\n"
           "  --responses-store-mb N   keep /v1/responses answers in N MiB, the least\n"
           "                           recently used dropped first; 0 keeps none (64)\n"
           "  --responses-store-file F read the kept responses from F at start and append\n"
           "                           each one kept or deleted to it (default: memory only)\n"
           "  --responses-store-sync B sync each appended line to the disk before the answer\n"
           "                           goes out (true, the default), or leave it to the\n"
           "                           system's write-back (false)\n"
           "  --quiet                  no access log\n";
}

tw_status tw_bridge_config_parse_args(tw_bridge_config *c, int argc, char **argv, bool *help,
                                      tw_err *err)
{
    *help = false;
    /* The file first, so that flags override it wherever they stand. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *path = NULL;
        if (!strcmp(a, "--config")) {
            if (i + 1 >= argc)
                return tw_errorf(err, TW_INVALID_ARGUMENT, "--config needs a value");
            path = argv[++i];
        } else if (!strncmp(a, "--config=", 9)) {
            path = a + 9;
        }
        if (path) {
            tw_status st = tw_bridge_config_load_ini(c, path, err);
            if (st != TW_OK)
                return st;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help = true;
            return TW_OK;
        }
        if (strncmp(a, "--", 2) != 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "unexpected argument '%s'", a);
        char name[64];
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (nlen == 0 || nlen >= sizeof name)
            return tw_errorf(err, TW_INVALID_ARGUMENT, "unknown flag '%s'", a);
        memcpy(name, a + 2, nlen);
        name[nlen] = '\0';
        for (char *p = name; *p; p++)
            if (*p == '-')
                *p = '_';
        const char *value;
        if (!strcmp(name, "quiet") && !eq) {
            value = "true";
        } else if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc)
                return tw_errorf(err, TW_INVALID_ARGUMENT, "%s needs a value", a);
            value = argv[++i];
        }
        if (!strcmp(name, "config"))
            continue;
        tw_status st = apply(c, name, value, err);
        if (st != TW_OK)
            return tw_error_wrap(err, st, "--%s", a + 2);
    }
    return TW_OK;
}

/* The key of a Bearer header, past the scheme and its spaces; NULL when
 * the header is not one. */
static const char *bearer_key(const char *authorization)
{
    /* "Bearer" is case-insensitive in RFC 6750; allow spaces after it. */
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return NULL;
    const char *key = authorization + 7;
    while (*key == ' ')
        key++;
    return key;
}

void tw_bridge_config_owner(const tw_bridge_config *c, const char *authorization,
                            unsigned char owner[32])
{
    memset(owner, 0, 32);
    const char *key = bearer_key(authorization);
    if (c->n_keys && key)
        SHA256((const unsigned char *)key, strlen(key), owner);
}

bool tw_bridge_config_check_auth(const tw_bridge_config *c, const char *authorization)
{
    if (c->n_keys == 0)
        return true;
    const char *key = bearer_key(authorization);
    if (!key)
        return false;
    unsigned char d[32];
    SHA256((const unsigned char *)key, strlen(key), d);
    /* Compare against every key without stopping early. */
    int match = 0;
    for (size_t i = 0; i < c->n_keys; i++)
        match |= CRYPTO_memcmp(d, c->key_digests[i], sizeof d) == 0;
    return match != 0;
}
