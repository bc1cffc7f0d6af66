// test_weights_mem.c — unit tests for src/model/weights_mem.c and the load modes it gives gguf.c,
// safetensors.c, model_load_opts and the CLI: the file's bytes and every tensor identical mapped and read
// (stories260K, a safetensors fixture), the read buffer 2 MiB-aligned, read-only and unmapped on free,
// logits identical in both modes, short reads and impossible sizes refused by name with nothing left
// mapped, --weights-load / --mmap / --no-mmap parsed (a bad value refused) and auto resolved per device.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/base/check.h"
#include "../../src/engine/runner.h"
#include "../../src/model/gguf.h"
#include "../../src/model/model.h"
#include "../../src/model/safetensors.h"
#include "../../src/model/weights_mem.h"
#include "../../src/tools/cli.h"
#include "../test.h"

#define HF_FIXTURE "tests/data/hf/qwen2"

// True while [p, p + 4096) is mapped (mincore fails with ENOMEM on an unmapped page).
static bool is_mapped(const void *p) {
    unsigned char v;
    return mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 4096, &v) == 0;
}

// Mappings of this process now (lines of /proc/self/maps).
static int n_mappings(void) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

static void check_same_tensor(const struct tensor_info *a, const struct tensor_info *b) {
    CHECK(a && b);
    if (!a || !b) return;
    CHECK_MSG(!strcmp(a->name, b->name), "%s vs %s", a->name, b->name);
    CHECK_EQ_INT(a->dtype, b->dtype);
    CHECK_EQ_INT(a->n_dims, b->n_dims);
    for (int d = 0; d < a->n_dims; d++) CHECK_EQ_INT(a->ne[d], b->ne[d]);
    CHECK_EQ_INT(a->n_bytes, b->n_bytes);
    CHECK(a->data != b->data);
    CHECK_MSG(!memcmp(a->data, b->data, a->n_bytes), "tensor %s differs", a->name);
}

TEST(gguf_read_equals_mmap) {
    struct gguf *gm = NULL, *gr = NULL;
    CHECK_OK(gguf_open_load(&gm, SHARED_MODEL("stories260K.gguf"), WEIGHTS_LOAD_MMAP));
    CHECK_OK(gguf_open_load(&gr, SHARED_MODEL("stories260K.gguf"), WEIGHTS_LOAD_READ));
    if (!gm || !gr) { gguf_close(gm); gguf_close(gr); return; }
    const struct weights_mem *wm = gguf_weights_mem(gm), *wr = gguf_weights_mem(gr);
    CHECK_EQ_INT(wm->how, WEIGHTS_LOAD_MMAP);
    CHECK_EQ_INT(wr->how, WEIGHTS_LOAD_READ);
    CHECK_EQ_INT(wm->bytes, wr->bytes);
    CHECK(wr->bytes > 1000000);
    CHECK(!memcmp(wm->base, wr->base, wm->bytes));            // the whole file, byte for byte
    CHECK_EQ_INT((uintptr_t)wr->base % ((uintptr_t)2 << 20), 0);  // 2 MiB-aligned
    CHECK_EQ_INT(wr->region_bytes % ((size_t)2 << 20), 0);
    CHECK(weights_mem_huge_bytes(wr) <= wr->bytes);
    CHECK_EQ_INT(weights_mem_huge_bytes(wm), 0);
    CHECK_EQ_INT(gguf_n_tensors(gm), gguf_n_tensors(gr));
    for (int i = 0; i < gguf_n_tensors(gm); i++) check_same_tensor(gguf_tensor(gm, i), gguf_tensor(gr, i));
    const char *s1, *s2;
    size_t n1, n2;
    CHECK_OK(gguf_get_str(gm, "general.architecture", &s1, &n1));
    CHECK_OK(gguf_get_str(gr, "general.architecture", &s2, &n2));
    CHECK(n1 == n2 && !memcmp(s1, s2, n1));
    const void *base = wr->base;
    CHECK(is_mapped(base));
    gguf_close(gr);
    CHECK(!is_mapped(base));  // the buffer is released, not leaked
    gguf_close(gm);
}

// The read buffer is read-only like the mapping: a write faults (checked in a child process).
TEST(read_buffer_is_read_only) {
    int fd = open(SHARED_MODEL("stories260K.gguf"), O_RDONLY);
    CHECK(fd >= 0);
    if (fd < 0) return;
    struct weights_mem w;
    CHECK_OK(weights_mem_load(&w, fd, 4096, WEIGHTS_LOAD_READ, "test"));
    close(fd);
    CHECK(!memcmp(w.base, "GGUF", 4));
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);  // die by the signal (a sanitizer's handler would report and exit instead)
        signal(SIGBUS, SIG_DFL);
        ((volatile uint8_t *)w.base)[0] = 0;
        _exit(0);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_MSG(WIFSIGNALED(status), "a write to the read buffer did not fault");
    weights_mem_free(&w);
}

