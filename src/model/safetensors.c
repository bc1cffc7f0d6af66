// safetensors.c — Hugging Face model directory reader (owns: config.json's parsed JSON,
// each *.safetensors file's bytes, mapped or read (weights_mem.c), the tensor index with owned names).
// Does not own: what config keys mean (config.c), HF → internal tensor naming.
// Invariant: st_open checks every header (length, JSON, dtype, shape, data_offsets inside
// the data section and equal to numel × dtype size) before exposing a tensor, so a
// tensor_info never points outside its mapping. Tensor names are unique across shards.
// Order: files in load order (index json order of first mention / sorted names), and
// within a file by data offset, i.e. file order.
#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
#include "safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/check.h"
#include "weights_mem.h"

#define ST_MAX_HEADER_BYTES (100u << 20)  // the safetensors format's own limit

struct st_file {
    char *name;                // file name inside the directory (owned)
    char *path;                // dir/name (owned), for messages
    struct weights_mem mem;    // the file's bytes
};

struct st_dir {
    char *path;
    enum weights_load load;    // how each file's bytes are held
    json_t *config;
    struct st_file *files;     // [n_files]
    size_t n_files, cap_files;
    struct tensor_info *tensors; // [n_tensors]; names owned
    int *tensor_file;          // [n_tensors] index into files
    size_t n_tensors, cap_tensors;
    uint32_t *slots;           // open-addressing name index: tensor index + 1, 0 = empty
    size_t n_slots;            // power of two, > 2 × n_tensors
};

static uint64_t name_hash(const char *s) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

// Finds `name`; returns its tensor index or -1. With insert_pos >= 0 and the name absent,
// records it at insert_pos.
static long index_probe(const struct st_dir *d, const char *name, long insert_pos) {
    size_t mask = d->n_slots - 1;
    for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
        uint32_t s = d->slots[i];
        if (s == 0) {
            if (insert_pos >= 0) d->slots[i] = (uint32_t)insert_pos + 1;
            return -1;
        }
        if (strcmp(d->tensors[s - 1].name, name) == 0) return (long)s - 1;
    }
}

static int parse_dtype(const char *s, enum dtype *out) {
    static const struct { const char *name; enum dtype dt; } table[] = {
        {"F32", DT_F32}, {"F16", DT_F16}, {"BF16", DT_BF16}, {"F8_E4M3", DT_E4M3},
        {"F8_E5M2", DT_E5M2}, {"I32", DT_I32}, {"I64", DT_I64}, {"U8", DT_U8}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(s, table[i].name) == 0) { *out = table[i].dt; return 0; }
    return -1;
}

static int json_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
    *out = (uint64_t)json_integer_value(v);
    return 0;
}

// Validates one header entry and fills *ti (name not set). `data`/`data_bytes`: the
// file's data section, which starts at byte data_off (8 + the header length) of the file.
// A tensor must start at a multiple of its element size in the file: it is read in place.
static int parse_entry(const char *path, const char *name, const json_t *e,
                       const uint8_t *data, size_t data_off, size_t data_bytes, struct tensor_info *ti) {
    if (!json_is_object(e))
        return err_set(OCT_EINVAL, "safetensors %s: tensor '%s': entry is not an object",
                       path, name);
    const json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
                 *jo = json_object_get(e, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo))
        return err_set(OCT_EINVAL, "safetensors %s: tensor '%s': needs string 'dtype', array "
                       "'shape' and array 'data_offsets'", path, name);
    if (parse_dtype(json_string_value(jd), &ti->dtype) < 0)
        return err_set(OCT_EUNSUP, "safetensors %s: tensor '%s': dtype '%.40s' is not "
                       "supported (F32, F16, BF16, F8_E4M3, F8_E5M2, I32, I64, U8)", path, name,
                       json_string_value(jd));
    size_t rank = json_array_size(js);
    if (rank > TENSOR_MAX_DIMS)
        return err_set(OCT_EUNSUP, "safetensors %s: tensor '%s': rank %zu is more than %d",
                       path, name, rank, TENSOR_MAX_DIMS);
    // reverse into GGUF order: ne[0] = last (contiguous) dim; rank 0 is a 1-element vector
    ti->n_dims = rank ? (int)rank : 1;
    for (int k = 0; k < TENSOR_MAX_DIMS; k++) ti->ne[k] = 1;
    uint64_t n_elems = 1;
    for (size_t k = 0; k < rank; k++) {
        uint64_t dim;
        if (json_u64(json_array_get(js, k), &dim) < 0)
            return err_set(OCT_EINVAL, "safetensors %s: tensor '%s': shape[%zu] is not a "
                           "non-negative integer", path, name, k);
        if (dim != 0 && n_elems > (uint64_t)INT64_MAX / dim)
            return err_set(OCT_EINVAL, "safetensors %s: tensor '%s': element count overflows",
                           path, name);
        n_elems *= dim;
        ti->ne[rank - 1 - k] = (int64_t)dim;
    }
    uint64_t begin, end, es = dtype_size(ti->dtype);
    if (json_array_size(jo) != 2 || json_u64(json_array_get(jo, 0), &begin) < 0 ||
        json_u64(json_array_get(jo, 1), &end) < 0)
        return err_set(OCT_EINVAL, "safetensors %s: tensor '%s': data_offsets must be two "
                       "non-negative integers", path, name);
    if (begin > end || end > data_bytes)
        return err_set(OCT_EINVAL, "safetensors %s: tensor '%s': data_offsets [%llu, %llu] "
                       "out of range (data section is %zu bytes)", path, name,
                       (unsigned long long)begin, (unsigned long long)end, data_bytes);
    if (n_elems > UINT64_MAX / es || end - begin != n_elems * es)
        return err_set(OCT_EINVAL, "safetensors %s: tensor '%s': %llu bytes in data_offsets, "
                       "but shape × %s needs %llu × %llu", path, name,
                       (unsigned long long)(end - begin), dtype_name(ti->dtype),
                       (unsigned long long)n_elems, (unsigned long long)es);
    if ((data_off + begin) % es != 0)
        return err_set(OCT_EINVAL, "safetensors %s: tensor '%s' (%s) starts at byte %llu of the file, not a "
                       "multiple of its %llu-byte elements (the header length %llu is not a multiple of 8, "
                       "as the format requires): re-save the file with the safetensors library", path, name,
                       dtype_name(ti->dtype), (unsigned long long)(data_off + begin), (unsigned long long)es,
                       (unsigned long long)(data_off - 8));
    ti->data = data + begin;
    ti->n_bytes = (size_t)(end - begin);
    return 0;
}

