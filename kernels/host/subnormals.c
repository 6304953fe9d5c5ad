/* The host engine computes with subnormal floats flushed to zero, inputs and results (x86's DAZ and FTZ,
 * AArch64's FZ), as PyTorch's set_flush_denormal(True) does. Without it a run whose optimizer state decays
 * towards zero (a collapsed run's momentum: three quarters of it subnormal) takes a microcode assist on
 * every operation, 40 times slower. Set before main, in the thread that starts the others: OpenMP's
 * threads inherit the floating-point environment of the thread that creates them. */
#include <stdint.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

__attribute__((constructor)) static void flush_subnormals(void)
{
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ (bit 15) and DAZ (bit 6) */
#elif defined(__aarch64__)
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr | (1u << 24))); /* FZ */
#endif
}
