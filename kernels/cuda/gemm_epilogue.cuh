/* The epilogues of the three GEMM roles: each C element, in FP32, goes
 * through one of these functors, in the SIMT and the tensor-core kernels.
 * Each also writes the 16-bit twin of what it writes, where there is one
 * (kernels/cuda/twin.h; NULL otherwise). */
#ifndef SNN_GEMM_EPILOGUE_CUH
#define SNN_GEMM_EPILOGUE_CUH

#include <stddef.h>

#include <cuda_runtime.h>

#include "kernels/cuda/twin.h"

/* Forward: y = v (+ b[n]), then ReLU if relu. */
struct GemmEpiBiasRelu {
    float *y;
    SnnTwin *y16;
    const float *b;
    int ld;
    int relu;
    __device__ __forceinline__ void operator()(int m, int n, float v) const
    {
        if (b)
            v += b[n];
        if (relu)
            v = v < 0.0f ? 0.0f : v; /* as the host: NaN propagates, as torch.relu */
        y[(size_t)m * ld + n] = v;
        snn_twin_store(y16, (size_t)m * ld + n, v);
    }
};

/* Input gradient: dx = v where the layer's input was positive (all if no act). */
struct GemmEpiReluMask {
    float *dx;
    SnnTwin *dx16;
    const float *act;
    int ld;
    __device__ __forceinline__ void operator()(int m, int n, float v) const
    {
        const size_t i = (size_t)m * ld + n;
        if (act && !(act[i] > 0.0f))
            v = 0.0f;
        dx[i] = v;
        snn_twin_store(dx16, i, v);
    }
};

/* Weight gradient v = gW[m][n] -> SGD with momentum: vw = mu*vw + g; w -= lr*vw. */
struct GemmEpiSgd {
    float *w;
    SnnTwin *w16;
    float *vw;
    int ld;
    float lr, mu;
    __device__ __forceinline__ void operator()(int m, int n, float g) const
    {
        const size_t i = (size_t)m * ld + n;
        const float v = mu * vw[i] + g;
        vw[i] = v;
        const float wn = w[i] - lr * v;
        w[i] = wn;
        snn_twin_store(w16, i, wn);
    }
};

#endif
