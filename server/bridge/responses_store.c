#include "responses_store.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct kept {
    struct kept *older, *newer; /* by last use */
    unsigned char owner[32];
    char *response, *items; /* compact JSON text */
    size_t bytes;           /* what it counts against the limit */
    char id[TW_BRIDGE_RESP_ID_MAX + 1];
} kept;

struct tw_bridge_resp_store {
    pthread_mutex_t mu;
    void *by_id; /* tsearch tree of kept * ordered by id */
    kept *oldest, *newest;
    size_t max_bytes, bytes, entries;
};

static int by_id(const void *a, const void *b)
{
    return strcmp(((const kept *)a)->id, ((const kept *)b)->id);
}

tw_status tw_bridge_resp_store_open(size_t max_bytes, tw_bridge_resp_store **out, tw_err *err)
{
    *out = NULL;
    tw_bridge_resp_store *s = calloc(1, sizeof *s);
    if (!s)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "responses store: out of memory");
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        return tw_errorf(err, TW_INTERNAL, "responses store: cannot make its lock");
    }
    s->max_bytes = max_bytes;
    *out = s;
    return TW_OK;
}

static void unlink_entry(tw_bridge_resp_store *s, kept *e)
{
    if (e->older)
        e->older->newer = e->newer;
    else
        s->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        s->newest = e->older;
    e->older = e->newer = NULL;
}

static void link_newest(tw_bridge_resp_store *s, kept *e)
{
    e->older = s->newest;
    e->newer = NULL;
    if (s->newest)
        s->newest->newer = e;
    else
        s->oldest = e;
    s->newest = e;
}

static void free_entry(kept *e)
{
    free(e->response);
    free(e->items);
    free(e);
}

/* Takes e out of the tree, the order and the count, and frees it. */
static void drop(tw_bridge_resp_store *s, kept *e)
{
    tdelete(e, &s->by_id, by_id);
    unlink_entry(s, e);
    s->bytes -= e->bytes;
    s->entries--;
    free_entry(e);
}

void tw_bridge_resp_store_close(tw_bridge_resp_store *s)
{
    if (!s)
        return;
    while (s->oldest)
        drop(s, s->oldest);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* The entry kept under id, whoever owns it; NULL when none. */
static kept *find(tw_bridge_resp_store *s, const char *id)
{
    kept key;
    size_t n = strlen(id);
    if (n > TW_BRIDGE_RESP_ID_MAX)
        return NULL;
    memcpy(key.id, id, n + 1);
    kept **hit = tfind(&key, &s->by_id, by_id);
    return hit ? *hit : NULL;
}

static bool owned(const kept *e, const unsigned char owner[32])
{
    return e && CRYPTO_memcmp(e->owner, owner, sizeof e->owner) == 0;
}

bool tw_bridge_resp_store_put(tw_bridge_resp_store *s, const unsigned char owner[32],
                              const json_t *response, const json_t *items)
{
    const char *id = json_string_value(json_object_get(response, "id"));
    if (!id || strlen(id) > TW_BRIDGE_RESP_ID_MAX)
        return false;
    const size_t flags = JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17);
    kept *e = calloc(1, sizeof *e);
    if (!e)
        return false;
    memcpy(e->owner, owner, sizeof e->owner);
    snprintf(e->id, sizeof e->id, "%s", id);
    e->response = json_dumps(response, flags);
    e->items = json_dumps(items, flags);
    if (!e->response || !e->items) {
        free_entry(e);
        return false;
    }
    e->bytes = sizeof *e + strlen(e->response) + strlen(e->items);
    if (e->bytes > s->max_bytes) {
        free_entry(e);
        return false;
    }
    pthread_mutex_lock(&s->mu);
    kept *old = find(s, id);
    if (old)
        drop(s, old);
    while (s->oldest && s->bytes + e->bytes > s->max_bytes)
        drop(s, s->oldest);
    kept **slot = tsearch(e, &s->by_id, by_id);
    if (slot) {
        link_newest(s, e);
        s->bytes += e->bytes;
        s->entries++;
    }
    pthread_mutex_unlock(&s->mu);
    if (!slot)
        free_entry(e);
    return slot != NULL;
}

