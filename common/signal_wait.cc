#include "common/signal_wait.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>

namespace pagellm {
namespace {

int g_signal_pipe[2] = {-1, -1};

extern "C" void OnTerminationSignal(int sig) {
  const char c = static_cast<char>(sig);
  const int saved = errno;
  [[maybe_unused]] ssize_t n = write(g_signal_pipe[1], &c, 1);
  errno = saved;
}

}  // namespace

absl::Status InstallTerminationSignals() {
  if (pipe2(g_signal_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(std::string("pipe2: ") + std::strerror(errno));
  }
  struct sigaction action = {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  return absl::OkStatus();
}

void InstallReloadSignal() {
  struct sigaction action = {};
  action.sa_handler = OnTerminationSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGHUP, &action, nullptr);
}

int WaitForTerminationSignal() {
  char c = 0;
  while (read(g_signal_pipe[0], &c, 1) < 0 && errno == EINTR) {
  }
  return c;
}

}  // namespace pagellm
