// test_kquant_repack.c — the Q4_K rows the CPU backend repacks in groups of 8 at load (cpu_kq8.c): the
// group kernel gives the bits of the plain kernel (kq_dot_rows, every compiled path) for random rows, for
// the extreme values (every nibble 15, every scale and min 63, x at ±127), and for several column counts;
// the backend's decode matmul of a weight whose row count is not a multiple of 8 (repacked groups, then
// the plain rows) equals the plain weight's bit for bit, and weight_release frees the copy (ASan builds);
// a repack that would not fit the memory left is skipped, the weight decoding the same bits in place.
#include <stdint.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/weight.h"
#include "../../src/backend/cpu/cpu.h"
#include "../../src/backend/cpu/cpu_quant.h"
#include "../../src/base/half.h"
#include "../test.h"

static uint32_t rng = 4242;
static uint32_t next(void) { return rng = rng * 1664525u + 1013904223u; }
static float frand(void) { return (float)(next() >> 8) / (float)(1u << 23) - 1.0f; } // [-1, 1)

static void put_f16(uint8_t *p, float v) {
    uint16_t h = f32_to_f16(v);
    memcpy(p, &h, 2);
}

// n_blocks random Q4_K super-blocks; extreme: every quant byte 0xFF and every scale / min 63.
static void q4k_blocks(uint8_t *p, int64_t n_blocks, int extreme) {
    for (int64_t b = 0; b < n_blocks; b++, p += 144) {
        for (int j = 0; j < 144; j++) p[j] = extreme ? 0xFF : (uint8_t)next();
        put_f16(p, ldexpf(1.0f + frand() * 0.5f, -7 - (int)(next() % 3)));
        put_f16(p + 2, ldexpf(1.0f + frand() * 0.5f, -8 - (int)(next() % 3)));
    }
}

static const int COLS[] = {256, 512, 768, 2048};
static const int ROWS[] = {8, 13, 24, 67};

#include "repack_check.h"

static const struct repack_kind KIND = {DT_Q4_K, kq8_bytes, kq8_group_bytes, kq8_repack, kq8_dot_group};

TEST(group_kernel_equals_plain) {
    if (!kq8_built()) {
        fprintf(stderr, "  (no AVX-512 VNNI/VBMI in this build: no repack, nothing to compare)\n");
        CHECK_EQ_INT(kq8_bytes(64, 2048), 0);
        return;
    }
    for (int ci = 0; ci < 4; ci++)
        for (int ri = 0; ri < 4; ri++)
            for (int mode = 0; mode < 3; mode++) // random; extreme weights with x at +127; with x at -127
                check_group_case(&KIND, q4k_blocks, ROWS[ri], COLS[ci], mode > 0, mode, mode);
}

TEST(backend_decode_equals_plain) {
    check_matmul_equals_plain(DT_Q4_K, q4k_blocks, kq8_built(), COLS, ROWS, 3);
}

TEST(repack_only_within_the_memory_left) {
    check_repack_within_room(DT_Q4_K, q4k_blocks, 1, 512, kq8_built(), kq8_bytes(16, 512));
}

int main(void) {
    RUN(group_kernel_equals_plain);
    RUN(backend_decode_equals_plain);
    RUN(repack_only_within_the_memory_left);
    return test_summary("kquant_repack");
}
