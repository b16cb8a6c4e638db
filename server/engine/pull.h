/* Model downloads over http:// and https:// (libcurl) into the models
 * directory.
 *
 * A download goes to "<dir>/<file>.part" and is continued with a Range
 * request when that file already exists (the server must answer 206 with a
 * matching Content-Range; a server that answers 200 is followed from byte
 * 0). A finished download is checked against the expected SHA-256 when one
 * is given (a mismatch removes the file), flushed to disk and renamed to
 * "<dir>/<file>" in one step, so a reader never sees a half-written model.
 * <file> comes from the last segment of the URL's path, reduced to
 * [A-Za-z0-9._+-] and never starting with a dot: no URL reaches outside dir.
 *
 * Threads: twd_pull blocks its caller for the whole transfer (run it on a
 * loader thread, never on an RPC callback) and may run on several threads
 * at once; two pulls of the same file exclude each other with a lock on the
 * .part file (the second gets UNAVAILABLE).
 */
#ifndef TWD_PULL_H
#define TWD_PULL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

/* Called from the pulling thread with the bytes on disk so far and the
 * expected total (0 while unknown). */
typedef void (*twd_pull_progress_fn)(void *arg, uint64_t done, uint64_t total);

typedef struct twd_pull_opts {
    const char *url;
    const char *dir;            /* created (with parents) when missing */
    const char *sha256;         /* expected digest, 64 hex digits; NULL or "": none */
    uint64_t max_bytes;         /* the largest file accepted; 0: no limit */
    twd_pull_progress_fn progress; /* may be NULL */
    void *progress_arg;
    const atomic_bool *stop;    /* when it turns true the pull ends CANCELLED; may be NULL */
    const char *user_agent;     /* may be NULL */
} twd_pull_opts;

/* True for a source that twd_pull takes (http:// or https://, any case). */
bool twd_pull_is_url(const char *source);

/* The file name a URL is stored under (see above). INVALID_ARGUMENT for a
 * source that is not an http(s) URL or whose path names no file. */
tw_status twd_pull_file_name(const char *url, char *out, size_t cap, tw_err *err);

/* The models directory: configured when not NULL or "", else
 * $XDG_DATA_HOME/tokenwire/models, else $HOME/.local/share/tokenwire/models.
 * FAILED_PRECONDITION when none can be found. */
tw_status twd_models_dir(const char *configured, char *out, size_t cap, tw_err *err);

/* Downloads o->url and writes the final file's path to path_out. Codes:
 * INVALID_ARGUMENT (scheme, URL, sha256 syntax), NOT_FOUND (HTTP 404/410),
 * RESOURCE_EXHAUSTED (larger than max_bytes; the partial file is removed),
 * DATA_LOSS (SHA-256 mismatch; the file is removed), UNAVAILABLE (network
 * errors, other HTTP errors; a partial file is kept for the next pull to
 * continue), CANCELLED (o->stop), INTERNAL (local I/O). When the final file
 * exists already and matches o->sha256, it is used without a transfer. */
tw_status twd_pull(const twd_pull_opts *o, char *path_out, size_t cap, tw_err *err);

/* Computes the hex SHA-256 of a file into hex (65 bytes). */
tw_status twd_sha256_file(const char *path, char hex[65], tw_err *err);

#endif
