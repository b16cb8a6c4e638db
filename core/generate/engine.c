/* The engine's public face: lifetime, the model registry, submit/cancel and
 * the helper calls. The scheduler itself lives in scheduler.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_internal.h"
#include "tw/chat_template.h"
#include "tw/kernels.h"
#include "tw/log.h"

uint64_t tw_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t tw_now_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void tw_engine_opts_init(tw_engine_opts *o)
{
    memset(o, 0, sizeof *o);
}

static void fill_defaults(tw_engine_opts *o)
{
    if (!o->threads) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = n > 0 ? (uint32_t)(n > 256 ? 256 : n) : 1;
    }
    if (!o->max_batch)
        o->max_batch = 16;
    if (!o->max_queue)
        o->max_queue = 256;
    if (!o->prefill_chunk)
        o->prefill_chunk = 256;
    if (!o->max_n)
        o->max_n = o->max_batch < 8 ? o->max_batch : 8;
    if (!o->max_prompt_bytes)
        o->max_prompt_bytes = 8u << 20;
}

tw_status tw_engine_create(const tw_engine_opts *opts, tw_engine **out, tw_err *err)
{
    if (!out)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "engine: out is NULL");
    *out = NULL;
    tw_engine *e = calloc(1, sizeof *e);
    if (!e)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "engine: out of memory");
    if (opts)
        e->opts = *opts;
    fill_defaults(&e->opts);
    if (e->opts.threads > 256 || e->opts.max_batch > 256 || e->opts.max_n > e->opts.max_batch ||
        e->opts.prefill_chunk > 65536) {
        tw_status bad = tw_errorf(err, TW_INVALID_ARGUMENT,
                         "engine: limits out of range (threads %u <= 256, max_batch %u <= 256, "
                         "max_n %u <= max_batch, prefill_chunk %u <= 65536)",
                         e->opts.threads, e->opts.max_batch, e->opts.max_n,
                         e->opts.prefill_chunk);
        free(e);
        return bad;
    }
    /* A prompt step that ends inside a prefill group gives its rows other
     * bits than a read across it (tw_model_forward), and leaves a short
     * step after it: a chunk of more than one group is taken down to whole
     * groups, so a prompt's output is the same at every such setting and
     * its steps stay long. */
    const uint32_t part = e->opts.prefill_chunk % TW_PREFILL_GROUP;
    if (e->opts.prefill_chunk > TW_PREFILL_GROUP && part) {
        tw_info("prefill chunk %u taken down to %u, a whole number of %d-token prefill groups",
                e->opts.prefill_chunk, e->opts.prefill_chunk - part, TW_PREFILL_GROUP);
        e->opts.prefill_chunk -= part;
    }
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->wake, NULL);
    e->next_id = 1;
    e->start_us = tw_now_us();
    admission_init(e);
    e->store = engine_cache_open_store(&e->opts);
    e->opts.state_dir = NULL; /* the caller's string; the store keeps its own */
    tw_status st = sched_create(e, err);
    if (st == TW_OK) {
        if (pthread_create(&e->thread, NULL, sched_main, e) != 0)
            st = tw_errorf(err, TW_INTERNAL, "engine: cannot start the scheduler thread");
        else
            e->thread_started = true;
    }
    if (st != TW_OK) {
        tw_engine_destroy(e);
        return st;
    }
    *out = e;
    return TW_OK;
}

static void model_entry_free(model_entry *m)
{
    if (!m)
        return;
    sched_release_model(m);
    engine_cache_free(m->cache);
    for (int k = 0; k < TW_TRANSITION_COUNT; k++)
        free(m->transition[k]);
    tw_chat_template_free(m->tmpl);
    tw_json_vocab_free(m->json_vocab);
    call_ban_free(m->ban);
    tw_tokenizer_free(m->tok);
    tw_model_free(m->draft);
    tw_model_free(m->model);
    free(m);
}

