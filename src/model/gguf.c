// gguf.c — GGUF v2/v3 reader (owns: the file's bytes in memory (weights_mem.c), the key/value index, the tensor
// index with owned NUL-terminated names, the string-array offset tables).
// Does not own: what any key means (config.c), tensor math.
// Invariant: gguf_open validates every length, count and offset against the file size
// with overflow-safe arithmetic before any accessor can use it, so accessors never read
// outside the mapping. Keys and tensor names are unique (hash-indexed).
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/check.h"
#include "weights_mem.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ARRAY_DEPTH 8      // nested arrays deeper than this are rejected
#define GGUF_MAX_NAME_BYTES 65535   // keys and tensor names; the spec's limits are far lower

struct gguf_kv {
    char *key;                 // owned, NUL-terminated
    enum gguf_type type;
    const uint8_t *val;        // scalar: the value bytes; STRING: the chars; ARRAY: packed data
    uint64_t len;              // STRING: byte length; ARRAY: element count
    enum gguf_type elem;       // ARRAY only
    uint64_t *str_off;         // ARRAY of STRING: offset (from base) of each string's chars
};

// Open-addressing hash index from name to position; slots hold index+1 (0 = empty).
struct name_index {
    uint32_t *slots;
    size_t cap;                // power of two, > 2 × entries
};

struct gguf {
    char *path;
    int version;
    struct weights_mem mem;    // the file's bytes, mapped or read (zero for gguf_open_mem)
    const uint8_t *base;       // [size] the whole file
    size_t size;
    struct gguf_kv *kvs;       // [n_kv]
    size_t n_kv;
    struct name_index kv_index;
    struct tensor_info *tensors; // [n_tensors]; names owned (cast away const on free)
    size_t n_tensors;
    struct name_index tensor_index;
};

// ---- name index -----------------------------------------------------------------

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int name_index_init(struct name_index *ix, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 1) cap *= 2;
    ix->slots = calloc(cap, sizeof *ix->slots);
    ix->cap = cap;
    return ix->slots ? 0 : OCT_ENOMEM;
}

// Looks `name` up among names[] through the index; returns its position or -1.
// With insert_pos >= 0 and the name absent, records it at insert_pos.
static long name_index_probe(struct name_index *ix, const char *const *names, size_t stride,
                             const char *name, long insert_pos) {
    size_t mask = ix->cap - 1;
    for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
        uint32_t s = ix->slots[i];
        if (s == 0) {
            if (insert_pos >= 0) ix->slots[i] = (uint32_t)insert_pos + 1;
            return -1;
        }
        const char *other = *(const char *const *)((const char *)names + (s - 1) * stride);
        if (strcmp(other, name) == 0) return (long)s - 1;
    }
}

// ---- bounds-checked reader ------------------------------------------------------

struct reader {
    const uint8_t *base;
    size_t size, pos;
    const char *path;
    char ctx[160];             // what is being read, for messages ("key 'x'")
};

static int rd_need(struct reader *r, uint64_t n, const char *what) {
    if (n > r->size - r->pos)
        return err_set(OCT_EINVAL, "gguf %s: %s: truncated: %s needs %llu bytes at offset %zu, "
                       "file has %zu", r->path, r->ctx, what, (unsigned long long)n, r->pos,
                       r->size);
    return 0;
}

static int rd_u32(struct reader *r, uint32_t *v, const char *what) {
    TRY(rd_need(r, 4, what));
    const uint8_t *p = r->base + r->pos;
    *v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    r->pos += 4;
    return 0;
}

static int rd_u64(struct reader *r, uint64_t *v, const char *what) {
    TRY(rd_need(r, 8, what));
    const uint8_t *p = r->base + r->pos;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = x << 8 | p[i];
    *v = x;
    r->pos += 8;
    return 0;
}

