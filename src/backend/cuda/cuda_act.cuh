// cuda_act.cuh — the FFN activations' arithmetic (SwiGLU's SiLU, GeGLU's tanh and erf GELU) as one
// device function, shared by the act_mul ops (ew_act_mul, cuda_elementwise.cuh) and the FP8 products'
// SwiGLU epilogue (cuda_fp8w_act.cuh), so both round the same f32 values.
#pragma once

#include "../backend.h"

// act(x) for ACT an enum ffn_act, as the CPU computes it.
template <int ACT> __device__ __forceinline__ float ffn_act(float x) {
    if constexpr (ACT == FFN_ACT_GELU_TANH)
        return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));  // sqrt(2/pi)
    else if constexpr (ACT == FFN_ACT_GELU) return 0.5f * x * (1.0f + erff(x * 0.7071067811865476f));
    else return x / (1.0f + expf(-x));
}
