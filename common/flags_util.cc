#include "common/flags_util.h"

#include <algorithm>

#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"

namespace pagellm::cli {

std::vector<std::string> NormalizeArgs(int argc, char** argv,
                                       const std::vector<std::string>& repeated,
                                       std::vector<std::vector<std::string>>* collected) {
  collected->assign(repeated.size(), {});
  std::vector<std::string> out;
  bool only_positional = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i == 0 || only_positional || a.size() < 3 || a.rfind("--", 0) != 0) {
      out.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      out.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::replace(name.begin(), name.end(), '-', '_');
    // vLLM spells a false boolean --no-foo; Abseil spells it --nofoo.
    if (name.rfind("no_", 0) == 0 && eq == std::string::npos) name = "no" + name.substr(3);
    auto it = std::find(repeated.begin(), repeated.end(), name);
    if (it != repeated.end()) {
      std::string value;
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
      } else if (i + 1 < argc) {
        value = argv[++i];
      }
      (*collected)[it - repeated.begin()].push_back(value);
      continue;
    }
    out.push_back("--" + name + (eq == std::string::npos ? "" : a.substr(eq)));
  }
  return out;
}

namespace {

// The flags the last ParseFlags saw (FlagGiven).
std::vector<std::string>& GivenFlags() {
  static auto* given = new std::vector<std::string>();
  return *given;
}

}  // namespace

bool FlagGiven(std::string_view name) {
  const std::vector<std::string>& given = GivenFlags();
  return std::find(given.begin(), given.end(), name) != given.end();
}

std::vector<std::vector<std::string>> ParseFlags(int argc, char** argv,
                                                 const std::vector<std::string>& repeated) {
  std::vector<std::vector<std::string>> collected;
  std::vector<std::string> args = NormalizeArgs(argc, argv, repeated, &collected);
  std::vector<std::string>& given = GivenFlags();
  given.clear();
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) continue;
    std::string name =
        a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2);
    given.push_back(name);
    if (name.rfind("no", 0) == 0) given.push_back(name.substr(2));  // --noflag
  }
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  absl::ParseCommandLine(static_cast<int>(cargs.size()), cargs.data());
  // Debian builds abseil without NDEBUG, so every Mutex lock and destruction would update a
  // process-wide lock graph (a global lock and a hash lookup: 10% of the router's CPU under
  // load). Programs turn it off; tests keep it on, where it finds lock-order bugs.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return collected;
}

}  // namespace pagellm::cli
