#include "common/logging.h"

#include "spdlog/sinks/stdout_color_sinks.h"

namespace pagellm {

void InitLogging(const char* level) {
  auto logger = spdlog::stderr_color_mt("pagellm");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));
}

}  // namespace pagellm
