/* Helpers shared by the libFuzzer harnesses. */
#ifndef TW_FUZZ_UTIL_H
#define TW_FUZZ_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Path of a file in the reference data folder: TW_SHARED_DIR when set, else
 * the folder the build was configured with. */
static inline const char *fuzz_shared_path(char *buf, size_t cap, const char *rel)
{
    const char *dir = getenv("TW_SHARED_DIR");
    if (!dir || !*dir)
        dir = TW_FUZZ_SHARED_DIR;
    snprintf(buf, cap, "%s/%s", dir, rel);
    return buf;
}

/* Reads a whole file (NUL-terminated); NULL when it cannot. */
static inline char *fuzz_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 4096) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

/* Splits the input at the first occurrence of sep (a multi-byte marker):
 * the part before goes to *a, the rest to *b. Without a marker all of it is
 * *a and *b is empty. */
static inline void fuzz_split(const uint8_t *data, size_t size, const char *sep,
                              const uint8_t **a, size_t *alen, const uint8_t **b, size_t *blen)
{
    size_t sl = strlen(sep);
    *a = data;
    *alen = size;
    *b = data + size;
    *blen = 0;
    if (size < sl)
        return;
    for (size_t i = 0; i + sl <= size; i++) {
        if (!memcmp(data + i, sep, sl)) {
            *alen = i;
            *b = data + i + sl;
            *blen = size - i - sl;
            return;
        }
    }
}

#endif
