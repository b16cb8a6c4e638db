#include "pull.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILE_NAME 200
#define CONNECT_TIMEOUT_S 30L
/* A transfer that moves less than 1 byte/s for this long is given up (and
 * can be continued by the next pull). */
#define STALL_TIMEOUT_S 60L
#define MAX_REDIRECTS 5L

/* ------------------------------------------------------------ names */

bool twd_pull_is_url(const char *s)
{
    return s && (strncasecmp(s, "http://", 7) == 0 || strncasecmp(s, "https://", 8) == 0);
}

static bool name_char_ok(unsigned char c)
{
    return isalnum(c) || c == '.' || c == '_' || c == '-' || c == '+';
}

tw_status twd_pull_file_name(const char *url, char *out, size_t cap, tw_err *err)
{
    if (!twd_pull_is_url(url))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "only http:// and https:// URLs can be downloaded");
    CURLU *u = curl_url();
    if (!u)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    char *path = NULL;
    tw_status st = TW_OK;
    /* curl removes "." and ".." segments while parsing; the decoded path
     * may still hold "/" or ".." from %2F / %2E, which the basename and the
     * character filter below take care of. */
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PATH, &path, CURLU_URLDECODE) != CURLUE_OK || !path) {
        st = tw_errorf(err, TW_INVALID_ARGUMENT, "not a valid URL: %.200s", url);
        goto done;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = 0;
    for (const char *p = base; *p && n + 1 < cap && n < MAX_FILE_NAME; p++) {
        unsigned char c = (unsigned char)*p;
        if (n == 0 && c == '.')
            continue; /* no hidden files, no "." or ".." */
        out[n++] = name_char_ok(c) ? (char)c : '_';
    }
    out[n < cap ? n : 0] = '\0';
    if (n == 0)
        st = tw_errorf(err, TW_INVALID_ARGUMENT,
                       "the URL's path names no file to store: %.200s", url);
done:
    curl_free(path);
    curl_url_cleanup(u);
    return st;
}

tw_status twd_models_dir(const char *configured, char *out, size_t cap, tw_err *err)
{
    int n;
    const char *xdg = getenv("XDG_DATA_HOME");
    const char *home = getenv("HOME");
    if (configured && *configured)
        n = snprintf(out, cap, "%s", configured);
    else if (xdg && xdg[0] == '/') /* the XDG spec ignores relative values */
        n = snprintf(out, cap, "%s/tokenwire/models", xdg);
    else if (home && home[0] == '/')
        n = snprintf(out, cap, "%s/.local/share/tokenwire/models", home);
    else
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "no models directory: set --models-dir, XDG_DATA_HOME or HOME");
    if (n < 0 || (size_t)n >= cap)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "the models directory path is too long");
    return TW_OK;
}

static tw_status mkdirs(const char *dir, tw_err *err)
{
    char buf[PATH_MAX];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof buf)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "bad models directory \"%s\"", dir);
    memcpy(buf, dir, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char keep = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return tw_errorf(err, TW_INTERNAL, "cannot create %s: %s", buf, strerror(errno));
        buf[i] = keep;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return tw_errorf(err, TW_INTERNAL, "%s is not a directory", dir);
    return TW_OK;
}

/* ------------------------------------------------------------ hashing */

static const char HEX[] = "0123456789abcdef";

tw_status twd_sha256_file(const char *path, char hex[65], tw_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tw_errorf(err, TW_INTERNAL, "cannot open %s: %s", path, strerror(errno));
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char *buf = malloc(1 << 16);
    tw_status st = TW_OK;
    if (!md || !buf || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "cannot start SHA-256");
        goto done;
    }
    for (;;) {
        ssize_t got = read(fd, buf, 1 << 16);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            st = tw_errorf(err, TW_INTERNAL, "reading %s: %s", path, strerror(errno));
            goto done;
        }
        if (got == 0)
            break;
        if (EVP_DigestUpdate(md, buf, (size_t)got) != 1) {
            st = tw_errorf(err, TW_INTERNAL, "SHA-256 failed");
            goto done;
        }
    }
    unsigned char dig[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    if (EVP_DigestFinal_ex(md, dig, &dlen) != 1 || dlen != 32) {
        st = tw_errorf(err, TW_INTERNAL, "SHA-256 failed");
        goto done;
    }
    for (unsigned i = 0; i < 32; i++) {
        hex[2 * i] = HEX[dig[i] >> 4];
        hex[2 * i + 1] = HEX[dig[i] & 15];
    }
    hex[64] = '\0';
done:
    free(buf);
    EVP_MD_CTX_free(md);
    close(fd);
    return st;
}

/* Lower-cases a 64-hex-digit digest into out; false when it is not one. */
static bool norm_sha256(const char *in, char out[65])
{
    size_t n = strlen(in);
    if (n != 64)
        return false;
    for (size_t i = 0; i < 64; i++) {
        if (!isxdigit((unsigned char)in[i]))
            return false;
        out[i] = (char)tolower((unsigned char)in[i]);
    }
    out[64] = '\0';
    return true;
}