// Reads a GGUF string (u64 length + bytes); *s points into the mapping.
static int rd_str(struct reader *r, const char **s, uint64_t *len, const char *what) {
    TRY(rd_u64(r, len, what));
    if (*len > r->size - r->pos)
        return err_set(OCT_EINVAL, "gguf %s: %s: %s length %llu exceeds the %zu bytes left at "
                       "offset %zu", r->path, r->ctx, what, (unsigned long long)*len,
                       r->size - r->pos, r->pos);
    *s = (const char *)r->base + r->pos;
    r->pos += (size_t)*len;
    return 0;
}

// Reads a name (key or tensor name) into an owned NUL-terminated copy.
static int rd_name(struct reader *r, char **out, const char *what) {
    const char *s;
    uint64_t len;
    TRY(rd_str(r, &s, &len, what));
    if (len > GGUF_MAX_NAME_BYTES)
        return err_set(OCT_EINVAL, "gguf %s: %s: %s length %llu is too long", r->path, r->ctx,
                       what, (unsigned long long)len);
    if (memchr(s, 0, (size_t)len))
        return err_set(OCT_EINVAL, "gguf %s: %s: %s contains a NUL byte", r->path, r->ctx, what);
    *out = malloc((size_t)len + 1);
    if (!*out) return err_set(OCT_ENOMEM, "gguf %s: out of memory", r->path);
    memcpy(*out, s, (size_t)len);
    (*out)[len] = 0;
    return 0;
}

// ---- metadata values ------------------------------------------------------------

static const char *type_name(uint32_t t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                  "string", "array", "u64", "i64", "f64"};
    return t < sizeof names / sizeof names[0] ? names[t] : "invalid";
}

