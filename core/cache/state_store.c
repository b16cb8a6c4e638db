/* The persistent state store (tw/state_store.h): entry files, their header
 * and checksum, and the directory budget. The writer thread lives in
 * state_writer.c.
 *
 * File layout (little-endian):
 *   0   magic "TWSTATE\0"
 *   8   u32 format version
 *   12  u32 flags (0)
 *   16  fingerprint, 64 hex digits
 *   80  u64 token count n
 *   88  u64 raw payload bytes (state bytes + 4n)
 *   96  u64 compressed payload bytes
 *   104 SHA-256 over bytes [0, 104) followed by the SHA-256 of the
 *       compressed payload
 *   136 8 reserved bytes
 *   144 zstd frame of (state blob, token ids)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "cache/state_store_internal.h"
#include "tw/log.h"

#define MAGIC "TWSTATE"
#define VERSION 1u
#define HDR 144u
#define SUM_AT 104u
#define IO_CHUNK ((size_t)1 << 20)
/* No entry of a plausible model comes near this; a header claiming more is
 * damaged, and refusing it keeps a hostile file from driving allocations. */
#define MAX_RAW ((uint64_t)64 << 30)
#define STALE_TMP_S 3600

tw_status tw_state_store_default_dir(char *buf, size_t cap, tw_err *err)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    int n;
    if (xdg && xdg[0] == '/') {
        n = snprintf(buf, cap, "%s/tokenwire/state", xdg);
    } else {
        const char *home = getenv("HOME");
        if (!home || home[0] != '/')
            return tw_errorf(err, TW_FAILED_PRECONDITION,
                             "state store: neither XDG_CACHE_HOME nor HOME is an absolute path");
        n = snprintf(buf, cap, "%s/.cache/tokenwire/state", home);
    }
    if (n < 0 || (size_t)n >= cap)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "state store: directory path too long");
    return TW_OK;
}

static tw_status mkdirs(const char *path, tw_err *err)
{
    char p[TW_STORE_PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *c = p + 1;; c++) {
        bool end = *c == 0;
        if (*c == '/' || end) {
            *c = 0;
            if (mkdir(p, 0700) != 0 && errno != EEXIST)
                return tw_errorf(err, TW_PERMISSION_DENIED, "state store: cannot create %s: %s",
                                 p, strerror(errno));
            if (end)
                break;
            *c = '/';
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return tw_errorf(err, TW_FAILED_PRECONDITION, "state store: %s is not a directory", path);
    return TW_OK;
}

static void hex(const uint8_t *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = 0;
}

void tw_state_store_entry_name(const char fingerprint[65], const uint32_t *tokens, size_t n,
                               char out[69])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    uint8_t d[32];
    unsigned dl = 0;
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    EVP_DigestUpdate(ctx, fingerprint, 64);
    EVP_DigestUpdate(ctx, tokens, n * sizeof(uint32_t)); /* host order is little-endian */
    EVP_DigestFinal_ex(ctx, d, &dl);
    EVP_MD_CTX_free(ctx);
    hex(d, 32, out);
    memcpy(out + 64, ".tws", 5);
}

/* ------------------------------------------------------------ writing */

static bool write_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

static bool read_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = read(fd, b, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        b += r;
        n -= (size_t)r;
    }
    return true;
}

static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Compresses the inputs into fd (already past the header), hashing what it
 * writes. */
static tw_status compress_to(int fd, int level, const void *const *in, const size_t *in_len,
                             int n_in, EVP_MD_CTX *sha, uint64_t *comp_len, tw_err *err)
{
    ZSTD_CCtx *z = ZSTD_createCCtx();
    uint8_t *out = malloc(IO_CHUNK);
    tw_status st = TW_OK;
    if (!z || !out) {
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "state store: out of memory");
        goto done;
    }
    ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, level);
    ZSTD_CCtx_setParameter(z, ZSTD_c_checksumFlag, 1);
    *comp_len = 0;
    for (int i = 0; i < n_in; i++) {
        ZSTD_inBuffer ib = {in[i], in_len[i], 0};
        ZSTD_EndDirective mode = i + 1 == n_in ? ZSTD_e_end : ZSTD_e_continue;
        for (;;) {
            ZSTD_outBuffer ob = {out, IO_CHUNK, 0};
            size_t left = ZSTD_compressStream2(z, &ob, &ib, mode);
            if (ZSTD_isError(left)) {
                st = tw_errorf(err, TW_INTERNAL, "state store: zstd: %s", ZSTD_getErrorName(left));
                goto done;
            }
            if (ob.pos && !write_all(fd, out, ob.pos)) {
                st = tw_errorf(err, TW_UNAVAILABLE, "state store: write: %s", strerror(errno));
                goto done;
            }
            EVP_DigestUpdate(sha, out, ob.pos);
            *comp_len += ob.pos;
            if (mode == ZSTD_e_end ? left == 0 : ib.pos == ib.size)
                break;
        }
    }
