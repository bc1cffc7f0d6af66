// weights_mem.c — a model file's bytes in memory: mapped read-only, or read into a 2 MiB-aligned
// anonymous buffer advised MADV_HUGEPAGE and then made read-only (owns: that region, the huge-page
// count from /proc/self/smaps, the --weights-load names and the startup line's wording).
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include "weights_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../base/check.h"

#define HUGE_PAGE ((size_t)2 << 20)     // x86-64 and arm64 (4 KiB base pages) transparent huge page
#define READ_CHUNK ((size_t)1 << 30)    // bytes per pread (Linux caps one read near 2 GiB)

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static int load_map(struct weights_mem *w, int fd, size_t bytes, const char *what) {
    void *map = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) return err_set(OCT_EIO, "%s: mmap: %s", what, strerror(errno));
    w->base = w->region = map;
    w->region_bytes = bytes;
    w->how = WEIGHTS_LOAD_MMAP;
    return OCT_OK;
}

// An anonymous read-write region of `len` bytes (a multiple of HUGE_PAGE) starting at a multiple of
// HUGE_PAGE: one mapping HUGE_PAGE longer, its unaligned head and tail unmapped. NULL with errno.
static void *alloc_aligned(size_t len) {
    uint8_t *p = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)round_up((uintptr_t)p, HUGE_PAGE);
    size_t head = (size_t)(a - p), tail = HUGE_PAGE - head;
    if (head) munmap(p, head);
    if (tail) munmap(a + len, tail);
    return a;
}

// pread of all `bytes` into dst, in chunks; a read of 0 before the end is a short read (the file shrank).
static int read_all(int fd, uint8_t *dst, size_t bytes, const char *what) {
    for (size_t off = 0; off < bytes;) {
        size_t want = bytes - off < READ_CHUNK ? bytes - off : READ_CHUNK;
        ssize_t r = pread(fd, dst + off, want, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return err_set(OCT_EIO, "%s: read failed at byte %zu of %zu: %s", what, off, bytes, strerror(errno));
        if (r == 0)
            return err_set(OCT_EIO, "%s: short read: the file ended at byte %zu of the %zu its size gave when "
                           "opened (changed while loading?)", what, off, bytes);
        off += (size_t)r;
    }
    return OCT_OK;
}

static int load_read(struct weights_mem *w, int fd, size_t bytes, const char *what) {
    size_t len = bytes <= SIZE_MAX - 2 * HUGE_PAGE ? round_up(bytes, HUGE_PAGE) : 0;
    void *p = len ? alloc_aligned(len) : NULL;
    if (!len) errno = ENOMEM;
    if (!p)
        return err_set(OCT_ENOMEM, "%s: cannot allocate %.2f GB to read the weights into (%s); --mmap maps "
                       "the file instead", what, (double)bytes / 1e9, strerror(errno));
#ifdef MADV_HUGEPAGE
    w->huge_advised = madvise(p, len, MADV_HUGEPAGE) == 0;  // EINVAL: a kernel without THP (4 KiB pages)
#endif
#ifdef POSIX_FADV_SEQUENTIAL
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);        // advice only: larger read-ahead
#endif
    int rc = read_all(fd, p, bytes, what);
    if (rc == OCT_OK && mprotect(p, len, PROT_READ) != 0)  // read-only like the mapping: a stray write faults
        rc = err_set(OCT_EIO, "%s: mprotect: %s", what, strerror(errno));
    if (rc < 0) {
        munmap(p, len);
        w->huge_advised = false;
        return rc;
    }
    w->base = w->region = p;
    w->region_bytes = len;
    w->how = WEIGHTS_LOAD_READ;
    return OCT_OK;
}

int weights_mem_load(struct weights_mem *w, int fd, size_t bytes, enum weights_load how, const char *what) {
    memset(w, 0, sizeof *w);
    w->bytes = bytes;
    w->how = how == WEIGHTS_LOAD_READ ? WEIGHTS_LOAD_READ : WEIGHTS_LOAD_MMAP;
    if (bytes == 0) return OCT_OK;  // nothing to hold (the parsers refuse an empty file)
    int rc = how == WEIGHTS_LOAD_READ ? load_read(w, fd, bytes, what) : load_map(w, fd, bytes, what);
    if (rc < 0) memset(w, 0, sizeof *w);
    return rc;
}

