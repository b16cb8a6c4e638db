#include "format/mapfile.h"

#include <errno.h>
#include <fcntl.h>
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

tw_status twf_map_file(const char *path, const char *what, twf_map *m, tw_err *err)
{
    memset(m, 0, sizeof *m);
    if (!path || !*path)
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: empty path", what);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return tw_errorf(err, errno_status(e), "%s: cannot open '%s': %s", what, path,
                         strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tw_errorf(err, errno_status(e), "%s: cannot stat '%s': %s", what, path,
                         strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tw_errorf(err, TW_INVALID_ARGUMENT, "%s: '%s' is not a regular file", what, path);
    }
    if (st.st_size <= 0) {
        close(fd);
        return tw_errorf(err, TW_DATA_LOSS, "%s: '%s' is empty", what, path);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return tw_errorf(err, TW_RESOURCE_EXHAUSTED, "%s: '%s' is too large to map", what, path);
    }
    size_t len = (size_t)st.st_size;
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
    if (m)
        memset(m, 0, sizeof *m);
}