done:
    free(out);
    ZSTD_freeCCtx(z);
    return st;
}

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

tw_status store_write_entry(tw_state_store *s, const char fingerprint[65],
                            const uint32_t *tokens, size_t n, const void *state, size_t len,
                            tw_err *err)
{
    if (!s || !fingerprint || strlen(fingerprint) != 64 || (!tokens && n) || (!state && len))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "state store put: bad argument");
    char name[69], path[TW_STORE_PATH_MAX], tmp[TW_STORE_PATH_MAX];
    tw_state_store_entry_name(fingerprint, tokens, n, name);
    uint64_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&rnd;
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-%016llx-%.16s", s->dir, (long)getpid(),
             (unsigned long long)rnd, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return tw_errorf(err, TW_UNAVAILABLE, "state store: cannot create %s: %s", tmp,
                         strerror(errno));
    uint8_t hdr[HDR] = {0};
    memcpy(hdr, MAGIC, 8);
    uint32_t v = VERSION;
    memcpy(hdr + 8, &v, 4);
    memcpy(hdr + 16, fingerprint, 64);
    put_u64(hdr + 80, n);
    put_u64(hdr + 88, (uint64_t)n * sizeof(uint32_t) + len);
    EVP_MD_CTX *sha = EVP_MD_CTX_new();
    tw_status st = sha ? TW_OK : tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    if (st == TW_OK && !write_all(fd, hdr, HDR))
        st = tw_errorf(err, TW_UNAVAILABLE, "state store: write: %s", strerror(errno));
    uint64_t comp = 0;
    if (st == TW_OK) {
        EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
        const void *in[2] = {state, tokens};
        size_t in_len[2] = {len, n * sizeof(uint32_t)};
        st = compress_to(fd, s->level, in, in_len, 2, sha, &comp, err);
    }
    if (st == TW_OK) {
        put_u64(hdr + 96, comp);
        /* The header fields are hashed after the payload they describe, so
         * the digest is finished here in the order a reader checks. */
        EVP_MD_CTX *full = EVP_MD_CTX_new();
        uint8_t d[32];
        unsigned dl;
        uint8_t pd[32];
        EVP_DigestFinal_ex(sha, pd, &dl);
        EVP_DigestInit_ex(full, EVP_sha256(), NULL);
        EVP_DigestUpdate(full, hdr, SUM_AT);
        EVP_DigestUpdate(full, pd, 32);
        EVP_DigestFinal_ex(full, d, &dl);
        EVP_MD_CTX_free(full);
        memcpy(hdr + SUM_AT, d, 32);
        if (pwrite(fd, hdr, HDR, 0) != (ssize_t)HDR)
            st = tw_errorf(err, TW_UNAVAILABLE, "state store: write: %s", strerror(errno));
    }
    if (st == TW_OK && fsync(fd) != 0)
        st = tw_errorf(err, TW_UNAVAILABLE, "state store: fsync: %s", strerror(errno));
    EVP_MD_CTX_free(sha);
    close(fd);
    if (st == TW_OK && rename(tmp, path) != 0)
        st = tw_errorf(err, TW_UNAVAILABLE, "state store: rename to %s: %s", path,
                       strerror(errno));
    if (st != TW_OK) {
        unlink(tmp);
        return st;
    }
    fsync_dir(s->dir);
    pthread_mutex_lock(&s->mu);
    s->st.writes++;
    pthread_mutex_unlock(&s->mu);
    store_apply_budget(s);
    return TW_OK;
}

tw_status tw_state_store_put(tw_state_store *s, const char fingerprint[65],
                             const uint32_t *tokens, size_t n, const void *state, size_t len,
                             tw_err *err)
{
    return store_write_entry(s, fingerprint, tokens, n, state, len, err);
}

/* ------------------------------------------------------------ reading */

/* Removes a refused entry, saying why. */
static void reject(tw_state_store *s, const char *path, const char *why)
{
    tw_warn("state store: removing %s: %s", path, why);
    unlink(path);
    pthread_mutex_lock(&s->mu);
    s->st.rejected++;
    pthread_mutex_unlock(&s->mu);
}

/* Loads one entry. NOT_FOUND when absent; DATA_LOSS (entry removed) when it
 * fails any check. */