void tw_engine_destroy(tw_engine *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->lock);
    e->shutdown = true;
    pthread_cond_broadcast(&e->wake);
    pthread_mutex_unlock(&e->lock);
    if (e->thread_started)
        pthread_join(e->thread, NULL); /* it ends every request on its way out */
    sched_destroy(e);
    model_entry *m = e->models;
    while (m) {
        model_entry *next = m->next;
        model_entry_free(m);
        m = next;
    }
    tw_state_store_close(e->store); /* finishes the queued writes */
    pthread_cond_destroy(&e->wake);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

/* ---------------------------------------------------------------- registry */

void engine_model_ref(tw_engine *e, model_entry *m)
{
    pthread_mutex_lock(&e->lock);
    m->refs++;
    pthread_mutex_unlock(&e->lock);
}

void engine_model_unref(tw_engine *e, model_entry *m)
{
    pthread_mutex_lock(&e->lock);
    bool last = --m->refs == 0;
    pthread_mutex_unlock(&e->lock);
    if (last)
        model_entry_free(m);
}

static model_entry *find_locked(tw_engine *e, const char *name)
{
    if (!name || !*name)
        return e->default_model;
    for (model_entry *m = e->models; m; m = m->next)
        if (strcmp(m->name, name) == 0)
            return m;
    return NULL;
}

tw_status engine_model_get(tw_engine *e, const char *name, model_entry **out, tw_err *err)
{
    pthread_mutex_lock(&e->lock);
    model_entry *m = find_locked(e, name);
    if (m)
        m->refs++;
    pthread_mutex_unlock(&e->lock);
    *out = m;
    if (!m) {
        if (!name || !*name)
            return tw_errorf(err, TW_NOT_FOUND, "no default model is loaded");
        return tw_errorf(err, TW_NOT_FOUND, "model \"%.128s\" is not loaded", name);
    }
    return TW_OK;
}

const char *tw_model_state_name(tw_model_state s)
{
    switch (s) {
    case TW_MODEL_LOADING: return "loading";
    case TW_MODEL_READY: return "ready";
    case TW_MODEL_FAILED: return "failed";
    }
    return "?";
}

void tw_load_opts_init(tw_load_opts *o)
{
    memset(o, 0, sizeof *o);
}

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= TW_MODEL_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return false;
    }
    return true;
}

/* The last path component without a .gguf suffix. */
static void derive_name(const char *path, char *out, size_t cap)
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
    out[n] = 0;
}

static tw_status load_tokenizer(const char *path, tw_tokenizer **tok, tw_err *err)
{
    *tok = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return TW_OK; /* the model load reports the missing path */
    if (S_ISDIR(st.st_mode)) {
        char p[TW_MODEL_PATH_MAX + 32];
        snprintf(p, sizeof p, "%s/tokenizer.json", path);
        if (access(p, R_OK) != 0)
            return TW_OK; /* ids-only checkpoint */
        return tw_tokenizer_load_hf(path, tok, err);
    }
    tw_status s = tw_tokenizer_load_gguf(path, tok, err);
    if (s == TW_NOT_FOUND) {
        *tok = NULL;
        return TW_OK;
    }
    return s;
}

/* The caller's chat template in place of the model's: it must compile, as
 * the caller asked for it by name. */
static tw_status own_template(model_entry *m, const char *src, tw_err *err)
{
    if (!m->tok)
        return tw_errorf(err, TW_INVALID_ARGUMENT,
                         "chat template: model %s has no tokenizer to render chats with", m->name);
    tw_err terr;
    if (tw_chat_template_compile(src, strlen(src), &m->tmpl, &terr) != TW_OK)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "chat template: %s", terr.msg);
    m->tool_format = tw_tool_format_of_template(src, strlen(src));
    return TW_OK;
}

/* The eos list, think tags, chat template and transition tokens of a
 * freshly loaded model; template (NULL: none) replaces its own. */