TEST(safetensors_read_equals_mmap) {
    struct st_dir *dm = NULL, *dr = NULL;
    CHECK_OK(st_open_load(&dm, HF_FIXTURE, WEIGHTS_LOAD_MMAP));
    CHECK_OK(st_open_load(&dr, HF_FIXTURE, WEIGHTS_LOAD_READ));
    if (!dm || !dr) { st_close(dm); st_close(dr); return; }
    CHECK_EQ_INT(st_n_tensors(dm), st_n_tensors(dr));
    CHECK(st_n_tensors(dm) > 5);
    for (int i = 0; i < st_n_tensors(dm); i++) check_same_tensor(st_tensor(dm, i), st_tensor(dr, i));
    struct weights_load_info im = {0}, ir = {0};
    st_weights_info(dm, &im);
    st_weights_info(dr, &ir);
    CHECK_EQ_INT(im.n_files, 1);
    CHECK_EQ_INT(ir.n_files, 1);
    CHECK_EQ_INT(im.how, WEIGHTS_LOAD_MMAP);
    CHECK_EQ_INT(ir.how, WEIGHTS_LOAD_READ);
    CHECK(im.bytes == ir.bytes && ir.bytes > 0);
    char label[256];
    CHECK(strstr(weights_load_info_label(&im, label, sizeof label), "mapped from the file") != NULL);
    CHECK(strstr(weights_load_info_label(&ir, label, sizeof label), "read into memory") != NULL);
    st_close(dm);
    st_close(dr);
}

// Teacher-forced logits of 24 tokens on the CPU.
static int logits_of(struct model *m, float *out) {
    struct runner_options o;
    runner_options_default(&o);
    snprintf(o.device, sizeof o.device, "cpu");
    o.max_ctx = 32;
    struct runner r;
    TRY(runner_init(&r, m, &o));
    int32_t ids[24];
    for (int i = 0; i < 24; i++) ids[i] = i == 0 ? 1 : (int32_t)(3 + (i * 37) % (m->cfg.n_vocab - 3));
    int rc = runner_feed(&r, ids, 24, true, out);
    runner_free(&r);
    return rc;
}

static void check_same_logits(const char *path) {
    struct model *mm = NULL, *mr = NULL;
    const struct model_load_options om = {NULL, WEIGHTS_LOAD_MMAP}, or = {NULL, WEIGHTS_LOAD_READ};
    CHECK_OK(model_load_opts(&mm, path, &om));
    CHECK_OK(model_load_opts(&mr, path, &or));
    if (!mm || !mr) { model_free(mm); model_free(mr); return; }
    struct weights_load_info im, ir;
    model_weights_load_info(mm, &im);
    model_weights_load_info(mr, &ir);
    CHECK(im.how == WEIGHTS_LOAD_MMAP && ir.how == WEIGHTS_LOAD_READ && im.bytes == ir.bytes);
    CHECK_EQ_INT(mm->weight_bytes, mr->weight_bytes);
    size_t n = (size_t)24 * mm->cfg.n_vocab;
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    CHECK_OK(logits_of(mm, a));
    CHECK_OK(logits_of(mr, b));
    CHECK_MSG(!memcmp(a, b, n * sizeof(float)), "%s: logits differ between mmap and read", path);
    free(a);
    free(b);
    model_free(mm);
    model_free(mr);
}

TEST(logits_identical_gguf) { check_same_logits(SHARED_MODEL("stories260K.gguf")); }
TEST(logits_identical_safetensors) { check_same_logits(HF_FIXTURE); }

TEST(dummy_model_has_no_files) {
    struct model *m = NULL;
    const struct model_load_options o = {NULL, WEIGHTS_LOAD_READ};
    CHECK_OK(model_load_opts(&m, "dummy:tiny", &o));
    if (!m) return;
    struct weights_load_info info;
    model_weights_load_info(m, &info);
    CHECK_EQ_INT(info.n_files, 0);
    model_free(m);
}

// A file shorter than the size asked for: a named short read, nothing left mapped.
TEST(short_read_refused) {
    char path[] = "/tmp/octet_wmXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(write(fd, "0123456789", 10) == 10);
    int before = n_mappings();
    struct weights_mem w;
    int rc = weights_mem_load(&w, fd, 5000, WEIGHTS_LOAD_READ, "gguf x.gguf");
    CHECK_EQ_INT(rc, OCT_EIO);
    CHECK_MSG(strstr(err_msg(), "gguf x.gguf: short read") && strstr(err_msg(), "byte 10 of the 5000"), "%s",
              err_msg());
    CHECK(w.base == NULL && w.region == NULL);
    CHECK_EQ_INT(n_mappings(), before);
    close(fd);
    unlink(path);
}

