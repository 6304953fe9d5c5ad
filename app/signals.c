#include "app/signals.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "app/outfile.h"
#include "snn_check.h"

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
    if (stop_signal) { /* asked twice: no waiting for the step */
        snn_out_remove_temporaries();
        _exit(128 + sig);
    }
    stop_signal = sig;
}

static void on_fatal(int sig)
{
    snn_out_remove_temporaries();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void handle(int sig, void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART; /* a write under way goes on, rather than failing with EINTR */
    sigemptyset(&sa.sa_mask);
    SNN_CHECK_SYS(sigaction(sig, &sa, NULL) == 0, "installing a signal handler");
}

void snn_signals_install(void)
{
    static const int stops[] = {SIGINT, SIGTERM, SIGHUP}, fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (unsigned i = 0; i < sizeof(stops) / sizeof(stops[0]); i++)
        handle(stops[i], on_stop);
    for (unsigned i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
        handle(fatal[i], on_fatal);
    handle(SIGPIPE, SIG_IGN);
}

int snn_stop_signal(void) { return stop_signal; }

const char *snn_signal_name(int sig)
{
    switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
    }
}