static tw_status setup_generation(model_entry *m, const tw_model_info *info, const char *template,
                                  tw_err *err)
{
    m->n_eos = 0;
    for (size_t i = 0; i < info->n_eos && m->n_eos < TW_ENGINE_MAX_EOS; i++)
        if (info->eos_ids[i] >= 0 && (uint64_t)info->eos_ids[i] < m->vocab)
            m->eos[m->n_eos++] = (uint32_t)info->eos_ids[i];
    m->think_open = m->think_close = TW_TOKEN_NONE;
    if (!m->tok)
        return template && *template ? own_template(m, template, err) : TW_OK;
    uint32_t tv = tw_tokenizer_vocab_size(m->tok);
    for (uint32_t id = 0; id < tv && id < m->vocab && m->n_eos < TW_ENGINE_MAX_EOS; id++) {
        if (!tw_tokenizer_is_eog(m->tok, id))
            continue;
        bool dup = false;
        for (size_t k = 0; k < m->n_eos; k++)
            dup |= m->eos[k] == id;
        if (!dup)
            m->eos[m->n_eos++] = id;
    }
    const char *src = tw_tokenizer_chat_template(m->tok);
    if (template && *template) {
        tw_status s = own_template(m, template, err);
        if (s != TW_OK)
            return s;
    } else if (src) {
        m->tool_format = tw_tool_format_of_template(src, strlen(src));
        tw_err terr;
        if (tw_chat_template_compile(src, strlen(src), &m->tmpl, &terr) != TW_OK) {
            tw_warn("model %s: chat template does not compile (%s); using ChatML", m->name,
                    terr.msg);
            src = tw_chat_template_chatml();
            m->tool_format = TW_TOOL_FORMAT_NONE;
            if (tw_chat_template_compile(src, strlen(src), &m->tmpl, &terr) != TW_OK)
                m->tmpl = NULL;
        }
    }
    uint32_t o = tw_tokenizer_think_open(m->tok), c = tw_tokenizer_think_close(m->tok);
    if (o != TW_TOKEN_NONE && c != TW_TOKEN_NONE && o < m->vocab && c < m->vocab) {
        m->think_open = o;
        m->think_close = c;
    }
    for (int k = 0; k < TW_TRANSITION_COUNT; k++) {
        const char *text = tw_transition_text((tw_transition_kind)k);
        size_t need = 0;
        tw_status s = tw_tokenizer_encode(m->tok, text, strlen(text), 0, NULL, 0, &need, err);
        if (s != TW_OK && s != TW_RESOURCE_EXHAUSTED)
            return s;
        m->transition[k] = malloc((need + 1) * sizeof(uint32_t));
        if (!m->transition[k])
            return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
        s = tw_tokenizer_encode(m->tok, text, strlen(text), 0, m->transition[k], need + 1,
                                &m->n_transition[k], err);
        if (s != TW_OK)
            return s;
    }
    return TW_OK;
}

static void fill_info(tw_engine *e, const model_entry *m, tw_engine_model_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", m->name);
    snprintf(out->path, sizeof out->path, "%s", m->path);
    snprintf(out->architecture, sizeof out->architecture, "%s", m->architecture);
    snprintf(out->weight_type, sizeof out->weight_type, "%s", m->weight_type);
    snprintf(out->fingerprint, sizeof out->fingerprint, "%s", m->fingerprint);
    snprintf(out->draft_path, sizeof out->draft_path, "%s", m->draft_path);
    out->parameters = m->parameters;
    out->max_context = m->max_context;
    out->vocab_size = m->vocab;
    out->loaded_unix_s = m->loaded_unix_s;
    out->state = TW_MODEL_READY;
    out->is_default = e->default_model == m;
    out->has_tokenizer = m->tok != NULL;
    out->has_chat_template = m->tmpl != NULL;
    out->tool_format = tw_tool_format_name(m->tool_format);
    out->has_thinking = m->think_open != TW_TOKEN_NONE;
    out->pooling = tw_model_pooling_name(tw_model_get_info(m->model)->pooling);
    out->encoder = tw_model_get_info(m->model)->encoder;
    out->progress = 1.0f;
}

