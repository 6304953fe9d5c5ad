/* The layered step's second lane (arch/cuda/beside.h): a stream, the events that fork it from the engine's
 * stream and join it back, and which share of the SMs a launch has. */
#include <cuda_runtime.h>

#include "arch/cuda/beside.h"
#include "arch/cuda/check.h"
#include "arch/cuda/stream.h"
#include "snn_check.h"
#include "snn_config.h"

static cudaStream_t g_side;
static cudaEvent_t g_forked, g_joined;
/* IDLE: the second stream's work, if any, joined; ON_SIDE: launches go on it; BESIDE: they go on the
 * engine's stream while it runs. */
static enum { IDLE, ON_SIDE, BESIDE } g_lane;

void snn_beside_init(int sms)
{
    if (CONFIG_STEP_BESIDE_SMS >= sms)
        snn_die(
            "STEP_BESIDE_SMS is %d, and this GPU has %d multiprocessors: a weight step would have none of "
            "its own\n  hint: make menuconfig, and set STEP_BESIDE_SMS below %d, or turn STEP_BESIDE off",
            CONFIG_STEP_BESIDE_SMS, sms, sms);
    if (!g_side) {
        CUDA_CHECK(cudaStreamCreateWithFlags(&g_side, cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&g_forked, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&g_joined, cudaEventDisableTiming));
    }
}

void snn_beside_begin(void)
{
    if (g_lane == ON_SIDE)
        snn_die("internal error: snn_beside_begin twice without snn_beside_end");
    snn_beside_join();
    CUDA_CHECK(cudaEventRecord(g_forked, snn_stream()));
    CUDA_CHECK(cudaStreamWaitEvent(g_side, g_forked, 0));
    snn_stream_redirect(g_side);
    g_lane = ON_SIDE;
}

void snn_beside_end(void)
{
    if (g_lane != ON_SIDE)
        snn_die("internal error: snn_beside_end without snn_beside_begin");
    snn_stream_redirect(0);
    g_lane = BESIDE;
}

void snn_beside_join(void)
{
    if (g_lane == ON_SIDE)
        snn_die("internal error: snn_beside_join between snn_beside_begin and snn_beside_end");
    if (g_lane == BESIDE) {
        CUDA_CHECK(cudaEventRecord(g_joined, g_side));
        CUDA_CHECK(cudaStreamWaitEvent(snn_stream(), g_joined, 0));
        g_lane = IDLE;
    }
}

int snn_beside_on_side(void) { return g_lane == ON_SIDE; }

int snn_beside_sms(int all)
{
    return g_lane == IDLE ? all : g_lane == ON_SIDE ? all - CONFIG_STEP_BESIDE_SMS : CONFIG_STEP_BESIDE_SMS;
}
