// test_kq8_0_repack.c — the Q8_0 rows the CPU backend repacks in groups of 8 at load (cpu_kq8_0x8.c): the
// group kernel gives the bits of the plain kernel (qx_dot_rows_path, every compiled path) for random rows, for
// the extreme values (every quant −128, 127 or −127, x at ±127), and for several column counts (an odd block
// count among them); the backend's matmul of a weight whose row count is not a multiple of 8 (repacked groups,
// then the plain rows) equals the plain weight's bit for bit for 1 to 5 tokens, and weight_release frees the
// copy (ASan builds); a copy that would not fit the memory left is skipped, the weight decoding the same bits.
#include <stdint.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/weight.h"
#include "../../src/backend/cpu/cpu.h"
#include "../../src/backend/cpu/cpu_quant.h"
#include "../../src/base/half.h"
#include "../test.h"

static uint32_t rng = 8080;
static uint32_t next(void) { return rng = rng * 1664525u + 1013904223u; }
static float frand(void) { return (float)(next() >> 8) / (float)(1u << 23) - 1.0f; } // [-1, 1)

// n_blocks Q8_0 blocks: mode 0 random; 1 every quant 127; 2 every quant −128; 3 every quant −127.
static void q80_blocks(uint8_t *p, int64_t n_blocks, int mode) {
    for (int64_t b = 0; b < n_blocks; b++, p += 34) {
        for (int j = 2; j < 34; j++) p[j] = mode == 0 ? (uint8_t)next() : mode == 1 ? 127 : mode == 2 ? 0x80 : 0x81;
        uint16_t h = f32_to_f16(ldexpf(frand() * 1.5f, -9 - (int)(next() % 3)));
        memcpy(p, &h, 2);
    }
}

static const int COLS[] = {32, 96, 512, 2080};
static const int ROWS[] = {8, 13, 24, 67};

#include "repack_check.h"

static const struct repack_kind KIND = {DT_Q8_0, kq80x8_bytes, kq80x8_group_bytes, kq80x8_repack, kq80x8_dot_group};

TEST(group_kernel_equals_plain) {
    if (!kq80x8_built()) {
        fprintf(stderr, "  (no AVX-512 VNNI in this build: no repack, nothing to compare)\n");
        CHECK_EQ_INT(kq80x8_bytes(64, 2048), 0);
        return;
    }
    for (int ci = 0; ci < 4; ci++)
        for (int ri = 0; ri < 4; ri++)
            for (int mode = 0; mode < 8; mode++) // weights mode % 4; x random, or every x at +127 or −127
                check_group_case(&KIND, q80_blocks, ROWS[ri], COLS[ci], mode % 4,
                                 mode < 4 ? (mode == 0 ? 0 : 1) : 2, mode);
}

TEST(backend_matmul_equals_plain) {
    check_matmul_equals_plain(DT_Q8_0, q80_blocks, kq80x8_built(), COLS, ROWS, 5);
}

TEST(repack_only_within_the_memory_left) {
    check_repack_within_room(DT_Q8_0, q80_blocks, 0, 512, kq80x8_built(), kq80x8_bytes(16, 512));
}

int main(void) {
    RUN(group_kernel_equals_plain);
    RUN(backend_matmul_equals_plain);
    RUN(repack_only_within_the_memory_left);
    return test_summary("kq8_0_repack");
}