// Bytes of one scalar of type t; 0 for STRING/ARRAY/invalid.
static size_t scalar_bytes(uint32_t t) {
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

// Skips over one array body (type + count + elements), recursing for nested arrays.
static int skip_array(struct reader *r, int depth) {
    uint32_t elem;
    uint64_t n;
    if (depth > GGUF_MAX_ARRAY_DEPTH)
        return err_set(OCT_EINVAL, "gguf %s: %s: arrays nested deeper than %d", r->path, r->ctx,
                       GGUF_MAX_ARRAY_DEPTH);
    TRY(rd_u32(r, &elem, "array element type"));
    TRY(rd_u64(r, &n, "array count"));
    size_t left = r->size - r->pos, eb = scalar_bytes(elem);
    uint64_t min_elem = eb ? eb : elem == GGUF_STRING ? 8 : elem == GGUF_ARRAY ? 12 : 0;
    if (min_elem == 0)
        return err_set(OCT_EINVAL, "gguf %s: %s: invalid array element type %u", r->path,
                       r->ctx, elem);
    if (n > left / min_elem)
        return err_set(OCT_EINVAL, "gguf %s: %s: array count %llu of %s cannot fit in the %zu "
                       "bytes left at offset %zu", r->path, r->ctx, (unsigned long long)n,
                       type_name(elem), left, r->pos);
    if (eb) { r->pos += (size_t)(n * eb); return 0; }
    for (uint64_t i = 0; i < n; i++) {
        if (elem == GGUF_ARRAY) {
            TRY(skip_array(r, depth + 1));
        } else {
            const char *s;
            uint64_t len;
            TRY(rd_str(r, &s, &len, "array string"));
        }
    }
    return 0;
}

static int read_value(struct reader *r, struct gguf_kv *kv) {
    uint32_t t;
    TRY(rd_u32(r, &t, "value type"));
    kv->type = (enum gguf_type)t;
    size_t eb = scalar_bytes(t);
    if (eb) {
        TRY(rd_need(r, eb, type_name(t)));
        kv->val = r->base + r->pos;
        r->pos += eb;
        return 0;
    }
    if (t == GGUF_STRING) {
        const char *s;
        TRY(rd_str(r, &s, &kv->len, "string"));
        kv->val = (const uint8_t *)s;
        return 0;
    }
    if (t != GGUF_ARRAY)
        return err_set(OCT_EINVAL, "gguf %s: %s: invalid value type %u", r->path, r->ctx, t);
    size_t start = r->pos;
    TRY(skip_array(r, 0));  // validates the whole array, nested ones included
    uint32_t elem;
    r->pos = start;
    TRY(rd_u32(r, &elem, "array element type"));
    TRY(rd_u64(r, &kv->len, "array count"));
    kv->elem = (enum gguf_type)elem;
    kv->val = r->base + r->pos;
    if (elem == GGUF_STRING) {
        // count was validated (≤ bytes left / 8), so this allocation is bounded by file size
        kv->str_off = malloc(kv->len ? (size_t)kv->len * sizeof *kv->str_off : 1);
        if (!kv->str_off) return err_set(OCT_ENOMEM, "gguf %s: out of memory", r->path);
        for (uint64_t i = 0; i < kv->len; i++) {
            const char *s;
            uint64_t len;
            TRY(rd_str(r, &s, &len, "array string"));
            kv->str_off[i] = (uint64_t)((const uint8_t *)s - r->base);
        }
    } else {
        r->pos = start;
        TRY(skip_array(r, 0));
    }
    return 0;
}

// ---- tensors --------------------------------------------------------------------

static const char *ggml_type_name(uint32_t t) {
    static const char *names[] = {
        "F32", "F16", "Q4_0", "Q4_1", "Q4_2(removed)", "Q4_3(removed)", "Q5_0", "Q5_1", "Q8_0",
        "Q8_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
        "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64",
        "IQ1_M", "BF16", "Q4_0_4_4(removed)", "Q4_0_4_8(removed)", "Q4_0_8_8(removed)",
        "TQ1_0", "TQ2_0", "IQ4_NL_4_4(removed)", "IQ4_NL_4_8(removed)", "IQ4_NL_8_8(removed)",
        "MXFP4"};
    return t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static int read_tensor_info(struct reader *r, struct tensor_info *ti, uint64_t *offset) {
    char *name = NULL;
    TRY(rd_name(r, &name, "tensor name"));
    ti->name = name;  // owned by the gguf from here on, even on error
    snprintf(r->ctx, sizeof r->ctx, "tensor '%.100s'", name);
    if (name[0] == 0)
        return err_set(OCT_EINVAL, "gguf %s: %s: empty tensor name", r->path, r->ctx);
    uint32_t n_dims, type;
    TRY(rd_u32(r, &n_dims, "n_dims"));
    if (n_dims < 1 || n_dims > TENSOR_MAX_DIMS)
        return err_set(OCT_EINVAL, "gguf %s: %s: n_dims %u is not in 1..%d", r->path, r->ctx,
                       n_dims, TENSOR_MAX_DIMS);
    ti->n_dims = (int)n_dims;
    int64_t n_elems = 1;
    for (int d = 0; d < TENSOR_MAX_DIMS; d++) ti->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne;
        TRY(rd_u64(r, &ne, "dimension"));
        if (ne == 0 || ne > (uint64_t)INT64_MAX || (int64_t)ne > INT64_MAX / n_elems)
            return err_set(OCT_EINVAL, "gguf %s: %s: dimension %u = %llu is zero or makes the "
                           "element count overflow", r->path, r->ctx, d, (unsigned long long)ne);
        ti->ne[d] = (int64_t)ne;
        n_elems *= (int64_t)ne;
    }
    TRY(rd_u32(r, &type, "ggml type"));
    switch (type) {
    case 0: ti->dtype = DT_F32; break;
    case 1: ti->dtype = DT_F16; break;
    case 30: ti->dtype = DT_BF16; break;
    case 8: ti->dtype = DT_Q8_0; break;
    case 2: ti->dtype = DT_Q4_0; break;
    case 12: ti->dtype = DT_Q4_K; break;
    case 13: ti->dtype = DT_Q5_K; break;
    case 14: ti->dtype = DT_Q6_K; break;
    case 39: ti->dtype = DT_MXFP4_GGML; break;
    default:
        return err_set(OCT_EUNSUP, "gguf %s: %s: ggml type %u (%s) is not supported (only F32, "
                       "F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MXFP4)", r->path, r->ctx, type, ggml_type_name(type));
    }
    int be = dtype_block_elems(ti->dtype);
    if (ti->ne[0] % be != 0)
        return err_set(OCT_EINVAL, "gguf %s: %s: %s rows of %lld elements are not whole %d-element blocks",
                       r->path, r->ctx, ggml_type_name(type), (long long)ti->ne[0], be);
    size_t es = dtype_block_bytes(ti->dtype);
    if ((uint64_t)(n_elems / be) > SIZE_MAX / es)
        return err_set(OCT_EINVAL, "gguf %s: %s: byte size overflows", r->path, r->ctx);
    ti->n_bytes = (size_t)(n_elems / be) * es;
    return rd_u64(r, offset, "data offset");
}

// ---- open / close ---------------------------------------------------------------

static int parse(struct gguf *g) {
    struct reader r = {.base = g->base, .size = g->size, .path = g->path};
    snprintf(r.ctx, sizeof r.ctx, "header");
    TRY(rd_need(&r, 4, "magic"));
    if (memcmp(g->base, GGUF_MAGIC, 4) != 0)
        return err_set(OCT_EINVAL, "gguf %s: bad magic (not a GGUF file)", g->path);
    r.pos = 4;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    TRY(rd_u32(&r, &version, "version"));
    if (version == 1)
        return err_set(OCT_EUNSUP, "gguf %s: version 1 is not supported (only v2 and v3; "
                       "re-convert the model)", g->path);
    if (version != 2 && version != 3) {
        if ((version & 0xffff) == 0)
            return err_set(OCT_EUNSUP, "gguf %s: version 0x%08x: big-endian GGUF is not "
                           "supported", g->path, version);
        return err_set(OCT_EUNSUP, "gguf %s: version %u is not supported (only 2 and 3)",
                       g->path, version);
    }
    g->version = (int)version;
    TRY(rd_u64(&r, &n_tensors, "tensor count"));
    TRY(rd_u64(&r, &n_kv, "key/value count"));
    size_t left = r.size - r.pos;
    // smallest KV: key length (8) + type (4) + one byte; smallest tensor info: 32 bytes
    if (n_kv > left / 13 || n_tensors > left / 32 || n_kv > INT32_MAX ||
        n_tensors > INT32_MAX)
        return err_set(OCT_EINVAL, "gguf %s: header: %llu keys / %llu tensors cannot fit in "
                       "the %zu bytes after the header", g->path, (unsigned long long)n_kv,
                       (unsigned long long)n_tensors, left);

    g->kvs = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kvs);
    if (!g->kvs || name_index_init(&g->kv_index, (size_t)n_kv) < 0)
        return err_set(OCT_ENOMEM, "gguf %s: out of memory", g->path);
    for (uint64_t i = 0; i < n_kv; i++) {
        struct gguf_kv *kv = &g->kvs[i];
        snprintf(r.ctx, sizeof r.ctx, "key #%llu", (unsigned long long)i);
        TRY(rd_name(&r, &kv->key, "key"));
        g->n_kv = (size_t)i + 1;
        snprintf(r.ctx, sizeof r.ctx, "key '%.100s'", kv->key);
        if (name_index_probe(&g->kv_index, (const char *const *)&g->kvs[0].key, sizeof *kv,
                             kv->key, (long)i) >= 0)
            return err_set(OCT_EINVAL, "gguf %s: %s: duplicate key", g->path, r.ctx);
        TRY(read_value(&r, kv));
    }

    uint64_t alignment = GGUF_DEFAULT_ALIGNMENT;
    if (gguf_has_key(g, "general.alignment")) {
        int64_t a;
        if (gguf_get_int(g, "general.alignment", &a) < 0)
            return err_set(OCT_EINVAL, "gguf %s: key 'general.alignment' is not an integer",
                           g->path);
        if (a <= 0 || (a & (a - 1)) != 0 || a > (1 << 30))
            return err_set(OCT_EINVAL, "gguf %s: key 'general.alignment' = %lld is not a power "
                           "of two in 1..2^30", g->path, (long long)a);
        alignment = (uint64_t)a;
    }

    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    uint64_t *offsets = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *offsets);
    int rc = 0;
    if (!g->tensors || !offsets || name_index_init(&g->tensor_index, (size_t)n_tensors) < 0)
        rc = err_set(OCT_ENOMEM, "gguf %s: out of memory", g->path);
    for (uint64_t i = 0; rc == 0 && i < n_tensors; i++) {
        struct tensor_info *ti = &g->tensors[i];
        snprintf(r.ctx, sizeof r.ctx, "tensor #%llu", (unsigned long long)i);
        rc = read_tensor_info(&r, ti, &offsets[i]);
        if (ti->name) g->n_tensors = (size_t)i + 1;
        if (rc == 0 && name_index_probe(&g->tensor_index, (const char *const *)&g->tensors[0].name,
                                        sizeof *ti, ti->name, (long)i) >= 0)
            rc = err_set(OCT_EINVAL, "gguf %s: %s: duplicate tensor name", g->path, r.ctx);
    }
    if (rc == 0 && n_tensors > 0) {
        size_t pad = (size_t)((alignment - r.pos % alignment) % alignment);
        if (pad > g->size - r.pos)
            rc = err_set(OCT_EINVAL, "gguf %s: truncated: tensor data section (offset %zu + %zu "
                         "padding) is past the end of the %zu-byte file", g->path, r.pos, pad,
                         g->size);
        size_t data_start = r.pos + pad, data_bytes = g->size - data_start;
        for (size_t i = 0; rc == 0 && i < n_tensors; i++) {
            struct tensor_info *ti = &g->tensors[i];
            if (offsets[i] % alignment != 0)
                rc = err_set(OCT_EINVAL, "gguf %s: tensor '%.100s': data offset %llu is not a "
                             "multiple of the alignment %llu", g->path, ti->name,
                             (unsigned long long)offsets[i], (unsigned long long)alignment);
            else if (offsets[i] > data_bytes || ti->n_bytes > data_bytes - offsets[i])
                rc = err_set(OCT_EINVAL, "gguf %s: tensor '%.100s': data [%llu, +%zu) lies "
                             "outside the %zu-byte data section", g->path, ti->name,
                             (unsigned long long)offsets[i], ti->n_bytes, data_bytes);
            else if ((data_start + offsets[i]) % dtype_align(ti->dtype) != 0)  // read in place, as its type
                rc = err_set(OCT_EINVAL, "gguf %s: tensor '%.100s' (%s) starts at byte %llu of the file, "
                             "not a multiple of its %zu-byte elements (general.alignment %llu); octet reads "
                             "tensors in place: re-export with general.alignment 32", g->path, ti->name,
                             dtype_name(ti->dtype), (unsigned long long)(data_start + offsets[i]),
                             dtype_align(ti->dtype), (unsigned long long)alignment);
            else
                ti->data = g->base + data_start + offsets[i];
        }
    }
    free(offsets);
    return rc;
}