tw_status tw_engine_load_model(tw_engine *e, const char *path, const char *name,
                               const tw_load_opts *opts, tw_engine_model_info *info,
                               tw_err *err)
{
    if (!e || !path || !*path)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "load: a path is required");
    if (strlen(path) >= TW_MODEL_PATH_MAX)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "load: path longer than %d bytes",
                         TW_MODEL_PATH_MAX - 1);
    tw_load_opts defaults;
    tw_load_opts_init(&defaults);
    if (!opts)
        opts = &defaults;
    if (opts->quantize && *opts->quantize)
        return tw_errorf(err, TW_UNIMPLEMENTED, "load: quantize at load is not supported yet");
    char nm[TW_MODEL_NAME_MAX];
    if (name && *name) {
        if (!valid_name(name))
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "load: model name must be 1..%d printable bytes",
                             TW_MODEL_NAME_MAX - 1);
        snprintf(nm, sizeof nm, "%s", name);
    } else {
        derive_name(path, nm, sizeof nm);
        if (!valid_name(nm))
            return tw_errorf(err, TW_INVALID_ARGUMENT, "load: cannot derive a name from %s",
                             path);
    }
    pthread_mutex_lock(&e->lock);
    bool taken = find_locked(e, nm) != NULL;
    pthread_mutex_unlock(&e->lock);
    if (taken)
        return tw_errorf(err, TW_ALREADY_EXISTS, "load: a model named \"%s\" is loaded", nm);

    model_entry *m = calloc(1, sizeof *m);
    if (!m)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "load: out of memory");
    snprintf(m->name, sizeof m->name, "%s", nm);
    snprintf(m->path, sizeof m->path, "%s", path);
    tw_model_opts mo = {0};
    uint32_t ctx = opts->max_context;
    if (e->opts.max_context && (!ctx || ctx > e->opts.max_context))
        ctx = e->opts.max_context;
    mo.max_context = ctx;
    mo.max_batch = e->opts.max_batch;
    mo.max_chunk = e->opts.prefill_chunk;
    mo.weight_pages = e->opts.weight_pages;
    mo.kv_type = e->opts.kv_type;
    mo.quantize = e->opts.quantize;
    tw_status st = tw_model_load(path, &mo, &m->model, err);
    if (st == TW_OK && opts->draft_path && *opts->draft_path)
        st = engine_load_draft(m, opts->draft_path, &mo, err);
    if (st == TW_OK)
        st = load_tokenizer(path, &m->tok, err);
    if (st == TW_OK) {
        const tw_model_info *mi = tw_model_get_info(m->model);
        m->vocab = mi->vocab_size;
        m->max_context = mi->max_context > UINT32_MAX ? UINT32_MAX : (uint32_t)mi->max_context;
        m->parameters = mi->n_params;
        snprintf(m->architecture, sizeof m->architecture, "%s",
                 mi->model_type ? mi->model_type : "");
        snprintf(m->weight_type, sizeof m->weight_type, "%s", tw_type_name(mi->weight_type));
        if (m->tok && tw_tokenizer_vocab_size(m->tok) > m->vocab)
            tw_warn("model %s: tokenizer has %u tokens, the model %u", nm,
                    tw_tokenizer_vocab_size(m->tok), m->vocab);
        st = setup_generation(m, mi, opts->chat_template, err);
    }
    if (st == TW_OK && m->tok) {
        const uint32_t tags[2] = {m->think_open, m->think_close};
        st = tw_json_vocab_build(m->tok, tags, 2, &m->json_vocab, err);
    }
    if (st == TW_OK && m->tok)
        st = call_ban_build(m->tok, m->vocab, m->tool_format, &m->ban, err);
    if (st == TW_OK) {
        m->logits = malloc((size_t)e->opts.max_batch * m->vocab * sizeof(float));
        if (!m->logits)
            st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "load: out of memory for logits");
    }
    if (st == TW_OK && tw_model_fingerprint(m->model, m->fingerprint, NULL) != TW_OK)
        m->fingerprint[0] = 0;
    if (st == TW_OK)
        m->cache = engine_cache_for_model(m->model, m->fingerprint, &e->opts, e->store);
    if (st != TW_OK) {
        model_entry_free(m);
        return tw_error_wrap(err, st, "loading %s", path);
    }
    m->loaded_unix_s = tw_now_unix_ms() / 1000;
    m->refs = 1;

    pthread_mutex_lock(&e->lock);
    if (find_locked(e, nm)) { /* another load of the same name won the race */
        pthread_mutex_unlock(&e->lock);
        model_entry_free(m);
        return tw_errorf(err, TW_ALREADY_EXISTS, "load: a model named \"%s\" is loaded", nm);
    }
    model_entry **tail = &e->models;
    while (*tail)
        tail = &(*tail)->next;
    *tail = m;
    if (opts->make_default || !e->default_model)
        e->default_model = m;
    if (info)
        fill_info(e, m, info);
    admission_model_loaded(e, m);
    pthread_mutex_unlock(&e->lock);
    tw_info("model %s loaded from %s (%s, vocab %u, context %u, weights %s)", nm, path,
            m->architecture, m->vocab, m->max_context,
            tw_model_get_info(m->model)->huge_pages ? "in huge pages" : "mapped from the file");
    return TW_OK;
}

