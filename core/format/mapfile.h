/* Read-only file mappings shared by the GGUF and safetensors readers.
 * Internal to core/format. */
#ifndef TW_FORMAT_MAPFILE_H
#define TW_FORMAT_MAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "tw/status.h"

typedef struct twf_map {
    const uint8_t *data;
    uint64_t size;
    void *addr;      /* what munmap() takes; NULL for borrowed memory */
    size_t map_len;
} twf_map;

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

/* Wraps borrowed memory (no unmap on release). */
void twf_map_borrow(const void *buf, size_t len, twf_map *m);

void twf_map_release(twf_map *m);

#endif