static int open_common(struct gguf **out, struct gguf *g, const char *name) {
    g->path = strdup(name);
    if (!g->path) { gguf_close(g); return err_set(OCT_ENOMEM, "gguf %s: out of memory", name); }
    int rc = parse(g);
    if (rc < 0) { gguf_close(g); return rc; }
    *out = g;
    return 0;
}

int gguf_open_mem(struct gguf **out, const void *data, size_t n_bytes, const char *name) {
    *out = NULL;
    struct gguf *g = calloc(1, sizeof *g);
    if (!g) return err_set(OCT_ENOMEM, "gguf %s: out of memory", name);
    g->base = data;
    g->size = data ? n_bytes : 0;
    return open_common(out, g, name);
}

int gguf_open(struct gguf **out, const char *path) { return gguf_open_load(out, path, WEIGHTS_LOAD_MMAP); }

int gguf_open_load(struct gguf **out, const char *path, enum weights_load how) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(OCT_EIO, "gguf %s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(OCT_EIO, "gguf %s: not a regular file", path);
    }
    if (st.st_size < 24) {
        close(fd);
        return err_set(OCT_EINVAL, "gguf %s: truncated: %lld bytes is smaller than the 24-byte "
                       "header", path, (long long)st.st_size);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return err_set(OCT_EIO, "gguf %s: file too large to map", path);
    }
    struct gguf *g = calloc(1, sizeof *g);
    if (!g) {
        close(fd);
        return err_set(OCT_ENOMEM, "gguf %s: out of memory", path);
    }
    char what[1100];
    snprintf(what, sizeof what, "gguf %s", path);
    int rc = weights_mem_load(&g->mem, fd, (size_t)st.st_size, how, what);
    close(fd);
    if (rc < 0) {
        free(g);
        return rc;
    }
    g->base = g->mem.base;
    g->size = g->mem.bytes;
    return open_common(out, g, path);
}

