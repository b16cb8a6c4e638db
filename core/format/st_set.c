/* A Hugging Face checkpoint's weights as one set: model.safetensors, or the
 * shards named by model.safetensors.index.json. */
#include "tw/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct entry {
    const tw_st_tensor *t;
} entry;

struct tw_st_set {
    tw_st_file **files;
    char **names; /* shard file names, parallel to files */
    size_t n_files;
    entry *all;       /* shard by shard */
    entry *sorted;    /* by name */
    size_t n;
};

static bool file_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static tw_status join(char *buf, size_t cap, const char *dir, const char *name, tw_err *err)
{
    if ((size_t)snprintf(buf, cap, "%s/%s", dir, name) >= cap)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "safetensors: path too long: %s/%s", dir,
                         name);
    return TW_OK;
}

/* A shard name must stay inside the checkpoint directory. */
static bool plain_file_name(const char *s)
{
    return *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->t->name, ((const entry *)b)->t->name);
}

static tw_status add_file(tw_st_set *s, const char *dir, const char *name, tw_err *err)
{
    char path[PATH_MAX];
    tw_status st = join(path, sizeof path, dir, name, err);
    if (st)
        return st;
    tw_st_file **files = realloc(s->files, (s->n_files + 1) * sizeof *files);
    if (!files)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "safetensors: out of memory");
    s->files = files;
    char **names = realloc(s->names, (s->n_files + 1) * sizeof *names);
    if (!names)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "safetensors: out of memory");
    s->names = names;
    s->names[s->n_files] = strdup(name);
    if (!s->names[s->n_files])
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "safetensors: out of memory");
    st = tw_st_open(path, &s->files[s->n_files], err);
    if (st) {
        free(s->names[s->n_files]);
        return st;
    }
    s->n_files++;
    return TW_OK;
}

static tw_status index_tensors(tw_st_set *s, tw_err *err)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_files; i++)
        n += tw_st_count(s->files[i]);
    s->all = calloc(n ? n : 1, sizeof *s->all);
    s->sorted = calloc(n ? n : 1, sizeof *s->sorted);
    if (!s->all || !s->sorted)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "safetensors: out of memory");
    for (size_t i = 0; i < s->n_files; i++)
        for (size_t j = 0; j < tw_st_count(s->files[i]); j++)
            s->all[s->n++].t = tw_st_tensor_at(s->files[i], j);
    memcpy(s->sorted, s->all, s->n * sizeof *s->all);
    qsort(s->sorted, s->n, sizeof *s->sorted, cmp_entry);
    for (size_t i = 0; i + 1 < s->n; i++)
        if (strcmp(s->sorted[i].t->name, s->sorted[i + 1].t->name) == 0)
            return tw_errorf(err, TW_INVALID_ARGUMENT,
                             "safetensors: tensor '%s' appears in more than one shard",
                             s->sorted[i].t->name);
    return TW_OK;
}

static tw_status open_index(tw_st_set *s, const char *dir, const char *index_path, tw_err *err)
{
    json_error_t je;
    json_t *root = json_load_file(index_path, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "safetensors: %s: %s (line %d)", index_path,
                         je.text, je.line);
    tw_status st = TW_OK;
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map) || json_object_size(map) == 0) {
        st = tw_errorf(err, TW_INVALID_ARGUMENT,
                       "safetensors: %s has no weight_map object", index_path);
        goto done;
    }
    const char *name;
    json_t *file;
    /* Open every distinct shard once, in the order first named. */
    json_object_foreach(map, name, file)
    {
        const char *fn = json_string_value(file);
        if (!fn || !plain_file_name(fn)) {
            st = tw_errorf(err, TW_INVALID_ARGUMENT,
                           "safetensors: %s maps '%s' to a bad shard name", index_path, name);
            goto done;
        }
        bool seen = false;
        const char *n2;
        json_t *f2;
        json_object_foreach(map, n2, f2)
        {
            if (f2 == file)
                break;
            if (strcmp(json_string_value(f2), fn) == 0) {
                seen = true;
                break;
            }
        }
        if (!seen && (st = add_file(s, dir, fn, err)))
            goto done;
    }
    if ((st = index_tensors(s, err)))
        goto done;
    json_object_foreach(map, name, file)
    {
        const char *fn = json_string_value(file);
        bool in_shard = false;
        for (size_t i = 0; i < s->n_files; i++)
            if (strcmp(s->names[i], fn) == 0)
                in_shard = tw_st_find(s->files[i], name) != NULL;
        if (!in_shard) {
            st = tw_errorf(err, TW_DATA_LOSS,
                           "safetensors: %s lists tensor '%s' in '%s', but that shard lacks it",
                           index_path, name, fn);
            goto done;
        }
    }
done:
    json_decref(root);
    return st;
}

tw_status tw_st_set_open_dir(const char *dir, tw_st_set **out, tw_err *err)
{
    if (!out || !dir)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "safetensors: NULL directory or output");
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return tw_errorf(err, errno == ENOENT ? TW_NOT_FOUND : TW_UNAVAILABLE,
                         "safetensors: cannot access '%s': %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return tw_errorf(err, TW_INVALID_ARGUMENT, "safetensors: '%s' is not a directory", dir);
    tw_st_set *s = calloc(1, sizeof *s);
    if (!s)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "safetensors: out of memory");
    char path[PATH_MAX];
    tw_status st = join(path, sizeof path, dir, "model.safetensors.index.json", err);
    if (!st) {
        if (file_exists(path)) {
            st = open_index(s, dir, path, err);
        } else {
            st = join(path, sizeof path, dir, "model.safetensors", err);
            if (!st && !file_exists(path))
                st = tw_errorf(err, TW_NOT_FOUND,
                               "safetensors: '%s' has neither model.safetensors nor "
                               "model.safetensors.index.json",
                               dir);
            if (!st)
                st = add_file(s, dir, "model.safetensors", err);
            if (!st)
                st = index_tensors(s, err);
        }
    }
    if (st) {
        tw_st_set_close(s);
        return st;
    }
    *out = s;
    return TW_OK;
}

void tw_st_set_close(tw_st_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_files; i++) {
        tw_st_close(s->files[i]);
        free(s->names[i]);
    }
    free(s->files);
    free(s->names);
    free(s->all);
    free(s->sorted);
    free(s);
}

size_t tw_st_set_count(const tw_st_set *s) { return s->n; }

const tw_st_tensor *tw_st_set_tensor_at(const tw_st_set *s, size_t i)
{
    return i < s->n ? s->all[i].t : NULL;
}

const tw_st_tensor *tw_st_set_find(const tw_st_set *s, const char *name)
{
    if (!name)
        return NULL;
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->sorted[mid].t->name, name);
        if (c == 0)
            return s->sorted[mid].t;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