static tw_status load_entry(tw_state_store *s, const char *fingerprint, const uint32_t *tokens,
                            size_t n, void **state, size_t *state_len, tw_err *err)
{
    char name[69], path[TW_STORE_PATH_MAX];
    tw_state_store_entry_name(fingerprint, tokens, n, name);
    snprintf(path, sizeof path, "%s/%s", s->dir, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tw_errorf(err, TW_NOT_FOUND, "state store: no entry");
    const char *why = NULL;
    uint8_t hdr[HDR];
    struct stat fs;
    uint64_t raw = 0, comp = 0;
    if (fstat(fd, &fs) != 0 || !read_all(fd, hdr, HDR))
        why = "shorter than its header";
    else if (memcmp(hdr, MAGIC, 8) != 0)
        why = "bad magic";
    else if (memcmp(hdr + 8, &(uint32_t){VERSION}, 4) != 0)
        why = "unknown format version";
    else if (memcmp(hdr + 16, fingerprint, 64) != 0)
        why = "written for another model";
    else if (get_u64(hdr + 80) != n)
        why = "token count does not match its name";
    else {
        raw = get_u64(hdr + 88);
        comp = get_u64(hdr + 96);
        if (raw < (uint64_t)n * 4 || raw > MAX_RAW || comp != (uint64_t)fs.st_size - HDR ||
            (uint64_t)fs.st_size < HDR)
            why = "truncated or lengths out of range";
    }
    uint8_t *raw_buf = NULL, *in = NULL;
    ZSTD_DCtx *z = NULL;
    EVP_MD_CTX *sha = NULL;
    if (!why) {
        raw_buf = malloc(raw ? (size_t)raw : 1);
        in = malloc(IO_CHUNK);
        z = ZSTD_createDCtx();
        sha = EVP_MD_CTX_new();
        if (!raw_buf || !in || !z || !sha)
            why = "out of memory"; /* not the entry's fault: keep it */
    }
    if (!why) {
        EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
        /* One output buffer of exactly the promised size: a frame that
         * holds more cannot finish in it, one that holds less leaves it
         * short; either way it is refused below. */
        ZSTD_outBuffer ob = {raw_buf, (size_t)raw, 0};
        uint64_t left = comp;
        size_t zret = 1;
        while (!why && left) {
            size_t want = left < IO_CHUNK ? (size_t)left : IO_CHUNK;
            if (!read_all(fd, in, want)) {
                why = "truncated payload";
                break;
            }
            left -= want;
            EVP_DigestUpdate(sha, in, want);
            ZSTD_inBuffer ib = {in, want, 0};
            while (ib.pos < ib.size) {
                size_t in0 = ib.pos, out0 = ob.pos;
                zret = ZSTD_decompressStream(z, &ob, &ib);
                if (ZSTD_isError(zret)) {
                    why = "compressed payload is damaged";
                    break;
                }
                if (ib.pos == in0 && ob.pos == out0) {
                    why = "payload longer than its header says";
                    break;
                }
            }
        }
        if (!why && (zret != 0 || ob.pos != ob.size))
            why = "payload length differs from its header";
        if (!why) {
            uint8_t pd[32], d[32];
            unsigned dl;
            EVP_DigestFinal_ex(sha, pd, &dl);
            EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
            EVP_DigestUpdate(sha, hdr, SUM_AT);
            EVP_DigestUpdate(sha, pd, 32);
            EVP_DigestFinal_ex(sha, d, &dl);
            if (memcmp(d, hdr + SUM_AT, 32) != 0)
                why = "checksum mismatch";
            else if (n && memcmp(raw_buf + (raw - (uint64_t)n * 4), tokens, n * 4) != 0)
                why = "token ids differ from the prefix it is named for";
        }
    }
    if (!why)
        futimens(fd, NULL); /* the LRU clock */
    close(fd);
    EVP_MD_CTX_free(sha);
    ZSTD_freeDCtx(z);
    free(in);
    if (why) {
        free(raw_buf);
        if (strcmp(why, "out of memory") == 0)
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "state store: out of memory");
        reject(s, path, why);
        return tw_errorf(err, TW_DATA_LOSS, "state store: %s: %s", name, why);
    }
    /* The ids trail the state, so the buffer is the state as it is. */
    *state = raw_buf;
    *state_len = (size_t)(raw - (uint64_t)n * 4);
    return TW_OK;
}

tw_status tw_state_store_lookup(tw_state_store *s, const char fingerprint[65],
                                const uint32_t *tokens, size_t n, size_t step, size_t min_len,
                                void **state, size_t *state_len, size_t *n_tokens, tw_err *err)
{
    if (!s || !fingerprint || strlen(fingerprint) != 64 || !state || !state_len || !n_tokens ||
        (!tokens && n) || step == 0)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "state store lookup: bad argument");
    *state = NULL;
    *state_len = *n_tokens = 0;
    if (min_len == 0)
        min_len = 1;
    pthread_mutex_lock(&s->mu);
    s->st.lookups++;
    pthread_mutex_unlock(&s->mu);
    size_t len = n;
    while (len >= min_len) {
        tw_err lerr;
        tw_status st = load_entry(s, fingerprint, tokens, len, state, state_len, &lerr);
        if (st == TW_OK) {
            *n_tokens = len;
            pthread_mutex_lock(&s->mu);
            s->st.hits++;
            pthread_mutex_unlock(&s->mu);
            return TW_OK;
        }
        if (st == TW_RESOURCE_EXHAUSTED)
            return tw_errorf(err, st, "%s", lerr.msg);
        size_t next = (len - 1) / step * step;
        if (next >= len)
            break;
        len = next;
    }
    return tw_errorf(err, TW_NOT_FOUND, "state store: no stored prefix");
}

