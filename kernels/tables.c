/* The kernel tables of the backends this build has. */
#include "kernels/ops.h"

const snn_kernels snn_host_kernels = SNN_KERNEL_TABLE(host);
#ifdef CONFIG_TARGET_CUDA
const snn_kernels snn_cuda_kernels = SNN_KERNEL_TABLE(cuda);
#endif