void gguf_close(struct gguf *g) {
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) {
        free(g->kvs[i].key);
        free(g->kvs[i].str_off);
    }
    free(g->kvs);
    free(g->kv_index.slots);
    for (size_t i = 0; i < g->n_tensors; i++) free((char *)g->tensors[i].name);
    free(g->tensors);
    free(g->tensor_index.slots);
    weights_mem_free(&g->mem);
    free(g->path);
    free(g);
}

const char *gguf_path(const struct gguf *g) { return g->path; }
const struct weights_mem *gguf_weights_mem(const struct gguf *g) { return &g->mem; }
int gguf_version(const struct gguf *g) { return g->version; }

// ---- metadata accessors ---------------------------------------------------------

static const struct gguf_kv *find_kv(const struct gguf *g, const char *key) {
    if (!g->kv_index.slots || !key) return NULL;
    long i = name_index_probe((struct name_index *)&g->kv_index,
                              (const char *const *)&g->kvs[0].key, sizeof g->kvs[0], key, -1);
    return i >= 0 && (size_t)i < g->n_kv ? &g->kvs[i] : NULL;
}

static int type_err(const struct gguf *g, const struct gguf_kv *kv, const char *want) {
    return err_set(OCT_EINVAL, "gguf %s: key '%s' has type %s%s%s, expected %s", g->path,
                   kv->key, type_name(kv->type), kv->type == GGUF_ARRAY ? " of " : "",
                   kv->type == GGUF_ARRAY ? type_name(kv->elem) : "", want);
}

