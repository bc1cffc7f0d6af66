// cuda_prefill_mma.cuh — paged causal prefill attention on tensor cores (mma.sync
// m16n8k16, f32 accumulation, FA2-style online softmax), included by cuda_prefill.cu.
// One CTA = (sequence, tile of 64 query rows, KV head); a query row is one (token, query
// head) pair of the KV head's group, so GQA heads share every K/V load. Each 16-token KV
// block is staged once per CTA in shared memory (cp.async, double-buffered) and each of
// the 4 warps multiplies its 16 rows against it. Operand layout and the head-dim
// permutation are the decode kernel's (cuda_decode_mma.cuh). Attention sinks (attn_args.sinks)
// join each row's denominator at the end as e^(sink − m), m the row's maximum in natural units.
#pragma once

template <int HD, int DT, bool CAP>
__device__ __forceinline__ void prefill_mma_body(bf16 *out, const bf16 *q, const void *kc, const void *vc,
                                                 const int32_t *qstart, const int32_t *pos_arr, const int32_t *btab,
                                                 int max_blocks, int lgr, int n_kv, int G, int window, float scale,
                                                 const float *scales, float softcap, const float *sinks) {
    typedef mma_traits<DT> TR;
    constexpr int ES = DT == DT_BF16 ? 2 : 1;
    constexpr int SEG = HD / 8, NCH = HD / 16, NT = HD / 8;
    constexpr int BLK_BYTES = 16 * HD * ES;
    __shared__ __align__(16) char ring[2][2][BLK_BYTES];  // [stage][K, V]
    const int s = blockIdx.x, tile = blockIdx.y, g = blockIdx.z;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, rr = lane >> 2, c = lane & 3;
    const int t_begin = qstart[s], n_q = qstart[s + 1] - t_begin;
    const int rows_per_cta = 64, tok_per_cta = rows_per_cta / G;
    const int q0 = tile * tok_per_cta;
    if (q0 >= n_q) return;
    const bool fp8 = DT != DT_BF16;
    const float kscale = fp8 ? scales[g] : 1.0f, vscale = fp8 ? scales[KV_MAX_HEADS + g] : 1.0f;
    const score_map<CAP> sc(scale * kscale, softcap, 1.0f);  // raw score → natural units (soft-capped: CAP)
    // this lane's two rows: warp*16 + rr and + 8
    int row_tok[2], row_head[2], row_pos[2], row_lo[2];
    bool row_on[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int row = warp * 16 + rr + 8 * h;
        int qi = q0 + row / G;
        row_on[h] = qi < n_q;
        row_tok[h] = t_begin + (row_on[h] ? qi : q0);
        row_head[h] = row % G;
        row_pos[h] = row_on[h] ? pos_arr[row_tok[h]] : -1;
        row_lo[h] = window > 0 && row_pos[h] - window + 1 > 0 ? row_pos[h] - window + 1 : 0;
    }
    uint32_t qa[NCH][4];
#pragma unroll
    for (int j = 0; j < NCH; j++) {
        int base = j < NCH / 2 ? c * SEG + 4 * j : HD / 2 + c * SEG + 4 * (j - NCH / 2);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const bf16 *qr = q + ((size_t)row_tok[h] * n_kv * G + g * G + row_head[h]) * HD + base;
            float x0 = 0, x1 = 0, x2 = 0, x3 = 0;
            if (row_on[h]) {
                x0 = __bfloat162float(qr[0]);
                x1 = __bfloat162float(qr[1]);
                x2 = __bfloat162float(qr[2]);
                x3 = __bfloat162float(qr[3]);
            }
            qa[j][h] = TR::q2(x0, x1);       // a0 (row rr) / a1 (row rr+8)
            qa[j][2 + h] = TR::q2(x2, x3);   // a2 / a3
        }
    }
    float o[NT][4];
