/* The runtime on the CPU: the "device" is host memory, steps run directly. */
#include "arch/runtime.h"
#include "snn_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef CONFIG_HOST_OPENMP
#include <omp.h>
#endif

#include "snn_check.h"

struct snn_mark {
    struct timespec t;
};

static void cpu_model_name(char *buf, size_t len)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(buf, len, "CPU");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        char *colon = strchr(line, ':');
        if (colon && strncmp(line, "model name", 10) == 0) {
            snprintf(buf, len, "%s", colon + 2);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    }
    fclose(f);
}

/* Memory the kernel could give us without swapping (MemAvailable counts the
 * page cache it can drop, which MemFree does not); 0 if unknown. */
static size_t available_bytes(void)
{
    char line[256];
    unsigned long long kib = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    fclose(f);
    return (size_t)kib * 1024;
}

void snn_rt_init(snn_device_info *info, size_t plan_bytes)
{
    memset(info, 0, sizeof(*info));
    cpu_model_name(info->name, sizeof(info->name));
#ifdef CONFIG_HOST_OPENMP
    info->units = omp_get_max_threads();
#else
    info->units = 1;
#endif
    long total = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    info->free_bytes = available_bytes();
    info->total_bytes = total > 0 ? (size_t)total * page : 0;
    if (info->free_bytes && plan_bytes > info->free_bytes)
        snn_die("the memory plan needs %zu bytes but only %zu are available: lower the hidden widths "
                "(CONFIG_NN_HIDDEN_WIDTH, _WIDTH_k), "
                "CONFIG_NN_HIDDEN_LAYERS, CONFIG_TRAIN_BATCH_SIZE or CONFIG_EVAL_BATCH_SIZE (make menuconfig)",
                plan_bytes, info->free_bytes);
}

void *snn_rt_alloc(size_t bytes)
{
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p)
        snn_die("cannot allocate the %zu-byte arena: choose a smaller model or batch (make menuconfig)", bytes);
    return p;
}

void snn_rt_free(void *p) { free(p); }
void snn_rt_upload(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void snn_rt_download(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
void snn_rt_sync(void) {}
void snn_rt_run_step(void (*step)(void *ctx), void *ctx) { step(ctx); }
void snn_rt_prepare_step(void (*step)(void *ctx), void *ctx) { (void)step, (void)ctx; }
void snn_rt_release_steps(void) {}

snn_mark *snn_rt_mark_new(void) { return snn_xmalloc(sizeof(snn_mark), "timer"); }
void snn_rt_mark(snn_mark *m) { clock_gettime(CLOCK_MONOTONIC, &m->t); }
float snn_rt_elapsed_ms(snn_mark *from, snn_mark *to)
{
    return (float)((to->t.tv_sec - from->t.tv_sec) * 1e3 + (to->t.tv_nsec - from->t.tv_nsec) * 1e-6);
}
void snn_rt_mark_free(snn_mark *m) { free(m); }
int snn_rt_gpu_present(void) { return 0; }
