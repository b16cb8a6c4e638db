#include "loads.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pull.h"
#include "server.h"
#include "translate.h"
#include "tw/log.h"

#ifndef TWD_VERSION
#define TWD_VERSION "unknown"
#endif

/* Jobs running plus failures remembered. Running jobs are few (the
 * server's job limit); failures beyond the room left push out the oldest. */
#define MAX_ENTRIES 32
/* Share of the progress bar that a download fills; loading fills the rest. */
#define DOWNLOAD_SHARE 0.9f

typedef struct entry {
    bool used;
    uint64_t seq; /* age, for evicting the oldest failure */
    tw_engine_model_info info;
} entry;

struct twd_loads {
    pthread_mutex_t mu;
    uint64_t seq;
    entry e[MAX_ENTRIES];
};

tw_status twd_loads_create(twd_loads **out, tw_err *err)
{
    twd_loads *t = calloc(1, sizeof *t);
    if (!t)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return TW_OK;
}

void twd_loads_destroy(twd_loads *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* Takes an entry for name: replaces a failure of the same name, else a free
 * entry, else the oldest failure. */
static tw_status claim(twd_loads *t, const char *name, const char *source, int *idx,
                       tw_err *err)
{
    pthread_mutex_lock(&t->mu);
    int pick = -1, oldest = -1;
    tw_status st = TW_OK;
    for (int i = 0; i < MAX_ENTRIES; i++) {
        entry *e = &t->e[i];
        if (!e->used) {
            if (pick < 0)
                pick = i;
            continue;
        }
        if (strcmp(e->info.name, name) == 0) {
            if (e->info.state == TW_MODEL_LOADING) {
                st = tw_errorf(err, TW_ALREADY_EXISTS, "model \"%s\" is being loaded already",
                               name);
                goto done;
            }
            pick = i;
            break;
        }
        if (e->info.state == TW_MODEL_FAILED && (oldest < 0 || e->seq < t->e[oldest].seq))
            oldest = i;
    }
    if (pick < 0)
        pick = oldest;
    if (pick < 0) {
        st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "too many model loads at once");
        goto done;
    }
    entry *e = &t->e[pick];
    memset(e, 0, sizeof *e);
    e->used = true;
    e->seq = ++t->seq;
    snprintf(e->info.name, sizeof e->info.name, "%s", name);
    snprintf(e->info.path, sizeof e->info.path, "%s", source);
    e->info.state = TW_MODEL_LOADING;
    *idx = pick;
done:
    pthread_mutex_unlock(&t->mu);
    return st;
}

static void set_progress(twd_loads *t, int idx, float p)
{
    pthread_mutex_lock(&t->mu);
    t->e[idx].info.progress = p;
    pthread_mutex_unlock(&t->mu);
}

static void set_failed(twd_loads *t, int idx, const char *why)
{
    pthread_mutex_lock(&t->mu);
    t->e[idx].info.state = TW_MODEL_FAILED;
    snprintf(t->e[idx].info.error, sizeof t->e[idx].info.error, "%s", why);
    pthread_mutex_unlock(&t->mu);
}

static void release(twd_loads *t, int idx)
{
    pthread_mutex_lock(&t->mu);
    t->e[idx].used = false;
    pthread_mutex_unlock(&t->mu);
}

tw_status twd_loads_merge(twd_loads *t, tw_engine_model_info **infos, size_t *n, tw_err *err)
{
    pthread_mutex_lock(&t->mu);
    size_t extra = 0;
    for (int i = 0; i < MAX_ENTRIES; i++)
        extra += t->e[i].used;
    tw_status st = TW_OK;
    if (extra) {
        tw_engine_model_info *all = realloc(*infos, (*n + extra) * sizeof *all);
        if (!all) {
            st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
            goto done;
        }
        *infos = all;
        size_t k = *n;
        for (int i = 0; i < MAX_ENTRIES; i++) {
            if (!t->e[i].used)
                continue;
            bool known = false;
            for (size_t j = 0; j < *n && !known; j++)
                known = strcmp(all[j].name, t->e[i].info.name) == 0;
            if (!known)
                all[k++] = t->e[i].info;
        }
        *n = k;
    }
done:
    pthread_mutex_unlock(&t->mu);
    return st;
}