/* ------------------------------------------------------------ the directory */

typedef struct entry_info {
    char name[72];
    uint64_t bytes;
    struct timespec mtime;
} entry_info;

static int by_mtime(const void *a, const void *b)
{
    const entry_info *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bool is_entry_name(const char *n)
{
    size_t len = strlen(n);
    if (len != 68 || strcmp(n + 64, ".tws") != 0)
        return false;
    for (size_t i = 0; i < 64; i++)
        if (!((n[i] >= '0' && n[i] <= '9') || (n[i] >= 'a' && n[i] <= 'f')))
            return false;
    return true;
}

/* A temp file whose writer is gone (or that is old enough that its writer
 * must be stuck) is removed. */
static void maybe_remove_tmp(tw_state_store *s, const char *name, const struct stat *st)
{
    long pid = strtol(name + 5, NULL, 10);
    bool gone = pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH);
    bool old = time(NULL) - st->st_mtime > STALE_TMP_S;
    if (gone || old) {
        char p[TW_STORE_PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", s->dir, name);
        unlink(p);
    }
}

void store_apply_budget(tw_state_store *s)
{
    pthread_mutex_lock(&s->scan_mu);
    DIR *d = opendir(s->dir);
    if (!d) {
        pthread_mutex_unlock(&s->scan_mu);
        return;
    }
    entry_info *v = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        bool tmp = strncmp(de->d_name, ".tmp-", 5) == 0;
        if (!tmp && !is_entry_name(de->d_name))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (tmp) {
            maybe_remove_tmp(s, de->d_name, &st);
            continue;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            entry_info *nv = realloc(v, nc * sizeof *nv);
            if (!nv)
                break;
            v = nv;
            cap = nc;
        }
        snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
        v[n].bytes = (uint64_t)st.st_size;
        v[n].mtime = st.st_mtim;
        total += v[n].bytes;
        n++;
    }
    closedir(d);
    if (n)
        qsort(v, n, sizeof *v, by_mtime);
    size_t evicted = 0, i = 0;
    while (i < n && (total > s->max_bytes || n - i > s->max_entries)) {
        char p[TW_STORE_PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", s->dir, v[i].name);
        if (unlink(p) == 0 || errno == ENOENT)
            evicted++;
        total -= v[i].bytes;
        i++;
    }
    free(v);
    pthread_mutex_lock(&s->mu);
    s->st.evicted += evicted;
    s->st.bytes = total;
    s->st.entries = n - i;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_unlock(&s->scan_mu);
}

tw_status tw_state_store_open(const tw_state_store_opts *opts, tw_state_store **out,
                              tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "state store: out is NULL");
    *out = NULL;
    tw_state_store *s = calloc(1, sizeof *s);
    if (!s)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "state store: out of memory");
    tw_status st = TW_OK;
    if (opts && opts->dir && *opts->dir) {
        if (strlen(opts->dir) >= TW_STORE_PATH_MAX - 100)
            st = tw_errorf(err, TW_INVALID_ARGUMENT, "state store: directory path too long");
        else
            snprintf(s->dir, sizeof s->dir, "%s", opts->dir);
    } else {
        st = tw_state_store_default_dir(s->dir, TW_STORE_PATH_MAX - 100, err);
    }
    if (st == TW_OK)
        st = mkdirs(s->dir, err);
    if (st != TW_OK) {
        free(s);
        return st;
    }
    s->max_bytes = opts && opts->max_bytes ? opts->max_bytes : (uint64_t)4 << 30;
    s->max_entries = opts && opts->max_entries ? opts->max_entries : 1024;
    s->level = opts && opts->level ? opts->level : 1;
    uint64_t q = s->max_bytes / 4;
    s->queue_limit = q > ((uint64_t)2 << 30) ? (uint64_t)2 << 30 : q;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->scan_mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    store_apply_budget(s);
    *out = s;
    return TW_OK;
}

void tw_state_store_close(tw_state_store *s)
{
    if (!s)
        return;
    store_writer_stop(s);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->scan_mu);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

void tw_state_store_get_stats(tw_state_store *s, tw_state_store_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    pthread_mutex_unlock(&s->mu);
}

const char *tw_state_store_dir(const tw_state_store *s) { return s ? s->dir : ""; }
