#include "test_support.h"

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tw/kernels.h"

const char *tw_test_shared_dir(void)
{
    const char *d = getenv("TW_SHARED_DIR");
    if (!d || !*d)
        d = "../shared";
    struct stat st;
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/README.md", d);
    if (stat(probe, &st) != 0)
        return NULL;
    return d;
}

void tw_test_print_skip(void)
{
    printf("SKIPPED (no ../shared reference data)\n");
    fflush(stdout);
}

char *tw_test_shared_path(char *buf, size_t cap, const char *rel)
{
    const char *d = tw_test_shared_dir();
    snprintf(buf, cap, "%s/%s", d ? d : "../shared", rel);
    return buf;
}

char *tw_test_mkdtemp(void)
{
    const char *base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    size_t n = strlen(base) + 32;
    char *p = malloc(n);
    if (!p)
        return NULL;
    snprintf(p, n, "%s/twtest.XXXXXX", base);
    if (!mkdtemp(p)) {
        free(p);
        return NULL;
    }
    return p;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tw_test_rmtree(const char *path)
{
    if (path)
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char *tw_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return NULL;
    }
    long sz = ftell(f);
    if (sz < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    char *buf = malloc((size_t)sz + 1);
    if (!buf) {
        fclose(f);
        return NULL;
    }
    size_t got = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    if (got != (size_t)sz) {
        free(buf);
        return NULL;
    }
    buf[sz] = '\0';
    if (len)
        *len = (size_t)sz;
    return buf;
}

bool tw_test_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return false;
    bool ok = fwrite(data, 1, len, f) == len;
    return fclose(f) == 0 && ok;
}

unsigned long long tw_test_rand_u64(tw_test_rng *r)
{
    unsigned long long x = r->s ? r->s : 0x9E3779B97F4A7C15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

float tw_test_rand_f32(tw_test_rng *r)
{
    return (float)((double)(tw_test_rand_u64(r) >> 11) * (1.0 / 9007199254740992.0) * 2.0 - 1.0);
}

size_t tw_test_argmax(const float *x, size_t n)
{
    size_t b = 0;
    for (size_t i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

void tw_test_mat_make(tw_test_mat *m, tw_type type, size_t rows, size_t cols, tw_test_rng *rng)
{
    const size_t rb = tw_type_row_bytes(type, cols);
    uint8_t *plain = malloc(rows * rb);
    float *tmp = malloc(cols * sizeof(float));
    assert_non_null(plain);
    assert_non_null(tmp);
    for (size_t r = 0; r < rows; r++) {
        for (size_t i = 0; i < cols; i++)
            tmp[i] = tw_test_rand_f32(rng) * (1.0f + (float)((r + i) % 5));
        tw_quant_row(type, tmp, plain + r * rb, cols);
    }
    free(tmp);
    *m = (tw_test_mat){
        .type = tw_pack_type(type), .rows = rows, .cols = cols, .row_bytes = rb, .w = plain};
    if (m->type == type)
        return;
    m->w = malloc(rows * rb);
    assert_non_null(m->w);
    assert_true(tw_pack_rows(type, plain, rows, cols, m->w));
    free(plain);
}

bool tw_test_wait_done(pthread_mutex_t *mu, pthread_cond_t *cv, const bool *done, int seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += seconds;
    pthread_mutex_lock(mu);
    while (!*done && pthread_cond_timedwait(cv, mu, &ts) == 0)
        ;
    bool got = *done;
    pthread_mutex_unlock(mu);
    return got;
}

int tw_test_golden_checkpoint(const char *dir, const char *name, const char *pooling,
                              const char *module)
{
    const char *shared = tw_test_shared_dir();
    char src[4096], dst[4096];
    if (!shared)
        return -1;
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    if (mkdir(dst, 0700) != 0)
        return -1;
    snprintf(src, sizeof src, "%s/golden/qwen2/model.safetensors", shared);
    snprintf(dst, sizeof dst, "%s/%s/model.safetensors", dir, name);
    if (symlink(src, dst) != 0)
        return -1;
    snprintf(src, sizeof src, "%s/golden/qwen2/config.json", shared);
    json_t *cfg = json_load_file(src, 0, NULL);
    if (!cfg)
        return -1;
    if (pooling)
        json_object_set_new(cfg, "tw_pooling", json_string(pooling));
    snprintf(dst, sizeof dst, "%s/%s/config.json", dir, name);
    int rc = json_dump_file(cfg, dst, 0);
    json_decref(cfg);
    if (rc != 0 || !module)
        return rc;
    snprintf(dst, sizeof dst, "%s/%s/1_Pooling", dir, name);
    if (mkdir(dst, 0700) != 0)
        return -1;
    snprintf(dst, sizeof dst, "%s/%s/1_Pooling/config.json", dir, name);
    return tw_test_write_file(dst, module, strlen(module)) ? 0 : -1;
}