#pragma unroll
    for (int i = 0; i < NT; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    // key range of the whole CTA
    const int p_first = pos_arr[t_begin + q0], p_last = pos_arr[t_begin + min(q0 + tok_per_cta, n_q) - 1];
    const int k_lo = window > 0 && p_first - window + 1 > 0 ? p_first - window + 1 : 0;
    const int blk0 = k_lo / 16, blk1 = p_last / 16 + 1;
    const int32_t *bt = btab + (size_t)s * max_blocks;
    const char *K = (const char *)kc, *V = (const char *)vc;
    auto issue = [&](int blk, int stage) {
        if (blk < blk1) {
            size_t base = kv_sub_block(bt, blk, n_kv, g, lgr) * 16 * HD * ES;  // blk: 16-token sub-block
            for (int o2 = threadIdx.x * 16; o2 < BLK_BYTES; o2 += 128 * 16) {
                cp_async16(&ring[stage][0][o2], K + base + o2);
                cp_async16(&ring[stage][1][o2], V + base + o2);
            }
        }
        cp_async_commit();
    };
    issue(blk0, 0);
    for (int blk = blk0, st = 0; blk < blk1; blk++, st ^= 1) {
        issue(blk + 1, st ^ 1);
        cp_async_wait<1>();
        __syncthreads();
        kv_frags<HD, DT> f;
        f.load(ring[st][0], ring[st][1], rr, c);
        __syncthreads();  // the stage may be refilled once everyone has its words
        float sv[2][4];
        qk_block<HD, DT>(sv, qa, f);
        // online softmax, rows rr (h=0: sv[.][0..1]) and rr+8 (h=1: sv[.][2..3])
        const int kp0 = blk * 16 + 2 * c;
        const int kpos[4] = {kp0, kp0 + 1, kp0 + 8, kp0 + 9};
        uint32_t pa[4];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float x[4] = {sc(sv[0][2 * h]), sc(sv[0][2 * h + 1]), sc(sv[1][2 * h]), sc(sv[1][2 * h + 1])};
            float mx = -INFINITY;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                if (kpos[i] < row_lo[h] || kpos[i] > row_pos[h]) x[i] = -INFINITY;
                mx = fmaxf(mx, x[i]);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
            float mn = fmaxf(m[h], mx);
            float alpha = mn == -INFINITY ? 1.0f : __expf(m[h] - mn);
            float p[4];
#pragma unroll
            for (int i = 0; i < 4; i++) p[i] = mn == -INFINITY ? 0.0f : __expf(x[i] - mn);
            l[h] = l[h] * alpha + p[0] + p[1] + p[2] + p[3];
            m[h] = mn;
#pragma unroll
            for (int i = 0; i < NT; i++) { o[i][2 * h] *= alpha; o[i][2 * h + 1] *= alpha; }
            pa[h] = TR::q2(p[0], p[1]);       // a0 / a1: keys 2c, 2c+1
            pa[2 + h] = TR::q2(p[2], p[3]);   // a2 / a3: keys 2c+8, 2c+9
        }
        pv_block<HD, DT>(o, pa, f);
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffff, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffff, l[h], 2);
        if (!row_on[h]) continue;
        if (sinks) l[h] += __expf(sinks[g * G + row_head[h]] - m[h]);
        bf16 *orow = out + ((size_t)row_tok[h] * n_kv * G + g * G + row_head[h]) * HD;
        float f = l[h] > 0 ? vscale / l[h] : 0.0f;
#pragma unroll
        for (int tt = 0; tt < NT; tt++) {
            orow[(2 * c) * NT + tt] = __float2bfloat16_rn(o[tt][2 * h] * f);
            orow[(2 * c + 1) * NT + tt] = __float2bfloat16_rn(o[tt][2 * h + 1] * f);
        }
    }
}

// CAP: soft-capped scores (attn_args.softcap > 0).
template <int HD, int DT, bool CAP = false>
__global__ void __launch_bounds__(128) k_prefill_mma(const __grid_constant__ attn_args a) {
    prefill_mma_body<HD, DT, CAP>(a.out, a.q, a.kc, a.vc, a.qstart, a.pos, a.btab, a.max_blocks, a.lgr, a.n_kv, a.G,
                                  a.window, a.scale, a.scales, a.softcap, a.sinks);
}
