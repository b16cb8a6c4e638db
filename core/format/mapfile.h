/* Read-only file mappings shared by the GGUF and safetensors readers.
 * Internal to core/format. */
#ifndef TW_FORMAT_MAPFILE_H
#define TW_FORMAT_MAPFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

typedef struct twf_map {
    const uint8_t *data;
    uint64_t size;
    void *addr;      /* what munmap() takes; NULL for borrowed memory */
    size_t map_len;
    bool has_fd; /* a copy keeps its file open for twf_map_view */
    int fd;
} twf_map;

/* A read-only mapping of part of a file's page cache (twf_map_view). */
typedef struct twf_view {
    const uint8_t *data;
    void *addr;
    size_t map_len;
} twf_view;

/* Maps path read-only. what names the kind of file in messages ("gguf").
 * A missing file is TW_NOT_FOUND, an unreadable one TW_PERMISSION_DENIED, a
 * directory or empty file TW_INVALID_ARGUMENT / TW_DATA_LOSS. */
tw_status twf_map_file(const char *path, const char *what, twf_map *m, tw_err *err);

/* Like twf_map_file, but reads the file into private anonymous memory
 * aligned to 2 MiB and marked for transparent huge pages (MADV_HUGEPAGE),
 * instead of mapping the page cache. Costs a copy and private memory; pays
 * where every byte is streamed again and again (decode reads every weight
 * per token, and 4 KiB pages cost a TLB miss every 4 KiB). A file that
 * shrinks while it is read is TW_DATA_LOSS. */
tw_status twf_map_file_huge(const char *path, const char *what, twf_map *m, tw_err *err);

/* Bytes [off, off + len) of the file behind a copy made by
 * twf_map_file_huge, mapped from the file's page cache instead, after
 * checking that the file still holds exactly the bytes the copy read (its
 * size, then every byte of the range). None of the range is resident in
 * this process afterwards: pages come in as they are read, and the kernel
 * may drop them again. TW_FAILED_PRECONDITION for a map that is not such a
 * copy, TW_OUT_OF_RANGE for a range outside it, TW_DATA_LOSS when the file
 * changed. A file truncated later would fault on access, as any file
 * mapping does. */
tw_status twf_map_view(const twf_map *m, uint64_t off, size_t len, const char *what, twf_view *v,
                       tw_err *err);
void twf_view_release(twf_view *v);

/* Wraps borrowed memory (no unmap on release). */
void twf_map_borrow(const void *buf, size_t len, twf_map *m);

void twf_map_release(twf_map *m);

#endif