tw_status tw_engine_unload_model(tw_engine *e, const char *name, tw_err *err)
{
    if (!name || !*name)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "unload: a model name is required");
    pthread_mutex_lock(&e->lock);
    model_entry **pp = &e->models;
    while (*pp && strcmp((*pp)->name, name) != 0)
        pp = &(*pp)->next;
    model_entry *m = *pp;
    if (!m) {
        pthread_mutex_unlock(&e->lock);
        return tw_errorf(err, TW_NOT_FOUND, "unload: model \"%.128s\" is not loaded", name);
    }
    *pp = m->next;
    m->next = NULL;
    m->unloaded = true; /* the scheduler ends its requests */
    if (e->default_model == m)
        e->default_model = NULL;
    pthread_cond_broadcast(&e->wake);
    pthread_mutex_unlock(&e->lock);
    engine_model_unref(e, m);
    return TW_OK;
}

tw_status tw_engine_list_models(tw_engine *e, tw_engine_model_info **out, size_t *n,
                                tw_err *err)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&e->lock);
    size_t count = 0;
    for (model_entry *m = e->models; m; m = m->next)
        count++;
    tw_engine_model_info *a = count ? calloc(count, sizeof *a) : NULL;
    if (count && !a) {
        pthread_mutex_unlock(&e->lock);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "list models: out of memory");
    }
    size_t i = 0;
    for (model_entry *m = e->models; m; m = m->next)
        fill_info(e, m, &a[i++]);
    pthread_mutex_unlock(&e->lock);
    *out = a;
    *n = count;
    return TW_OK;
}

tw_status tw_engine_get_model(tw_engine *e, const char *name, tw_engine_model_info *out,
                              tw_err *err)
{
    pthread_mutex_lock(&e->lock);
    model_entry *m = find_locked(e, name);
    if (m)
        fill_info(e, m, out);
    pthread_mutex_unlock(&e->lock);
    if (!m)
        return tw_errorf(err, TW_NOT_FOUND, "model \"%.128s\" is not loaded",
                         name && *name ? name : "(default)");
    return TW_OK;
}

tw_status tw_engine_set_default_model(tw_engine *e, const char *name, tw_err *err)
{
    if (!name || !*name)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "set default: a model name is required");
    pthread_mutex_lock(&e->lock);
    model_entry *m = find_locked(e, name);
    if (m)
        e->default_model = m;
    pthread_mutex_unlock(&e->lock);
    if (!m)
        return tw_errorf(err, TW_NOT_FOUND, "model \"%.128s\" is not loaded", name);
    return TW_OK;
}

