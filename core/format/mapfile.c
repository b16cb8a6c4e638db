#include "format/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static tw_status errno_status(int e)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        return TW_NOT_FOUND;
    case EACCES:
    case EPERM:
        return TW_PERMISSION_DENIED;
    default:
        return TW_UNAVAILABLE;
    }
}

/* Clears m and opens path as a non-empty regular file that fits in
 * memory: *fd and *len on success. */
static tw_status open_regular(const char *path, const char *what, twf_map *m, int *fd,
                              size_t *len, tw_err *err)
{
    memset(m, 0, sizeof *m);
    if (!path || !*path)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: empty path", what);
    int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) {
        int e = errno;
        return tw_errorf(err, errno_status(e), "%s: cannot open '%s': %s", what, path,
                         strerror(e));
    }
    struct stat st;
    if (fstat(f, &st) != 0) {
        int e = errno;
        close(f);
        return tw_errorf(err, errno_status(e), "%s: cannot stat '%s': %s", what, path,
                         strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: '%s' is not a regular file", what, path);
    }
    if (st.st_size <= 0) {
        close(f);
        return tw_errorf(err, TW_DATA_LOSS, "%s: '%s' is empty", what, path);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX / 2) {
        close(f);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "%s: '%s' is too large to map", what, path);
    }
    *fd = f;
    *len = (size_t)st.st_size;
    return TW_OK;
}

tw_status twf_map_file(const char *path, const char *what, twf_map *m, tw_err *err)
{
    int fd;
    size_t len;
    tw_status st = open_regular(path, what, m, &fd, &len, err);
    if (st)
        return st;
    void *addr = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (addr == MAP_FAILED)
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "%s: cannot map '%s': %s", what, path,
                         strerror(e));
    m->data = addr;
    m->size = len;
    m->addr = addr;
    m->map_len = len;
    return TW_OK;
}

#define HUGE_PAGE ((size_t)2 << 20)

tw_status twf_map_file_huge(const char *path, const char *what, twf_map *m, tw_err *err)
{
    int fd;
    size_t len;
    tw_status st = open_regular(path, what, m, &fd, &len, err);
    if (st)
        return st;
    /* one huge page of slack to place the data on a 2 MiB boundary, where
     * the kernel can back it with huge pages from the first byte */
    size_t span = (len + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE + HUGE_PAGE;
    void *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) {
        int e = errno;
        close(fd);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "%s: cannot allocate %zu bytes for '%s': %s",
                         what, span, path, strerror(e));
    }
    uint8_t *base = (uint8_t *)(((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    /* advice only: without THP the copy still works, on small pages */
    (void)madvise(base, span - (size_t)(base - (uint8_t *)raw), MADV_HUGEPAGE);
    size_t done = 0;
    while (done < len) {
        size_t want = len - done < ((size_t)1 << 30) ? len - done : (size_t)1 << 30;
        ssize_t got = pread(fd, base + done, want, (off_t)done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            int e = got < 0 ? errno : 0;
            close(fd);
            munmap(raw, span);
            if (got == 0)
                return tw_errorf(err, TW_DATA_LOSS, "%s: '%s' ended after %zu of %zu bytes",
                                 what, path, done, len);
            return tw_errorf(err, errno_status(e), "%s: cannot read '%s': %s", what, path,
                             strerror(e));
        }
        done += (size_t)got;
    }
    /* the weights are read-only from here on */
    (void)mprotect(raw, span, PROT_READ);
    m->data = base;
    m->size = len;
    m->addr = raw;
    m->map_len = span;
    /* kept for twf_map_view: the same file even if its path is replaced */
    m->has_fd = true;
    m->fd = fd;
    return TW_OK;
}

tw_status twf_map_view(const twf_map *m, uint64_t off, size_t len, const char *what, twf_view *v,
                       tw_err *err)
{
    if (!v)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: NULL view", what);
    memset(v, 0, sizeof *v);
    if (!m || !m->has_fd)
        return tw_errorf(err, TW_FAILED_PRECONDITION,
                         "%s: not a private copy with its file at hand", what);
    if (len == 0 || off > m->size || len > m->size - off)
        return tw_errorf(err, TW_OUT_OF_RANGE, "%s: bytes %llu + %zu are outside the %llu read",
                         what, (unsigned long long)off, len, (unsigned long long)m->size);
    struct stat st;
    if (fstat(m->fd, &st) != 0 || (uint64_t)st.st_size != m->size)
        return tw_errorf(err, TW_DATA_LOSS, "%s: the file is no longer the %llu bytes read", what,
                         (unsigned long long)m->size);
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    const uint64_t start = off / page * page;
    const size_t lead = (size_t)(off - start);
    void *addr = mmap(NULL, lead + len, PROT_READ, MAP_SHARED, m->fd, (off_t)start);
    if (addr == MAP_FAILED) {
        int e = errno;
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "%s: cannot map %zu bytes: %s", what,
                         lead + len, strerror(e));
    }
    const uint8_t *data = (const uint8_t *)addr + lead;
    if (memcmp(data, m->data + off, len) != 0) {
        munmap(addr, lead + len);
        return tw_errorf(err, TW_DATA_LOSS, "%s: the file's bytes differ from those read", what);
    }
    /* the comparison touched every page: drop them from this process (the
     * page cache keeps them while the kernel has room) */
    (void)madvise(addr, lead + len, MADV_DONTNEED);
    v->data = data;
    v->addr = addr;
    v->map_len = lead + len;
    return TW_OK;
}

void twf_view_release(twf_view *v)
{
    if (v && v->addr)
        munmap(v->addr, v->map_len);
    if (v)
        memset(v, 0, sizeof *v);
}

void twf_map_borrow(const void *buf, size_t len, twf_map *m)
{
    memset(m, 0, sizeof *m);
    m->data = buf;
    m->size = len;
}

void twf_map_release(twf_map *m)
{
    if (m && m->addr)
        munmap(m->addr, m->map_len);
    if (m && m->has_fd)
        close(m->fd);
    if (m)
        memset(m, 0, sizeof *m);
}