static int grow_tensors(struct st_dir *d) {
    if (d->n_tensors < d->cap_tensors) return 0;
    size_t cap = d->cap_tensors ? 2 * d->cap_tensors : 64;
    struct tensor_info *t = realloc(d->tensors, cap * sizeof *t);
    if (t) d->tensors = t;
    int *tf = realloc(d->tensor_file, cap * sizeof *tf);
    if (tf) d->tensor_file = tf;
    if (!t || !tf) return err_set(OCT_ENOMEM, "safetensors %s: out of memory", d->path);
    d->cap_tensors = cap;
    return 0;
}

static int cmp_data(const void *a, const void *b) {
    const struct tensor_info *x = a, *y = b;
    uintptr_t px = (uintptr_t)x->data, py = (uintptr_t)y->data;
    if (px != py) return px < py ? -1 : 1;
    return strcmp(x->name, y->name);
}

// Parses the header of the mapped file f and appends its tensors.
static int parse_header(struct st_dir *d, int file_ix) {
    const struct st_file *f = &d->files[file_ix];
    const uint8_t *base = f->mem.base;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | base[i];
    if (hlen > f->mem.bytes - 8 || hlen > ST_MAX_HEADER_BYTES)
        return err_set(OCT_EINVAL, "safetensors %s: header length %llu exceeds the file (%zu "
                       "bytes) or the 100 MB limit", f->path, (unsigned long long)hlen,
                       f->mem.bytes);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)base + 8, (size_t)hlen,
                              JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return err_set(OCT_EINVAL, "safetensors %s: bad JSON header: %s (line %d, column %d)",
                       f->path, jerr.text, jerr.line, jerr.column);
    int rc = 0;
    if (!json_is_object(root))
        rc = err_set(OCT_EINVAL, "safetensors %s: JSON header is not an object", f->path);
    const uint8_t *data = base + 8 + hlen;
    size_t data_bytes = f->mem.bytes - 8 - (size_t)hlen, first = d->n_tensors;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (rc < 0) break;
        if (strcmp(key, "__metadata__") == 0) continue;
        if ((rc = grow_tensors(d)) < 0) break;
        struct tensor_info *ti = &d->tensors[d->n_tensors];
        memset(ti, 0, sizeof *ti);
        if (strlen(key) == 0 || strlen(key) > 4096) {
            rc = err_set(OCT_EINVAL, "safetensors %s: tensor name empty or too long", f->path);
            break;
        }
        if ((rc = parse_entry(f->path, key, val, data, 8 + (size_t)hlen, data_bytes, ti)) < 0) break;
        if (!(ti->name = strdup(key))) {
            rc = err_set(OCT_ENOMEM, "safetensors %s: out of memory", f->path);
            break;
        }
        d->tensor_file[d->n_tensors++] = file_ix;
    }
    json_decref(root);
    if (rc == 0 && d->n_tensors > first)
        qsort(d->tensors + first, d->n_tensors - first, sizeof *d->tensors, cmp_data);
    return rc;
}