/* ---------------------------------------------------------------- requests */

tw_status tw_engine_submit(tw_engine *e, const tw_gen_request *req, const tw_gen_callbacks *cb,
                           void *user, uint64_t *req_id, tw_err *err)
{
    if (!e || !req || !cb || !cb->on_chunk)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "submit: request and on_chunk are required");
    model_entry *m;
    tw_status st = engine_model_get(e, req->model, &m, err);
    if (st != TW_OK)
        return st;
    request *r = NULL;
    st = request_prepare(e, m, req, &r, err);
    if (st != TW_OK) {
        engine_model_unref(e, m);
        return st;
    }
    r->cb = *cb;
    r->user = user;
    r->speculative = req->speculative;
    if (r->speculative.mode == TW_SPEC_DRAFT && !m->draft) {
        request_free(r);
        engine_model_unref(e, m);
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "speculative: model \"%s\" has no draft model", m->name);
    }
    if ((unsigned)r->speculative.mode > TW_SPEC_DRAFT) {
        request_free(r);
        engine_model_unref(e, m);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "speculative: unknown mode %d",
                         (int)r->speculative.mode);
    }
    r->submit_us = tw_now_us();
    r->cache_mode = req->cache.mode;
    r->cache_persist = req->cache.persist;
    /* The prompt's log-probabilities need every position's logits, which a
     * restored prefix does not have: such a prompt is read whole, and still
     * cached for others when the caller allows it. */
    if (r->prompt_lps || r->embed.pooling == TW_POOLING_MEAN)
        r->cache_mode = r->cache_mode == TW_CACHE_USE || r->cache_mode == TW_CACHE_WRITE_ONLY
                            ? TW_CACHE_WRITE_ONLY
                            : TW_CACHE_BYPASS;
    if (r->embed.pooling != TW_POOLING_NONE)
        r->speculative.mode = TW_SPEC_OFF;
    /* an encoder's states depend on the whole input: no prefix of it is
     * worth keeping */
    if (tw_model_get_info(m->model)->encoder)
        r->cache_mode = TW_CACHE_BYPASS;
    st = admission_check(e, r, err);
    if (st != TW_OK) {
        request_free(r);
        engine_model_unref(e, m);
        return st;
    }

    pthread_mutex_lock(&e->lock);
    if (e->shutdown) {
        pthread_mutex_unlock(&e->lock);
        request_free(r);
        engine_model_unref(e, m);
        return tw_errorf(err, TW_FAILED_PRECONDITION, "submit: the engine is shutting down");
    }
    if (m->unloaded) {
        pthread_mutex_unlock(&e->lock);
        request_free(r);
        engine_model_unref(e, m);
        return tw_errorf(err, TW_NOT_FOUND, "submit: the model was unloaded");
    }
    if (e->n_queued >= e->opts.max_queue) {
        pthread_mutex_unlock(&e->lock);
        request_free(r);
        engine_model_unref(e, m);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "submit: %u requests are already waiting",
                         e->opts.max_queue);
    }
    r->id = e->next_id++;
    if (e->queue_tail)
        e->queue_tail->next = r;
    else
        e->queue_head = r;
    e->queue_tail = r;
    e->n_queued++;
    m->stats.requests_total++;
    m->stats.prompt_tokens += r->n_prompt * r->n;
    pthread_cond_broadcast(&e->wake);
    if (req_id)
        *req_id = r->id;
    pthread_mutex_unlock(&e->lock);
    return TW_OK;
}

bool tw_engine_cancel(tw_engine *e, uint64_t req_id)
{
    bool found = false;
    pthread_mutex_lock(&e->lock);
    for (request *r = e->queue_head; r && !found; r = r->next)
        if (r->id == req_id)
            found = !atomic_exchange(&r->cancel, true);
    for (request *r = e->running; r && !found; r = r->next)
        if (r->id == req_id)
            found = !atomic_exchange(&r->cancel, true);
    if (found)
        pthread_cond_broadcast(&e->wake);
    pthread_mutex_unlock(&e->lock);
    return found;
}

