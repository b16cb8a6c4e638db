/* Helpers shared by the cmocka tests. */
#ifndef TW_TEST_SUPPORT_H
#define TW_TEST_SUPPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/tensor.h"

/* Path of the reference data folder (../shared), or NULL when it is absent,
 * in which case the caller prints tw_test_skip_no_shared() and skips. */
const char *tw_test_shared_dir(void);

/* Prints the standard skip line and calls cmocka's skip(). */
#define TW_REQUIRE_SHARED(dirvar)                                                   \
    const char *dirvar = tw_test_shared_dir();                                      \
    if (!dirvar) {                                                                  \
        tw_test_print_skip();                                                       \
        skip();                                                                     \
        return;                                                                     \
    }

void tw_test_print_skip(void);

/* Joins shared_dir/rel into buf; returns buf. */
char *tw_test_shared_path(char *buf, size_t cap, const char *rel);

/* A fresh private temporary directory (removed by tw_test_rmtree). */
char *tw_test_mkdtemp(void);
void tw_test_rmtree(const char *path);

/* Waits under mu for *done, signalled on cv, for at most seconds; returns
 * whether it came. */
bool tw_test_wait_done(pthread_mutex_t *mu, pthread_cond_t *cv, const bool *done, int seconds);

/* Reads a whole file into a malloc'd buffer (NUL-terminated); NULL on error. */
char *tw_test_read_file(const char *path, size_t *len);
bool tw_test_write_file(const char *path, const void *data, size_t len);

/* Deterministic pseudo-random numbers for tests (xorshift64*). */
typedef struct tw_test_rng {
    unsigned long long s;
} tw_test_rng;
unsigned long long tw_test_rand_u64(tw_test_rng *r);
float tw_test_rand_f32(tw_test_rng *r); /* uniform in [-1, 1) */

/* Index of the largest of x[0 .. n-1], the first on ties (n >= 1): the
 * greedy choice among logits. */
size_t tw_test_argmax(const float *x, size_t n);

/* A rows x cols matrix of `type` from random values (times 1 + (r + i) % 5
 * for row r, column i, so blocks' scales differ), quantized row by row and
 * packed to tw_pack_type(type) where the type packs, as models load it:
 * type is then the type the kernels take it as. Fails the test when memory
 * runs out; free() w. */
typedef struct tw_test_mat {
    tw_type type;
    size_t rows, cols, row_bytes;
    uint8_t *w;
} tw_test_mat;
void tw_test_mat_make(tw_test_mat *m, tw_type type, size_t rows, size_t cols, tw_test_rng *rng);

/* A checkpoint folder dir/name made from the shared golden qwen2 one: its
 * weights linked, its config.json with "tw_pooling" set to `pooling` (NULL:
 * left out), and `module` (NULL: none) as a sentence-transformers
 * 1_Pooling/config.json. Needs the shared folder; 0 on success. */
int tw_test_golden_checkpoint(const char *dir, const char *name, const char *pooling,
                              const char *module);

#endif
