/* Signals: SIGINT, SIGTERM and SIGHUP ask the run to stop after the current
 * step (a second one stops it at once); a fatal signal removes the output
 * temporaries before the process dies of it; SIGPIPE becomes EPIPE on the
 * write, which is reported like any failed write. */
#ifndef SNN_SIGNALS_H
#define SNN_SIGNALS_H

void snn_signals_install(void);
/* The stop signal received, or 0. */
int snn_stop_signal(void);
/* "SIGINT", "SIGTERM", ... */
const char *snn_signal_name(int sig);

#endif