// Maps dir/name (once: returns the existing index if already open) and parses it.
static int open_file(struct st_dir *d, const char *name, int *file_ix) {
    for (size_t i = 0; i < d->n_files; i++)
        if (strcmp(d->files[i].name, name) == 0) { *file_ix = (int)i; return 0; }
    if (d->n_files == d->cap_files) {
        size_t cap = d->cap_files ? 2 * d->cap_files : 8;
        struct st_file *nf = realloc(d->files, cap * sizeof *nf);
        if (!nf) return err_set(OCT_ENOMEM, "safetensors %s: out of memory", d->path);
        d->files = nf;
        d->cap_files = cap;
    }
    struct st_file *f = &d->files[d->n_files];
    memset(f, 0, sizeof *f);
    size_t plen = strlen(d->path) + strlen(name) + 2;
    f->name = strdup(name);
    f->path = malloc(plen);
    if (!f->name || !f->path) {
        free(f->name);
        free(f->path);
        return err_set(OCT_ENOMEM, "safetensors %s: out of memory", d->path);
    }
    snprintf(f->path, plen, "%s/%s", d->path, name);
    d->n_files++;  // owned from here on (closed by st_close)
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(OCT_EIO, "safetensors %s: cannot open: %s", f->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 8 ||
        (uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return err_set(OCT_EINVAL, "safetensors %s: not a regular file of at least 8 bytes "
                       "(truncated header length)", f->path);
    }
    char what[4200];
    snprintf(what, sizeof what, "safetensors %s", f->path);
    int rc = weights_mem_load(&f->mem, fd, (size_t)st.st_size, d->load, what);
    close(fd);
    if (rc < 0) return rc;
    *file_ix = (int)d->n_files - 1;
    return parse_header(d, *file_ix);
}

static bool file_exists(const char *dir, const char *name) {
    char p[4096];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int load_json(const char *dir, const char *name, json_t **out) {
    char p[4096];
    json_error_t jerr;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    *out = json_load_file(p, JSON_REJECT_DUPLICATES, &jerr);
    if (!*out)
        return err_set(OCT_EINVAL, "safetensors %s: cannot load: %s (line %d, column %d)", p,
                       jerr.text, jerr.line, jerr.column);
    if (!json_is_object(*out))
        return err_set(OCT_EINVAL, "safetensors %s: top level is not a JSON object", p);
    return 0;
}

static bool plain_name(const char *s) {
    return s[0] && s[0] != '.' && !strchr(s, '/');
}

// model.safetensors.index.json: open every shard in weight_map once, then check that
// each listed tensor lives in the shard the map names.
static int open_index(struct st_dir *d) {
    json_t *index = NULL;
    int rc = load_json(d->path, "model.safetensors.index.json", &index);
    const json_t *wm = rc == 0 ? json_object_get(index, "weight_map") : NULL;
    if (rc == 0 && !json_is_object(wm))
        rc = err_set(OCT_EINVAL, "safetensors %s/model.safetensors.index.json: no "
                     "'weight_map' object", d->path);
    const char *key;
    json_t *val;
    int fi;
    if (rc == 0) {
        json_object_foreach((json_t *)wm, key, val) {
            if (!json_is_string(val) || !plain_name(json_string_value(val))) {
                rc = err_set(OCT_EINVAL, "safetensors %s/model.safetensors.index.json: tensor "
                             "'%s': shard must be a plain file name", d->path, key);
                break;
            }
            if ((rc = open_file(d, json_string_value(val), &fi)) < 0) break;
        }
    }
    if (rc == 0 && d->n_files == 0)
        rc = err_set(OCT_EINVAL, "safetensors %s/model.safetensors.index.json: empty "
                     "weight_map", d->path);
    if (rc == 0) {
        // build the name index now so the weight_map check is O(1) per tensor
        d->n_slots = 16;
        while (d->n_slots < 2 * d->n_tensors + 1) d->n_slots *= 2;
        if (!(d->slots = calloc(d->n_slots, sizeof *d->slots)))
            rc = err_set(OCT_ENOMEM, "safetensors %s: out of memory", d->path);
        for (size_t i = 0; rc == 0 && i < d->n_tensors; i++)
            if (index_probe(d, d->tensors[i].name, (long)i) >= 0)
                rc = err_set(OCT_EINVAL, "safetensors %s: tensor '%s' appears in more than "
                             "one shard", d->path, d->tensors[i].name);
    }
    if (rc == 0) {
        json_object_foreach((json_t *)wm, key, val) {
            long t = index_probe(d, key, -1);
            const char *shard = json_string_value(val);
            if (t < 0 || strcmp(d->files[d->tensor_file[t]].name, shard) != 0) {
                rc = err_set(OCT_EINVAL, "safetensors %s/%s: tensor '%s' listed in the index "
                             "weight_map is missing from this shard", d->path, shard, key);
                break;
            }
        }
    }
    json_decref(index);
    return rc;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// No model.safetensors and no index: every *.safetensors in the directory, sorted.
static int open_glob(struct st_dir *d) {
    DIR *dh = opendir(d->path);
    if (!dh) return err_set(OCT_EIO, "safetensors %s: cannot list: %s", d->path, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(dh))) {
        size_t len = strlen(de->d_name);
        if (len <= 12 || strcmp(de->d_name + len - 12, ".safetensors") != 0 ||
            !plain_name(de->d_name) || !file_exists(d->path, de->d_name))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            char **nn = realloc(names, cap * sizeof *nn);
            if (!nn) { rc = err_set(OCT_ENOMEM, "safetensors %s: out of memory", d->path); break; }
            names = nn;
        }
        if (!(names[n] = strdup(de->d_name))) {
            rc = err_set(OCT_ENOMEM, "safetensors %s: out of memory", d->path);
            break;
        }
        n++;
    }
    closedir(dh);
    if (rc == 0 && n == 0)
        rc = err_set(OCT_EINVAL, "safetensors %s: no model.safetensors, "
                     "model.safetensors.index.json or *.safetensors files", d->path);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    int fi;
    for (size_t i = 0; rc == 0 && i < n; i++) rc = open_file(d, names[i], &fi);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

static int build_index(struct st_dir *d) {
    if (d->slots) return 0;  // open_index built it
    d->n_slots = 16;
    while (d->n_slots < 2 * d->n_tensors + 1) d->n_slots *= 2;
    if (!(d->slots = calloc(d->n_slots, sizeof *d->slots)))
        return err_set(OCT_ENOMEM, "safetensors %s: out of memory", d->path);
    for (size_t i = 0; i < d->n_tensors; i++) {
        long other = index_probe(d, d->tensors[i].name, (long)i);
        if (other >= 0)
            return err_set(OCT_EINVAL, "safetensors %s: tensor '%s' appears in both %s and %s",
                           d->path, d->tensors[i].name, d->files[d->tensor_file[other]].name,
                           d->files[d->tensor_file[i]].name);
    }
    return 0;
}

int st_open(struct st_dir **out, const char *dir) { return st_open_load(out, dir, WEIGHTS_LOAD_MMAP); }

int st_open_load(struct st_dir **out, const char *dir, enum weights_load how) {
    *out = NULL;
    struct st_dir *d = calloc(1, sizeof *d);
    if (!d || !(d->path = strdup(dir))) {
        free(d);
        return err_set(OCT_ENOMEM, "safetensors %s: out of memory", dir);
    }
    d->load = how;
    struct stat st;
    int rc = 0, fi;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
        rc = err_set(OCT_EIO, "safetensors %s: not a directory", dir);
    else if (!file_exists(dir, "config.json"))
        rc = err_set(OCT_EINVAL, "safetensors %s: missing config.json", dir);
    else
        rc = load_json(dir, "config.json", &d->config);
    if (rc == 0) {
        if (file_exists(dir, "model.safetensors.index.json"))
            rc = open_index(d);
        else if (file_exists(dir, "model.safetensors"))
            rc = open_file(d, "model.safetensors", &fi);
        else
            rc = open_glob(d);
    }
    if (rc == 0 && d->n_tensors > INT32_MAX)
        rc = err_set(OCT_EINVAL, "safetensors %s: too many tensors", dir);
    if (rc == 0) rc = build_index(d);
    if (rc < 0) { st_close(d); return rc; }
    *out = d;
    return 0;
}

void st_close(struct st_dir *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n_files; i++) {
        weights_mem_free(&d->files[i].mem);
        free(d->files[i].name);
        free(d->files[i].path);
    }
    free(d->files);
    for (size_t i = 0; i < d->n_tensors; i++) free((char *)d->tensors[i].name);
    free(d->tensors);
    free(d->tensor_file);
    free(d->slots);
    json_decref(d->config);
    free(d->path);
    free(d);
}

const char *st_path(const struct st_dir *d) { return d->path; }

void st_weights_info(const struct st_dir *d, struct weights_load_info *info) {
    for (size_t i = 0; i < d->n_files; i++) weights_load_info_add(info, &d->files[i].mem);
}
const json_t *st_config(const struct st_dir *d) { return d->config; }
int st_n_tensors(const struct st_dir *d) { return (int)d->n_tensors; }

const struct tensor_info *st_tensor(const struct st_dir *d, int i) {
    return i >= 0 && (size_t)i < d->n_tensors ? &d->tensors[i] : NULL;
}

const struct tensor_info *st_find_tensor(const struct st_dir *d, const char *name) {
    if (!d->slots || !name) return NULL;
    long i = index_probe(d, name, -1);
    return i >= 0 ? &d->tensors[i] : NULL;
}
