// weights_mem.h — how a model file's bytes come into memory (owns: the file's read-only mapping, or the
// 2 MiB-aligned anonymous buffer the file is read into, advised MADV_HUGEPAGE; the load-mode names).
// Not: parsing (gguf.c, safetensors.c). Either way the bytes are read-only once loaded, the whole file
// sits at a 2 MiB-aligned (read) or page-aligned (mmap) base, and weights_mem_free releases exactly what
// weights_mem_load took. Reading copies the file once, straight into the buffer (no mapping kept beside it).
#ifndef OCTET_WEIGHTS_MEM_H
#define OCTET_WEIGHTS_MEM_H

#include <stdbool.h>
#include <stddef.h>

// --weights-load: auto picks per backend (weights_load_resolve); mmap maps the file (pages come from
// the page cache, 4 KiB each); read copies it into anonymous memory advised for 2 MiB pages
// (llama.cpp's --no-mmap), which the CPU backend's decode GEMVs stream faster.
enum weights_load { WEIGHTS_LOAD_AUTO = 0, WEIGHTS_LOAD_MMAP, WEIGHTS_LOAD_READ };

struct weights_mem {
    const void *base;          // [bytes] the file's bytes (NULL before load / for an empty file)
    size_t bytes;              // the file's size
    void *region;              // what weights_mem_free unmaps: the mapping or the aligned buffer
    size_t region_bytes;
    enum weights_load how;     // MMAP or READ once loaded
    bool huge_advised;         // READ: madvise(MADV_HUGEPAGE) was accepted (false: no THP in this kernel)
};

// Loads the `bytes` of open file fd (its size from fstat) the way `how` says (AUTO means MMAP here:
// the device is not known at this layer). `what` ("gguf PATH") prefixes messages. Errors: OCT_ENOMEM
// naming the size and --mmap; OCT_EIO for a failed mmap/read or a short read (the file shrank),
// naming the byte offset. On error *w is zeroed and nothing is left allocated.
int weights_mem_load(struct weights_mem *w, int fd, size_t bytes, enum weights_load how, const char *what);
void weights_mem_free(struct weights_mem *w);
// Bytes of w's buffer backed by transparent huge pages now (AnonHugePages of its mapping in
// /proc/self/smaps, at most w->bytes); 0 for MMAP or where smaps is unreadable.
size_t weights_mem_huge_bytes(const struct weights_mem *w);

// What a model's files got, summed over them (the startup line).
struct weights_load_info {
    int n_files;
    enum weights_load how;     // of the last file (all files of a model load one way)
    size_t bytes;              // file bytes loaded
    size_t huge_bytes;         // READ: bytes in 2 MiB pages
    bool huge_advised;         // READ: every buffer was advised MADV_HUGEPAGE
};
void weights_load_info_add(struct weights_load_info *info, const struct weights_mem *w);
// "2.08 GB read into memory, 2.08 GB of it in 2 MiB pages" / "... mapped from the file" ...
const char *weights_load_info_label(const struct weights_load_info *info, char *buf, size_t n);

// "auto" | "mmap" | "read" (also "no-mmap" for read); OCT_EINVAL naming the value otherwise.
int weights_load_parse(const char *s, enum weights_load *out);
const char *weights_load_name(enum weights_load how);
// AUTO resolved for a backend: READ for the CPU (its GEMVs read the weights every token), MMAP for
// CUDA (the file is only the upload's source). Other values pass through.
enum weights_load weights_load_resolve(enum weights_load how, bool cuda);

#endif