/* ------------------------------------------------------------ the job */

/* The name a model is served under when the request names none: the file's
 * (or directory's) last component without ".gguf", as the engine does. */
static void default_name(const char *path, char *out, size_t cap)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    size_t start = len;
    while (start > 0 && path[start - 1] != '/')
        start--;
    size_t n = len - start;
    if (n > 5 && strncmp(path + start + n - 5, ".gguf", 5) == 0)
        n -= 5;
    if (n >= cap)
        n = cap - 1;
    memcpy(out, path + start, n);
    out[n] = '\0';
}

typedef struct progress_ctx {
    twd_loads *t;
    int idx;
} progress_ctx;

static void on_progress(void *arg, uint64_t done, uint64_t total)
{
    progress_ctx *p = arg;
    if (total)
        set_progress(p->t, p->idx, DOWNLOAD_SHARE * (float)((double)done / (double)total));
}

static void reply_model(twd_worker *w, const tw_engine_model_info *info)
{
    Tokenwire__V1__ModelInfo mi = TOKENWIRE__V1__MODEL_INFO__INIT;
    twd_model_to_wire(info, &mi);
    Tokenwire__V1__LoadModelReply lr = TOKENWIRE__V1__LOAD_MODEL_REPLY__INIT;
    lr.model = &mi;
    Tokenwire__V1__Reply rep = TOKENWIRE__V1__REPLY__INIT;
    rep.result_case = TOKENWIRE__V1__REPLY__RESULT_LOAD_MODEL;
    rep.load_model = &lr;
    twd_worker_reply(w, &rep);
}

static tw_status fetch(twd_server *s, const char *url, const char *sha256, int idx,
                       char *path, size_t cap, tw_err *err)
{
    char dir[PATH_MAX];
    tw_status st = twd_models_dir(s->cfg->models_dir, dir, sizeof dir, err);
    if (st != TW_OK)
        return st;
    progress_ctx pc = {s->loads, idx};
    twd_pull_opts po = {
        .url = url,
        .dir = dir,
        .sha256 = sha256,
        .max_bytes = s->cfg->max_download_bytes,
        .progress = idx >= 0 ? on_progress : NULL,
        .progress_arg = &pc,
        .stop = &s->draining,
        .user_agent = "tokenwired/" TWD_VERSION,
    };
    tw_info("downloading %s into %s", url, dir);
    st = twd_pull(&po, path, cap, err);
    if (st == TW_OK)
        tw_info("downloaded %s to %s", url, path);
    else
        tw_warn("download of %s failed: %s", url, err->msg);
    return st;
}

/* The draft model's local path: draft_source as given, or where its download
 * landed. The draft has no digest of its own to check. */
static tw_status draft_path(twd_server *s, const char *src, char *path, size_t cap, tw_err *err)
{
    if (twd_pull_is_url(src)) {
        tw_status st = fetch(s, src, NULL, -1, path, cap, err);
        return st == TW_OK ? TW_OK : tw_error_wrap(err, st, "draft model");
    }
    if (strncmp(src, "http", 4) != 0 && strstr(src, "://"))
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "draft_source: only local paths and http:// or https:// URLs");
    if (strlen(src) >= cap)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "the draft model path is too long");
    snprintf(path, cap, "%s", src);
    return TW_OK;
}

/* Gives the job's slot back, then answers: the caller may start its next
 * job as soon as it has the answer. */
static void refuse(twd_server *s, twd_worker *w, tw_status code, const char *msg)
{
    atomic_fetch_sub(&s->job_slots, 1);
    twd_worker_fail(w, code, msg);
}