/* ----------------------------------------------------------------- helpers */

static tw_status tokenizer_of(tw_engine *e, const char *model, model_entry **m, tw_err *err)
{
    tw_status st = engine_model_get(e, model, m, err);
    if (st != TW_OK)
        return st;
    if (!(*m)->tok) {
        engine_model_unref(e, *m);
        return tw_errorf(err, TW_FAILED_PRECONDITION, "model \"%s\" has no tokenizer",
                         (*m)->name);
    }
    return TW_OK;
}

static tw_status encode_alloc(const tw_tokenizer *tok, const char *text, size_t len,
                              unsigned flags, uint32_t **ids, size_t *n, tw_err *err)
{
    size_t need = 0;
    tw_status st = tw_tokenizer_encode(tok, text, len, flags, NULL, 0, &need, err);
    if (st != TW_OK && st != TW_RESOURCE_EXHAUSTED)
        return st;
    uint32_t *buf = malloc((need ? need : 1) * sizeof *buf);
    if (!buf)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "tokenize: out of memory");
    st = tw_tokenizer_encode(tok, text, len, flags, buf, need, n, err);
    if (st != TW_OK) {
        free(buf);
        return st;
    }
    *ids = buf;
    return TW_OK;
}

tw_status engine_encode(const tw_tokenizer *tok, const char *text, size_t len, unsigned flags,
                        uint32_t **ids, size_t *n, tw_err *err)
{
    return encode_alloc(tok, text, len, flags, ids, n, err);
}

tw_status tw_engine_tokenize(tw_engine *e, const char *model, const char *text, size_t len,
                             bool add_special, bool parse_special, uint32_t **ids, size_t *n,
                             tw_err *err)
{
    *ids = NULL;
    *n = 0;
    if (!text && len)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tokenize: text is NULL");
    if (len > e->opts.max_prompt_bytes)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "tokenize: text longer than %u bytes",
                         e->opts.max_prompt_bytes);
    model_entry *m;
    tw_status st = tokenizer_of(e, model, &m, err);
    if (st != TW_OK)
        return st;
    unsigned flags = (add_special ? TW_ENCODE_ADD_SPECIAL : 0) |
                     (parse_special ? TW_ENCODE_PARSE_SPECIAL : 0);
    st = encode_alloc(m->tok, text, len, flags, ids, n, err);
    engine_model_unref(e, m);
    return st;
}

tw_status tw_engine_token_piece(tw_engine *e, const char *model, uint32_t id, char *buf,
                                size_t cap, size_t *len, tw_err *err)
{
    model_entry *m;
    tw_status st = tokenizer_of(e, model, &m, err);
    if (st != TW_OK)
        return st;
    size_t n = 0;
    const char *p = tw_tokenizer_token_bytes(m->tok, id, &n);
    if (!p) {
        engine_model_unref(e, m);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "token %u outside the vocabulary", id);
    }
    if (buf && cap)
        memcpy(buf, p, n < cap ? n : cap);
    *len = n;
    engine_model_unref(e, m);
    return TW_OK;
}

tw_status tw_engine_detokenize(tw_engine *e, const char *model, const uint32_t *ids, size_t n,
                               bool skip_special, char **text, size_t *len, tw_err *err)
{
    *text = NULL;
    *len = 0;
    if (!ids && n)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "detokenize: ids are NULL");
    model_entry *m;
    tw_status st = tokenizer_of(e, model, &m, err);
    if (st != TW_OK)
        return st;
    unsigned flags = skip_special ? TW_DECODE_SKIP_SPECIAL : 0;
    size_t need = 0;
    st = tw_tokenizer_decode(m->tok, ids, n, flags, NULL, 0, &need, err);
    if (st == TW_OK || st == TW_RESOURCE_EXHAUSTED) {
        char *buf = malloc(need + 1);
        if (!buf)
            st = tw_errorf(err, TW_RESOURCE_EXHAUSTED, "detokenize: out of memory");
        else if ((st = tw_tokenizer_decode(m->tok, ids, n, flags, buf, need, len, err)) != TW_OK)
            free(buf);
        else {
            buf[*len] = 0;
            *text = buf;
        }
    }
    engine_model_unref(e, m);
    return st;
}

