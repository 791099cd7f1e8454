// Waiting for SIGTERM / SIGINT in a service's main(): a handler writes the signal number to a
// self-pipe (async-signal-safe) and the main thread blocks reading it. A handler rather than
// sigwait, because threads that libraries start before main() would otherwise take the signal
// with its default action.
#ifndef PAGELLM_COMMON_SIGNAL_WAIT_H_
#define PAGELLM_COMMON_SIGNAL_WAIT_H_

#include "absl/status/status.h"

namespace pagellm {

// Installs the handlers. Call once, early in main(). Internal if the pipe cannot be made.
absl::Status InstallTerminationSignals();

// SIGHUP is delivered to WaitForTerminationSignal too (instead of ending the process), for
// services that reload their configuration on it. REQUIRES: InstallTerminationSignals() first.
void InstallReloadSignal();

// Blocks until SIGTERM or SIGINT (or, after InstallReloadSignal, SIGHUP) arrives; returns the
// signal number.
int WaitForTerminationSignal();

}  // namespace pagellm

#endif  // PAGELLM_COMMON_SIGNAL_WAIT_H_