void twd_run_load(twd_worker *w, const Tokenwire__V1__LoadModelRequest *l)
{
    twd_server *s = w->srv;
    tw_err err;
    char name[TW_MODEL_NAME_MAX];
    bool url = twd_pull_is_url(l->source);
    if (l->name && *l->name) {
        if (strlen(l->name) >= sizeof name) {
            refuse(s, w, TW_INVALID_ARGUMENT, "the model name is too long");
            return;
        }
        snprintf(name, sizeof name, "%s", l->name);
    } else if (url) {
        char file[256];
        if (twd_pull_file_name(l->source, file, sizeof file, &err) != TW_OK) {
            refuse(s, w, TW_INVALID_ARGUMENT, err.msg);
            return;
        }
        default_name(file, name, sizeof name);
    } else {
        default_name(l->source, name, sizeof name);
    }
    if (!name[0]) {
        refuse(s, w, TW_INVALID_ARGUMENT, "cannot derive a model name; give one");
        return;
    }
    if (!url && strncmp(l->source, "http", 4) != 0 && strstr(l->source, "://")) {
        refuse(s, w, TW_INVALID_ARGUMENT,
               "only local paths and http:// or https:// URLs can be loaded");
        return;
    }
    tw_engine_model_info info;
    if (tw_engine_get_model(s->engine, name, &info, NULL) == TW_OK) {
        snprintf(err.msg, sizeof err.msg, "a model named \"%s\" is loaded already", name);
        refuse(s, w, TW_ALREADY_EXISTS, err.msg);
        return;
    }
    int idx = -1;
    tw_status st = claim(s->loads, name, l->source, &idx, &err);
    if (st != TW_OK) {
        refuse(s, w, st, err.msg);
        return;
    }
    bool background = l->has_background && l->background;
    if (background) {
        tw_engine_model_info pending;
        memset(&pending, 0, sizeof pending);
        snprintf(pending.name, sizeof pending.name, "%s", name);
        snprintf(pending.path, sizeof pending.path, "%s", l->source);
        pending.state = TW_MODEL_LOADING;
        reply_model(w, &pending); /* the job keeps its slot until it ends */
        w = NULL; /* answered: the worker serves other requests from now on */
    }

    char path[PATH_MAX];
    if (url) {
        st = fetch(s, l->source, l->sha256, idx, path, sizeof path, &err);
        if (st == TW_OK)
            set_progress(s->loads, idx, DOWNLOAD_SHARE);
    } else if (strlen(l->source) >= sizeof path) {
        st = tw_errorf(&err, TW_INVALID_ARGUMENT, "the model path is too long");
    } else {
        snprintf(path, sizeof path, "%s", l->source);
    }
    char dpath[PATH_MAX];
    bool has_draft = l->draft_source && *l->draft_source;
    if (st == TW_OK && has_draft)
        st = draft_path(s, l->draft_source, dpath, sizeof dpath, &err);
    if (st == TW_OK) {
        tw_load_opts opts;
        tw_load_opts_init(&opts);
        opts.draft_path = has_draft ? dpath : NULL;
        opts.quantize = l->quantize;
        opts.max_context = l->max_context;
        opts.make_default = l->make_default;
        opts.chat_template = l->chat_template;
        st = tw_engine_load_model(s->engine, path, name, &opts, &info, &err);
    }
    if (st == TW_OK) {
        release(s->loads, idx);
        tw_info("loaded model %s from %s", info.name, info.path);
        atomic_fetch_sub(&s->job_slots, 1);
        if (w)
            reply_model(w, &info);
        return;
    }
    if (w) {
        release(s->loads, idx);
        refuse(s, w, st, err.msg);
    } else {
        set_failed(s->loads, idx, err.msg);
        tw_warn("background load of %s failed: %s", l->source, err.msg);
        atomic_fetch_sub(&s->job_slots, 1);
    }
}