// More memory than the address space holds: OCT_ENOMEM naming the size and --mmap.
TEST(no_memory_refused) {
    int fd = open(SHARED_MODEL("stories260K.gguf"), O_RDONLY);
    CHECK(fd >= 0);
    if (fd < 0) return;
    int before = n_mappings();
    struct weights_mem w;
    int rc = weights_mem_load(&w, fd, (size_t)1 << 62, WEIGHTS_LOAD_READ, "gguf big.gguf");
    CHECK_EQ_INT(rc, OCT_ENOMEM);
    CHECK_MSG(strstr(err_msg(), "gguf big.gguf: cannot allocate") && strstr(err_msg(), "--mmap"), "%s", err_msg());
    CHECK(w.base == NULL);
    CHECK_EQ_INT(n_mappings(), before);
    rc = weights_mem_load(&w, fd, SIZE_MAX - 4096, WEIGHTS_LOAD_READ, "gguf big.gguf");  // rounding overflows
    CHECK_EQ_INT(rc, OCT_ENOMEM);
    close(fd);
}

// Parses one model flag (argv after the command) into a; returns cli_parse_model_flag's result.
static int parse_flags(struct cli_model_args *a, int argc, char **argv) {
    int rc = 0;
    for (int i = 0; i < argc && rc >= 0; i++) rc = cli_parse_model_flag(a, argc, argv, &i);
    return rc;
}

TEST(flag_parses) {
    struct cli_model_args a;
    cli_model_args_default(&a);
    CHECK_EQ_INT(a.weights, WEIGHTS_LOAD_AUTO);
    char *v1[] = {"--weights-load", "read"};
    CHECK_EQ_INT(parse_flags(&a, 2, v1), 1);
    CHECK_EQ_INT(a.weights, WEIGHTS_LOAD_READ);
    char *v2[] = {"--weights-load", "mmap"};
    CHECK_EQ_INT(parse_flags(&a, 2, v2), 1);
    CHECK_EQ_INT(a.weights, WEIGHTS_LOAD_MMAP);
    char *v3[] = {"--no-mmap"};
    CHECK_EQ_INT(parse_flags(&a, 1, v3), 1);
    CHECK_EQ_INT(a.weights, WEIGHTS_LOAD_READ);
    char *v4[] = {"--mmap"};
    CHECK_EQ_INT(parse_flags(&a, 1, v4), 1);
    CHECK_EQ_INT(a.weights, WEIGHTS_LOAD_MMAP);
    char *v5[] = {"--weights-load", "auto"};
    CHECK_EQ_INT(parse_flags(&a, 2, v5), 1);
    CHECK_EQ_INT(a.weights, WEIGHTS_LOAD_AUTO);
    char *bad[] = {"--weights-load", "hugepages"};
    CHECK(parse_flags(&a, 2, bad) < 0);
    CHECK_MSG(strstr(err_msg(), "--weights-load: 'hugepages'") && strstr(err_msg(), "auto, mmap or read"), "%s",
              err_msg());
    CHECK_EQ_INT(a.weights, WEIGHTS_LOAD_AUTO);
    char *missing[] = {"--weights-load"};
    CHECK(parse_flags(&a, 1, missing) < 0);
}

TEST(auto_resolves_per_device) {
    struct cli_model_args a;
    cli_model_args_default(&a);
    snprintf(a.ro.device, sizeof a.ro.device, "cpu");
    CHECK_EQ_INT(cli_weights_load(&a), WEIGHTS_LOAD_READ);
    snprintf(a.ro.device, sizeof a.ro.device, "cuda");
    CHECK_EQ_INT(cli_weights_load(&a), WEIGHTS_LOAD_MMAP);
    a.weights = WEIGHTS_LOAD_READ;  // an explicit choice wins on either device
    CHECK_EQ_INT(cli_weights_load(&a), WEIGHTS_LOAD_READ);
    snprintf(a.ro.device, sizeof a.ro.device, "cpu");
    a.weights = WEIGHTS_LOAD_MMAP;
    CHECK_EQ_INT(cli_weights_load(&a), WEIGHTS_LOAD_MMAP);
    CHECK_EQ_INT(weights_load_resolve(WEIGHTS_LOAD_AUTO, false), WEIGHTS_LOAD_READ);
    CHECK_EQ_INT(weights_load_resolve(WEIGHTS_LOAD_AUTO, true), WEIGHTS_LOAD_MMAP);
    enum weights_load w;
    CHECK_OK(weights_load_parse("no-mmap", &w));
    CHECK_EQ_INT(w, WEIGHTS_LOAD_READ);
    CHECK(!strcmp(weights_load_name(WEIGHTS_LOAD_READ), "read"));
}

int main(void) {
    RUN(gguf_read_equals_mmap);
    RUN(read_buffer_is_read_only);
    RUN(safetensors_read_equals_mmap);
    RUN(logits_identical_gguf);
    RUN(logits_identical_safetensors);
    RUN(dummy_model_has_no_files);
    RUN(short_read_refused);
    RUN(no_memory_refused);
    RUN(flag_parses);
    RUN(auto_resolves_per_device);
    return test_summary("weights_mem");
}