tw_status tw_engine_apply_chat_template(tw_engine *e, const char *model,
                                        const tw_chat_input *chat, tw_think_mode thinking,
                                        char **text, size_t *len, tw_err *err)
{
    *text = NULL;
    *len = 0;
    model_entry *m;
    tw_status st = tokenizer_of(e, model, &m, err);
    if (st != TW_OK)
        return st;
    st = engine_render_chat(m, chat, thinking, text, len, err);
    engine_model_unref(e, m);
    return st;
}

/* ------------------------------------------------------------------- stats */

static void add_stats(tw_engine_stats *out, const model_stats *s)
{
    out->requests_total += s->requests_total;
    out->requests_failed += s->requests_failed;
    out->prompt_tokens_total += s->prompt_tokens;
    out->generated_tokens_total += s->generated_tokens;
    out->thinking_budget_closes += s->budget_closes;
    out->thinking_loop_closes += s->loop_closes;
    for (int k = 0; k < TW_TRANSITION_COUNT; k++)
        out->thinking_transitions[k] += s->transitions[k];
    out->spec_drafted += s->spec_drafted;
    out->spec_accepted += s->spec_accepted;
}

tw_status tw_engine_stats_get(tw_engine *e, const char *model, tw_engine_stats *out,
                              tw_err *err)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&e->lock);
    model_entry *only = NULL;
    if (model && *model) {
        only = find_locked(e, model);
        if (!only) {
            pthread_mutex_unlock(&e->lock);
            return tw_errorf(err, TW_NOT_FOUND, "model \"%.128s\" is not loaded", model);
        }
    }
    uint64_t sp_tok = 0, sp_us = 0, pl_tok = 0, pl_us = 0, sp_rounds = 0, snap_us = 0;
    for (model_entry *m = e->models; m; m = m->next) {
        out->models_ready++;
        if (!only || only == m) {
            add_stats(out, &m->stats);
            engine_cache_add_stats(m->cache, out);
            sp_tok += m->stats.spec_produced;
            sp_us += m->stats.spec_us;
            pl_tok += m->stats.spec_plain_tokens;
            pl_us += m->stats.spec_plain_us;
            sp_rounds += m->stats.spec_rounds;
            snap_us += m->stats.spec_snapshot_us;
        }
    }
    for (request *r = e->queue_head; r; r = r->next)
        if (!only || r->m == only)
            out->requests_queued++;
    for (request *r = e->running; r; r = r->next)
        if (!only || r->m == only)
            out->requests_running++;
    admission_stats(e, out);
    uint64_t now_s = tw_now_us() / 1000000u;
    uint64_t dec = 0, pre = 0;
    for (int i = 0; i < 60; i++) {
        if (e->rate_stamp[i] + 60 > now_s) {
            dec += e->decode_tokens[i];
            pre += e->prefill_tokens[i];
        }
    }
    pthread_mutex_unlock(&e->lock);
    out->decode_tokens_per_s = (float)dec / 60.0f;
    out->prefill_tokens_per_s = (float)pre / 60.0f;
    out->spec_speedup = engine_spec_speedup(sp_tok, sp_us, pl_tok, pl_us);
    out->spec_snapshot_us_per_verify = sp_rounds ? (float)((double)snap_us / (double)sp_rounds)
                                                 : 0.0f;
    out->uptime_s = (tw_now_us() - e->start_us) / 1000000u;
    engine_cache_store_stats(e->store, out);
    return TW_OK;
}