bool gguf_has_key(const struct gguf *g, const char *key) { return find_kv(g, key) != NULL; }

int gguf_get_int(const struct gguf *g, const char *key, int64_t *out) {
    const struct gguf_kv *kv = find_kv(g, key);
    if (!kv) return OCT_EINVAL;
    const uint8_t *p = kv->val;
    switch (kv->type) {
    case GGUF_U8: case GGUF_BOOL: *out = p[0]; return 0;
    case GGUF_I8: *out = (int8_t)p[0]; return 0;
    case GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case GGUF_I16: { int16_t v; memcpy(&v, p, 2); *out = v; return 0; }
    case GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case GGUF_I32: { int32_t v; memcpy(&v, p, 4); *out = v; return 0; }
    case GGUF_I64: { int64_t v; memcpy(&v, p, 8); *out = v; return 0; }
    case GGUF_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > (uint64_t)INT64_MAX)
            return err_set(OCT_EINVAL, "gguf %s: key '%s': u64 value %llu overflows int64",
                           g->path, key, (unsigned long long)v);
        *out = (int64_t)v;
        return 0;
    }
    default: return type_err(g, kv, "an integer");
    }
}

int gguf_get_float(const struct gguf *g, const char *key, double *out) {
    const struct gguf_kv *kv = find_kv(g, key);
    if (!kv) return OCT_EINVAL;
    if (kv->type == GGUF_F32) { float v; memcpy(&v, kv->val, 4); *out = v; return 0; }
    if (kv->type == GGUF_F64) { memcpy(out, kv->val, 8); return 0; }
    if (kv->type == GGUF_U64) { uint64_t v; memcpy(&v, kv->val, 8); *out = (double)v; return 0; }
    int64_t v;
    if (kv->type == GGUF_BOOL || kv->type == GGUF_STRING || kv->type == GGUF_ARRAY)
        return type_err(g, kv, "a number");
    TRY(gguf_get_int(g, key, &v));
    *out = (double)v;
    return 0;
}