/* ------------------------------------------------------------ transfer */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct xfer {
    const twd_pull_opts *o;
    CURL *h;
    int fd;
    uint64_t offset;       /* bytes of the file before this response's body */
    uint64_t written;      /* body bytes written by this response */
    bool asked_range;
    bool started;          /* the body's first bytes arrived and were judged */
    bool range_mismatch;   /* 206 for another start than asked: begin again */
    bool too_large;
    bool io_error;
    int io_errno;
    long http_code;        /* a refused response */
    int64_t range_start;   /* from Content-Range, -1 when absent */
} xfer;

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    xfer *x = arg;
    size_t n = size * nmemb;
    /* Redirects bring several responses; only the last one's count. */
    if (n >= 5 && strncmp(data, "HTTP/", 5) == 0)
        x->range_start = -1;
    static const char key[] = "content-range:";
    if (n > sizeof key - 1 && strncasecmp(data, key, sizeof key - 1) == 0) {
        char line[128];
        size_t k = n < sizeof line - 1 ? n : sizeof line - 1;
        memcpy(line, data, k);
        line[k] = '\0';
        unsigned long long start;
        if (sscanf(line + sizeof key - 1, " bytes %llu-", &start) == 1 && start <= INT64_MAX)
            x->range_start = (int64_t)start;
    }
    return n;
}

/* Judges the response when its body begins: 206 continues the .part file,
 * 200 replaces it, anything else is refused. */
static bool start_body(xfer *x)
{
    long code = 0;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
    if (code == 206 && x->asked_range) {
        if (x->range_start != (int64_t)x->offset) {
            x->range_mismatch = true;
            return false;
        }
    } else if (code == 200) {
        if (x->offset && ftruncate(x->fd, 0) != 0) {
            x->io_error = true;
            x->io_errno = errno;
            return false;
        }
        x->offset = 0;
    } else {
        x->http_code = code;
        return false;
    }
    if (lseek(x->fd, (off_t)x->offset, SEEK_SET) < 0) {
        x->io_error = true;
        x->io_errno = errno;
        return false;
    }
    curl_off_t cl = -1;
    curl_easy_getinfo(x->h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
    if (x->o->max_bytes && cl > 0 && x->offset + (uint64_t)cl > x->o->max_bytes) {
        x->too_large = true;
        return false;
    }
    x->started = true;
    return true;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    xfer *x = arg;
    size_t n = size * nmemb;
    if (!x->started && !start_body(x))
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    if (x->o->max_bytes && x->offset + x->written + n > x->o->max_bytes) {
        x->too_large = true;
        return 0;
    }
    size_t done = 0;
    while (done < n) {
        ssize_t w = write(x->fd, data + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            x->io_error = true;
            x->io_errno = w < 0 ? errno : ENOSPC;
            return 0;
        }
        done += (size_t)w;
    }
    x->written += n;
    return n;
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    (void)ultotal;
    (void)ulnow;
    (void)dlnow;
    xfer *x = arg;
    if (x->o->stop && atomic_load(x->o->stop))
        return 1;
    if (x->o->progress) {
        uint64_t total = x->started && dltotal > 0 ? x->offset + (uint64_t)dltotal : 0;
        x->o->progress(x->o->progress_arg, x->offset + x->written, total);
    }
    return 0;
}

/* One HTTP exchange into fd from x->offset on. */
static CURLcode transfer(xfer *x, char *errbuf)
{
    const twd_pull_opts *o = x->o;
    CURL *h = x->h;
    curl_easy_reset(h);
    x->written = 0;
    x->started = false;
    x->range_mismatch = false;
    x->http_code = 0;
    x->range_start = -1;
    errbuf[0] = '\0';
    curl_easy_setopt(h, CURLOPT_URL, o->url);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, MAX_REDIRECTS);
    /* A redirect must not lead to file://, ftp:// or anything else. */
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, STALL_TIMEOUT_S);
    curl_easy_setopt(h, CURLOPT_USERAGENT, o->user_agent ? o->user_agent : "tokenwired");
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
    char range[32];
    x->asked_range = x->offset > 0;
    if (x->asked_range) {
        snprintf(range, sizeof range, "%" PRIu64 "-", x->offset);
        curl_easy_setopt(h, CURLOPT_RANGE, range);
    }
    CURLcode rc = curl_easy_perform(h);
    /* An empty body never reached on_body: judge the response now. */
    if (!x->started && rc == CURLE_OK && !start_body(x))
        return CURLE_WRITE_ERROR;
    return rc;
}

