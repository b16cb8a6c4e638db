/* A Hugging Face checkpoint folder's config.json, with what a
 * sentence-transformers pooling module beside it says. */
#include "tw/gguf_arch.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "tw/log.h"

/* sentence-transformers' pooling modes, and the tw_pooling name of those a
 * GGUF's pooling_type can also say (NULL for the others). */
static const struct {
    const char *key, *name;
} st_modes[] = {
    {"pooling_mode_mean_tokens", "mean"},        {"pooling_mode_cls_token", "cls"},
    {"pooling_mode_lasttoken", "last"},          {"pooling_mode_max_tokens", NULL},
    {"pooling_mode_mean_sqrt_len_tokens", NULL}, {"pooling_mode_weightedmean_tokens", NULL},
};

/* Sets cfg's tw_pooling from dir/1_Pooling/config.json when the config
 * has none of its own and the module turns on one mode that has a name. */
static tw_status pooling_module(const char *dir, json_t *cfg, tw_err *err)
{
    if (json_object_get(cfg, "tw_pooling"))
        return TW_OK;
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/1_Pooling/config.json", dir) >= sizeof path)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "model path too long");
    FILE *f = fopen(path, "rb");
    if (!f && errno == ENOENT)
        return TW_OK;
    if (!f)
        return tw_errorf(err, errno == EACCES ? TW_PERMISSION_DENIED : TW_INVALID_ARGUMENT,
                         "%s: %s", path, strerror(errno));
    json_error_t je;
    json_t *mod = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    fclose(f);
    if (!json_is_object(mod)) {
        json_decref(mod);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: %s", path,
                         mod ? "not a JSON object" : je.text);
    }
    size_t on = 0;
    const char *name = NULL, *key = NULL;
    for (size_t i = 0; i < sizeof st_modes / sizeof st_modes[0]; i++)
        if (json_is_true(json_object_get(mod, st_modes[i].key))) {
            on++;
            name = st_modes[i].name;
            key = st_modes[i].key;
        }
    json_decref(mod);
    if (on == 1 && name)
        return json_object_set_new(cfg, "tw_pooling", json_string(name)) == 0
                   ? TW_OK
                   : tw_errorf(err, TW_RESOURCE_EXHAUSTED, "out of memory");
    if (on)
        tw_warn("%s: %s is not a pooling this engine computes; embeddings pool by the last "
                "token unless a request asks for the mean",
                path, on == 1 ? key : "a mix of modes");
    return TW_OK;
}

tw_status tw_hf_config_load(const char *dir, json_t **out, tw_err *err)
{
    *out = NULL;
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/config.json", dir) >= sizeof path)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "model path too long");
    json_error_t je;
    json_t *cfg = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!cfg)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: %s (line %d)", path, je.text, je.line);
    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: not a JSON object", path);
    }
    tw_status st = pooling_module(dir, cfg, err);
    if (st != TW_OK) {
        json_decref(cfg);
        return st;
    }
    *out = cfg;
    return TW_OK;
}