void weights_mem_free(struct weights_mem *w) {
    if (w->region) munmap(w->region, w->region_bytes);
    memset(w, 0, sizeof *w);
}

size_t weights_mem_huge_bytes(const struct weights_mem *w) {
    if (w->how != WEIGHTS_LOAD_READ || !w->region) return 0;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    uintptr_t lo = (uintptr_t)w->region, hi = lo + w->region_bytes;
    char line[512];
    bool inside = false;
    size_t huge = 0;
    while (fgets(line, sizeof line, f)) {
        uintptr_t a, b;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &a, &b) == 2) {
            inside = a < hi && b > lo;  // a VMA header line; the buffer may be one VMA or (after mprotect) more
            continue;
        }
        unsigned long long kb;
        if (inside && sscanf(line, "AnonHugePages: %llu kB", &kb) == 1) huge += (size_t)kb * 1024;
    }
    fclose(f);
    return huge < w->bytes ? huge : w->bytes;  // the buffer's tail past the file is not the weights
}

void weights_load_info_add(struct weights_load_info *info, const struct weights_mem *w) {
    if (info->n_files == 0) info->huge_advised = true;
    info->n_files++;
    info->how = w->how;
    info->bytes += w->bytes;
    info->huge_bytes += weights_mem_huge_bytes(w);
    if (w->how == WEIGHTS_LOAD_READ && w->bytes && !w->huge_advised) info->huge_advised = false;
}

// bytes as "2.08 GB" or "1.13 MB"
static const char *size_label(size_t bytes, char *buf, size_t n) {
    if (bytes >= 1000000000) snprintf(buf, n, "%.2f GB", (double)bytes / 1e9);
    else snprintf(buf, n, "%.2f MB", (double)bytes / 1e6);
    return buf;
}

const char *weights_load_info_label(const struct weights_load_info *info, char *buf, size_t n) {
    char sz[32], hz[32];
    size_label(info->bytes, sz, sizeof sz);
    if (info->how != WEIGHTS_LOAD_READ)
        snprintf(buf, n, "%s mapped from the file%s (--weights-load mmap)", sz, info->n_files > 1 ? "s" : "");
    else if (!info->huge_advised)
        snprintf(buf, n, "%s read into memory in 4 KiB pages (this kernel has no transparent huge pages) "
                 "(--weights-load read)", sz);
    else
        snprintf(buf, n, "%s read into memory, %s of it in 2 MiB pages%s (--weights-load read)", sz,
                 size_label(info->huge_bytes, hz, sizeof hz), info->huge_bytes ? "" : ": huge pages advised, none "
                 "granted (see /sys/kernel/mm/transparent_hugepage/enabled)");
    return buf;
}

int weights_load_parse(const char *s, enum weights_load *out) {
    if (!strcmp(s, "auto")) *out = WEIGHTS_LOAD_AUTO;
    else if (!strcmp(s, "mmap")) *out = WEIGHTS_LOAD_MMAP;
    else if (!strcmp(s, "read") || !strcmp(s, "no-mmap")) *out = WEIGHTS_LOAD_READ;
    else return err_set(OCT_EINVAL, "--weights-load: '%s' (choose auto, mmap or read)", s);
    return OCT_OK;
}

const char *weights_load_name(enum weights_load how) {
    return how == WEIGHTS_LOAD_MMAP ? "mmap" : how == WEIGHTS_LOAD_READ ? "read" : "auto";
}

enum weights_load weights_load_resolve(enum weights_load how, bool cuda) {
    if (how != WEIGHTS_LOAD_AUTO) return how;
    return cuda ? WEIGHTS_LOAD_MMAP : WEIGHTS_LOAD_READ;
}