int gguf_get_bool(const struct gguf *g, const char *key, bool *out) {
    const struct gguf_kv *kv = find_kv(g, key);
    if (!kv) return OCT_EINVAL;
    if (kv->type != GGUF_BOOL) return type_err(g, kv, "bool");
    *out = kv->val[0] != 0;
    return 0;
}

int gguf_get_str(const struct gguf *g, const char *key, const char **s, size_t *len) {
    const struct gguf_kv *kv = find_kv(g, key);
    if (!kv) return OCT_EINVAL;
    if (kv->type != GGUF_STRING) return type_err(g, kv, "string");
    *s = (const char *)kv->val;
    *len = (size_t)kv->len;
    return 0;
}

int gguf_get_arr_info(const struct gguf *g, const char *key, enum gguf_type *elem, size_t *n) {
    const struct gguf_kv *kv = find_kv(g, key);
    if (!kv) return OCT_EINVAL;
    if (kv->type != GGUF_ARRAY) return type_err(g, kv, "array");
    *elem = kv->elem;
    *n = (size_t)kv->len;
    return 0;
}

int gguf_get_arr_data(const struct gguf *g, const char *key, const void **data) {
    const struct gguf_kv *kv = find_kv(g, key);
    if (!kv) return OCT_EINVAL;
    if (kv->type != GGUF_ARRAY || kv->elem == GGUF_STRING || kv->elem == GGUF_ARRAY)
        return type_err(g, kv, "array of numbers");
    *data = kv->val;
    return 0;
}

int gguf_get_arr_str(const struct gguf *g, const char *key, size_t i, const char **s,
                     size_t *len) {
    const struct gguf_kv *kv = find_kv(g, key);
    if (!kv) return OCT_EINVAL;
    if (kv->type != GGUF_ARRAY || kv->elem != GGUF_STRING)
        return type_err(g, kv, "array of strings");
    if (i >= kv->len)
        return err_set(OCT_EINVAL, "gguf %s: key '%s': index %zu out of range (%llu strings)",
                       g->path, key, i, (unsigned long long)kv->len);
    const uint8_t *p = g->base + kv->str_off[i];
    uint64_t l = 0;
    for (int b = 7; b >= 0; b--) l = l << 8 | (p - 8)[b];
    *s = (const char *)p;
    *len = (size_t)l;
    return 0;
}

// ---- tensor accessors -----------------------------------------------------------

int gguf_n_tensors(const struct gguf *g) { return (int)g->n_tensors; }

const struct tensor_info *gguf_tensor(const struct gguf *g, int i) {
    return i >= 0 && (size_t)i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct tensor_info *gguf_find_tensor(const struct gguf *g, const char *name) {
    if (!g->tensor_index.slots || !name) return NULL;
    long i = name_index_probe((struct name_index *)&g->tensor_index,
                              (const char *const *)&g->tensors[0].name, sizeof g->tensors[0],
                              name, -1);
    return i >= 0 ? &g->tensors[i] : NULL;
}
