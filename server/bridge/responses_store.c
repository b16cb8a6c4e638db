#include "responses_store.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <search.h>
#include <sys/stat.h>
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
    /* the journal (tw_bridge_resp_store_journal): -1 when none */
    int journal_fd;
    char journal_path[4096];
    size_t journal_bytes;   /* the file's length */
    size_t journal_backoff; /* added to the rewrite length after a failed rewrite */
    unsigned long journal_errors;
    bool journal_sync; /* each line synced to the disk as it is written */
    unsigned long journal_syncs;
};

/* A journal longer than twice what the store holds, plus this, is
 * rewritten as one line per entry: the file stays within a small multiple
 * of the store however many answers come and go, at a rewrite per
 * doubling. */
#define JOURNAL_SLACK (1u << 20)

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
    s->journal_fd = -1;
    s->journal_sync = true;
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
    if (s->journal_fd >= 0)
        close(s->journal_fd);
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

static void owner_hex(const unsigned char owner[32], char hex[65])
{
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", owner[i]);
}

/* e as one line of the file: owner, response and items. NULL: out of
 * memory. */
static char *entry_line(const kept *e, size_t *len)
{
    char owner[65];
    owner_hex(e->owner, owner);
    size_t n = strlen(e->response) + strlen(e->items) + 128;
    char *line = malloc(n);
    if (!line)
        return NULL;
    int w = snprintf(line, n, "{\"owner\":\"%s\",\"response\":%s,\"items\":%s}\n", owner,
                     e->response, e->items);
    if (w < 0 || (size_t)w >= n) {
        free(line);
        return NULL;
    }
    *len = (size_t)w;
    return line;
}

static tw_status save_locked(tw_bridge_resp_store *s, const char *path, tw_err *err);

/* Appends a line to the journal, if there is one (s->mu held). A failed
 * write is counted, not fatal: the answer stays kept in memory, and the
 * next rewrite (a compaction or the save at stop) writes it again. */
static void journal_append(tw_bridge_resp_store *s, const char *line, size_t len)
{
    if (s->journal_fd < 0)
        return;
    if (!line) {
        s->journal_errors++;
        return;
    }
    /* One write a line, so that a crash leaves whole lines and at most the
     * last one cut (which loading skips). */
    size_t done = 0;
    while (done < len) {
        ssize_t w = write(s->journal_fd, line + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            /* the part written taken back (or at least ended), so that
             * the next line starts a line of its own */
            if (done > 0 && ftruncate(s->journal_fd, (off_t)s->journal_bytes) != 0)
                s->journal_bytes += done + (write(s->journal_fd, "\n", 1) == 1 ? 1 : 0);
            s->journal_errors++;
            return;
        }
        done += (size_t)w;
    }
    s->journal_bytes += len;
    /* under the lock: the next line waits for this one to be on the disk,
     * and so does the answer that put it here */
    if (s->journal_sync) {
        if (fdatasync(s->journal_fd) == 0)
            s->journal_syncs++;
        else
            s->journal_errors++;
    }
    if (s->journal_bytes > 2 * s->bytes + JOURNAL_SLACK + s->journal_backoff) {
        char path[sizeof s->journal_path];
        memcpy(path, s->journal_path, sizeof path);
        if (save_locked(s, path, NULL) != TW_OK) {
            /* not again at every line: once more when it has doubled */
            s->journal_errors++;
            s->journal_backoff = s->journal_bytes;
        } else {
            s->journal_backoff = 0;
        }
    }
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
        if (s->journal_fd >= 0) {
            size_t len = 0;
            char *line = entry_line(e, &len);
            journal_append(s, line, len);
            free(line);
        }
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
    if (ok) {
        drop(s, e);
        if (s->journal_fd >= 0) {
            char hex[65];
            owner_hex(owner, hex);
            json_t *j = json_pack("{s:s,s:s}", "owner", hex, "delete", id);
            char *text = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
            json_decref(j);
            size_t len = text ? strlen(text) : 0;
            char *line = text ? realloc(text, len + 2) : NULL;
            if (line) {
                line[len++] = '\n';
                line[len] = '\0';
            } else {
                free(text);
            }
            journal_append(s, line, len);
            free(line);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* Opens path for appending as the journal (s->mu held), its length known. */
static tw_status open_journal(tw_bridge_resp_store *s, const char *path, tw_err *err)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        tw_status status =
            tw_errorf(err, TW_UNAVAILABLE, "responses store file %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return status;
    }
    if (s->journal_fd >= 0)
        close(s->journal_fd);
    s->journal_fd = fd;
    s->journal_bytes = (size_t)st.st_size;
    snprintf(s->journal_path, sizeof s->journal_path, "%s", path);
    return TW_OK;
}

/* The rename of a file into path made lasting: its directory synced.
 * Best effort, as a directory that cannot be opened cannot be helped. */
static void sync_dir(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if ((size_t)(slash - path) < sizeof dir)
        snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    else
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

static tw_status save_locked(tw_bridge_resp_store *s, const char *path, tw_err *err)
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
    for (const kept *e = s->oldest; e && ok; e = e->newer) {
        size_t len = 0;
        char *line = entry_line(e, &len);
        ok = line && fwrite(line, 1, len, f) == len;
        free(line);
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved_errno = errno;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        tw_status st = tw_errorf(err, TW_UNAVAILABLE, "responses store file %s: %s",
                                 ok ? path : tmp, strerror(ok ? errno : saved_errno));
        unlink(tmp);
        return st;
    }
    sync_dir(path);
    /* the journal's file was just replaced: go on appending to the new one */
    if (s->journal_fd >= 0 && strcmp(path, s->journal_path) == 0)
        return open_journal(s, path, err);
    return TW_OK;
}

tw_status tw_bridge_resp_store_save(tw_bridge_resp_store *s, const char *path, tw_err *err)
{
    pthread_mutex_lock(&s->mu);
    tw_status st = save_locked(s, path, err);
    pthread_mutex_unlock(&s->mu);
    return st;
}

tw_status tw_bridge_resp_store_journal(tw_bridge_resp_store *s, const char *path, tw_err *err)
{
    pthread_mutex_lock(&s->mu);
    tw_status st = save_locked(s, path, err);
    if (st == TW_OK)
        st = open_journal(s, path, err);
    pthread_mutex_unlock(&s->mu);
    return st;
}

void tw_bridge_resp_store_journal_sync(tw_bridge_resp_store *s, bool each_line)
{
    pthread_mutex_lock(&s->mu);
    s->journal_sync = each_line;
    pthread_mutex_unlock(&s->mu);
}

unsigned long tw_bridge_resp_store_journal_syncs(tw_bridge_resp_store *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned long n = s->journal_syncs;
    pthread_mutex_unlock(&s->mu);
    return n;
}

unsigned long tw_bridge_resp_store_journal_errors(tw_bridge_resp_store *s)
{
    pthread_mutex_lock(&s->mu);
    unsigned long n = s->journal_errors;
    pthread_mutex_unlock(&s->mu);
    return n;
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
        else if (json_object_get(j, "delete")) {
            /* a deletion the journal recorded; nothing to undo when the
             * entry is gone already (pushed out, or never read back) */
            const char *gone = json_string_value(json_object_get(j, "delete"));
            if (!gone)
                problem = "a deletion without an id";
            else
                tw_bridge_resp_store_delete(s, owner, gone);
            json_decref(j);
            if (problem && (*skipped)++ == 0)
                tw_errorf(err, TW_INVALID_ARGUMENT, "%s:%lu: %s", path, lineno, problem);
            continue;
        } else if (!json_is_object(response) || !json_is_array(items))
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