static tw_status finish_file(int fd, const char *part, const char *final_path, const char *dir,
                             const char *want_sha, const char *url, tw_err *err)
{
    if (fsync(fd) != 0)
        return tw_errorf(err, TW_INTERNAL, "cannot flush %s: %s", part, strerror(errno));
    if (want_sha) {
        char got[65];
        tw_status st = twd_sha256_file(part, got, err);
        if (st != TW_OK)
            return st;
        if (strcmp(got, want_sha) != 0) {
            unlink(part);
            return tw_errorf(err, TW_DATA_LOSS,
                             "SHA-256 mismatch for %.200s: got %s, expected %s; the download "
                             "was removed",
                             url, got, want_sha);
        }
    }
    if (rename(part, final_path) != 0)
        return tw_errorf(err, TW_INTERNAL, "cannot rename %s: %s", part, strerror(errno));
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd); /* makes the rename itself durable */
        close(dfd);
    }
    return TW_OK;
}

tw_status twd_pull(const twd_pull_opts *o, char *path_out, size_t cap, tw_err *err)
{
    char file[MAX_FILE_NAME + 1];
    tw_status st = twd_pull_file_name(o->url, file, sizeof file, err);
    if (st != TW_OK)
        return st;
    char want[65];
    const char *want_sha = NULL;
    if (o->sha256 && *o->sha256) {
        if (!norm_sha256(o->sha256, want))
            return tw_errorf(err, TW_INVALID_ARGUMENT, "sha256 must be 64 hex digits");
        want_sha = want;
    }
    if ((st = mkdirs(o->dir, err)) != TW_OK)
        return st;
    char final_path[PATH_MAX], part[PATH_MAX];
    int n1 = snprintf(final_path, sizeof final_path, "%s/%s", o->dir, file);
    int n2 = snprintf(part, sizeof part, "%s/%s.part", o->dir, file);
    if (n1 < 0 || n2 < 0 || (size_t)n2 >= sizeof part || (size_t)n1 >= cap)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "the download path is too long");

    if (want_sha && access(final_path, F_OK) == 0) {
        char have[65];
        if (twd_sha256_file(final_path, have, NULL) == TW_OK && strcmp(have, want_sha) == 0) {
            memcpy(path_out, final_path, (size_t)n1 + 1);
            return TW_OK;
        }
    }

    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return tw_errorf(err, TW_INTERNAL, "libcurl: %s", curl_easy_strerror(curl_init_rc));
    int fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return tw_errorf(err, TW_INTERNAL, "cannot open %s: %s", part, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return tw_errorf(err, TW_UNAVAILABLE, "%s is being downloaded already; retry later",
                         file);
    }
    xfer x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.fd = fd;
    struct stat sb;
    if (fstat(fd, &sb) == 0 && sb.st_size > 0)
        x.offset = (uint64_t)sb.st_size;
    if (o->max_bytes && x.offset > o->max_bytes)
        x.offset = 0; /* cannot be a prefix of an acceptable file */
    x.h = curl_easy_init();
    if (!x.h) {
        close(fd);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "cannot create a libcurl handle");
    }
    char errbuf[CURL_ERROR_SIZE];
    CURLcode rc = CURLE_OK;
    /* A second try only when the server did not continue where we asked. */
    for (int attempt = 0; attempt < 2; attempt++) {
        rc = transfer(&x, errbuf);
        bool range_refused = x.asked_range && (x.http_code == 416 || x.range_mismatch);
        if (!range_refused)
            break;
        if (ftruncate(fd, 0) != 0) {
            x.io_error = true;
            x.io_errno = errno;
            break;
        }
        x.offset = 0;
    }
    long code = x.http_code;
    uint64_t have = x.offset + x.written;
    bool keep_part = true;
    if (o->stop && atomic_load(o->stop) && rc != CURLE_OK) {
        st = tw_errorf(err, TW_CANCELLED, "download of %.200s stopped", o->url);
    } else if (x.too_large) {
        keep_part = false;
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED,
                       "%.200s is larger than the download limit of %" PRIu64
                       " bytes (--max-download-bytes)",
                       o->url, o->max_bytes);
    } else if (x.io_error) {
        st = tw_errorf(err, TW_INTERNAL, "writing %s: %s", part, strerror(x.io_errno));
    } else if (code) {
        keep_part = code >= 500;
        st = tw_errorf(err, code == 404 || code == 410 ? TW_NOT_FOUND : TW_UNAVAILABLE,
                       "HTTP %ld from %.200s", code, o->url);
    } else if (x.range_mismatch) {
        st = tw_errorf(err, TW_UNAVAILABLE, "%.200s did not continue the download where asked",
                       o->url);
    } else if (rc != CURLE_OK) {
        st = tw_errorf(err, TW_UNAVAILABLE,
                       "download of %.200s interrupted after %" PRIu64
                       " bytes: %s; load it again to continue",
                       o->url, have, errbuf[0] ? errbuf : curl_easy_strerror(rc));
    } else {
        if (o->progress)
            o->progress(o->progress_arg, have, have);
        st = finish_file(fd, part, final_path, o->dir, want_sha, o->url, err);
        keep_part = st == TW_INTERNAL;
        if (st == TW_OK)
            memcpy(path_out, final_path, (size_t)n1 + 1);
    }
    curl_easy_cleanup(x.h);
    if (st != TW_OK && !keep_part)
        unlink(part);
    close(fd); /* releases the lock */
    return st;
}
