// pagellm: the command-line entry point.
//   pagellm generate --model PATH --prompt TEXT [options]   offline generation (see --help)
//   pagellm bench --server HOST:PORT [options]              serving benchmark (see --help)
#include <cstdio>
#include <cstring>
#include <string>

namespace pagellm::cli {
int GenerateMain(int argc, char** argv);
int BenchMain(int argc, char** argv);
}  // namespace pagellm::cli

int main(int argc, char** argv) {
  const char* usage =
      "usage: pagellm <command> [flags]\n"
      "commands:\n"
      "  generate   generate completions for prompts with a local model (pagellm generate --help)\n"
      "  bench      serving benchmark against a router or worker (pagellm bench --help)\n";
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::fputs(usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "generate") == 0) {
    return pagellm::cli::GenerateMain(argc - 1, argv + 1);
  }
  if (std::strcmp(argv[1], "bench") == 0) {
    return pagellm::cli::BenchMain(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "pagellm: unknown command '%s'\n%s", argv[1], usage);
  return 2;
}