bool tw_bridge_resp_store_get(tw_bridge_resp_store *s, const unsigned char owner[32],
                              const char *id, json_t **response, json_t **items)
{
    if (response)
        *response = NULL;
    if (items)
        *items = NULL;
    /* Parsed outside the lock, from copies, so readers do not queue behind
     * one another's parsing. */
    char *r_text = NULL, *i_text = NULL;
    pthread_mutex_lock(&s->mu);
    kept *e = find(s, id);
    bool ok = owned(e, owner);
    if (ok) {
        unlink_entry(s, e);
        link_newest(s, e);
        r_text = response ? strdup(e->response) : NULL;
        i_text = items ? strdup(e->items) : NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (!ok)
        return false;
    json_t *r = r_text ? json_loads(r_text, 0, NULL) : NULL;
    json_t *it = i_text ? json_loads(i_text, 0, NULL) : NULL;
    free(r_text);
    free(i_text);
    if ((response && !r) || (items && !it)) {
        json_decref(r);
        json_decref(it);
        return false;
    }
    if (response)
        *response = r;
    if (items)
        *items = it;
    return true;
}

bool tw_bridge_resp_store_delete(tw_bridge_resp_store *s, const unsigned char owner[32],
                                 const char *id)
{
    pthread_mutex_lock(&s->mu);
    kept *e = find(s, id);
    bool ok = owned(e, owner);
    if (ok)
        drop(s, e);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

tw_status tw_bridge_resp_store_save(tw_bridge_resp_store *s, const char *path, tw_err *err)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "responses store file: path too long");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        tw_status st =
            tw_errorf(err, TW_UNAVAILABLE, "responses store file %s: %s", tmp, strerror(errno));
        if (fd >= 0)
            close(fd);
        return st;
    }
    bool ok = true;
    pthread_mutex_lock(&s->mu);
    for (const kept *e = s->oldest; e && ok; e = e->newer) {
        char owner[65];
        for (int i = 0; i < 32; i++)
            snprintf(owner + 2 * i, 3, "%02x", e->owner[i]);
        ok = fprintf(f, "{\"owner\":\"%s\",\"response\":%s,\"items\":%s}\n", owner, e->response,
                     e->items) > 0;
    }
    pthread_mutex_unlock(&s->mu);
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved_errno = errno;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        tw_status st = tw_errorf(err, TW_UNAVAILABLE, "responses store file %s: %s",
                                 ok ? path : tmp, strerror(ok ? errno : saved_errno));
        unlink(tmp);
        return st;
    }
    return TW_OK;
}

/* The owner digest written as 64 hex digits. */
static bool parse_owner(const char *hex, unsigned char owner[32])
{
    if (!hex || strlen(hex) != 64)
        return false;
    for (int i = 0; i < 32; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1 || !strchr("0123456789abcdef", hex[2 * i]) ||
            !strchr("0123456789abcdef", hex[2 * i + 1]))
            return false;
        owner[i] = (unsigned char)v;
    }
    return true;
}

tw_status tw_bridge_resp_store_load(tw_bridge_resp_store *s, const char *path, size_t *loaded,
                                    size_t *skipped, tw_err *err)
{
    *loaded = *skipped = 0;
    FILE *f = fopen(path, "r");
    if (!f && errno == ENOENT)
        return TW_OK;
    if (!f)
        return tw_errorf(err, TW_UNAVAILABLE, "responses store file %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    unsigned long lineno = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        lineno++;
        json_error_t je;
        /* no entry is longer than the store itself */
        json_t *j = (size_t)n <= s->max_bytes + 256
                        ? json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES, &je)
                        : NULL;
        if ((size_t)n > s->max_bytes + 256)
            snprintf(je.text, sizeof je.text, "a line longer than the store");
        unsigned char owner[32];
        const json_t *response = json_object_get(j, "response");
        const json_t *items = json_object_get(j, "items");
        const char *problem = NULL;
        if (!j)
            problem = je.text;
        else if (!parse_owner(json_string_value(json_object_get(j, "owner")), owner))
            problem = "no owner of 64 hex digits";
        else if (!json_is_object(response) || !json_is_array(items))
            problem = "no response object and items array";
        else if (!tw_bridge_resp_store_put(s, owner, response, items))
            problem = "a response without an id of at most 64 bytes, or larger than the store";
        if (problem && (*skipped)++ == 0)
            tw_errorf(err, TW_INVALID_ARGUMENT, "%s:%lu: %s", path, lineno, problem);
        if (!problem)
            (*loaded)++;
        json_decref(j);
    }
    bool failed = ferror(f) != 0;
    free(line);
    fclose(f);
    if (failed)
        return tw_errorf(err, TW_UNAVAILABLE, "responses store file %s: read error", path);
    return TW_OK;
}

void tw_bridge_resp_store_usage(tw_bridge_resp_store *s, size_t *entries, size_t *bytes)
{
    pthread_mutex_lock(&s->mu);
    *entries = s->entries;
    *bytes = s->bytes;
    pthread_mutex_unlock(&s->mu);
}
