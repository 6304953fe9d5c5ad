/* The kernels of the configured target, called as SNN_OP(name)(...). The host
 * kernels are always declared: they are the reference for every GPU test. */
#ifndef SNN_OPS_H
#define SNN_OPS_H

#include "snn_config.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OP(name) host_##name
#include "kernels/ops_proto.h"
#undef OP

#ifdef CONFIG_TARGET_CUDA
#define OP(name) cuda_##name
#include "kernels/ops_proto.h"
#undef OP
#define SNN_OP(name) cuda_##name
#else
#define SNN_OP(name) host_##name
#endif

#ifdef __cplusplus
}
#endif
#endif
