// `pagellm bench --server HOST:PORT`: a serving benchmark against a pagellm router
// (pagellm.v1.Generation) or straight against one worker (pagellm.v1.Worker), with the semantics
// and report of vLLM's benchmarks/benchmark_serving.py. See tools/bench/serving_bench.h.
//
// Flags shared with `pagellm generate` (one absl flag registry per binary): --server, --seed,
// --temperature (the bench's default is 0 unless given), and the engine's --max-model-len
// (here: a cap on prompt + output, 0 = the server's).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/flags_util.h"
#include "tools/bench/bench_dataset.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/bench_target.h"
#include "tools/bench/serving_bench.h"

ABSL_DECLARE_FLAG(std::string, server);            // tools/cli/generate_command.cc
ABSL_DECLARE_FLAG(std::optional<uint64_t>, seed);  // tools/cli/generate_command.cc
ABSL_DECLARE_FLAG(double, temperature);            // tools/cli/generate_command.cc
ABSL_DECLARE_FLAG(int64_t, max_model_len);         // worker/flags/engine_flags.cc

ABSL_FLAG(std::string, endpoint, "router",
          "router: pagellm.v1.Generation with token-id prompts; worker: pagellm.v1.Worker");
ABSL_FLAG(int32_t, num_prompts, 200, "requests to send");
ABSL_FLAG(double, request_rate, std::numeric_limits<double>::infinity(),
          "requests/s (inf: all at once)");
ABSL_FLAG(double, burstiness, 1.0, "gamma shape of the arrival gaps (1: Poisson)");
ABSL_FLAG(int32_t, max_concurrency, 0, "most requests in flight (0: unlimited)");
ABSL_FLAG(std::string, dataset, "random", "random or sharegpt-like");
ABSL_FLAG(int32_t, input_len, 1024, "random dataset: prompt tokens");
ABSL_FLAG(int32_t, output_len, 128, "random dataset: output tokens");
ABSL_FLAG(double, range_ratio, 0.0, "random dataset: lengths uniform in len * (1 +- ratio)");
ABSL_FLAG(double, request_timeout, 0.0, "per-request deadline in seconds (0: none)");
ABSL_FLAG(bool, save_detailed, false, "add per-request arrays (ttfts, itls, ...) to the JSON");

namespace pagellm::cli {
namespace {

constexpr char kUsage[] =
    "usage: pagellm bench --server HOST:PORT [flags]\n"
    "Serving benchmark with vLLM benchmark_serving.py semantics against a pagellm router or\n"
    "worker. Prompts are random token ids; every request asks for max_tokens = its output length\n"
    "with ignore_eos. Prints a table; --json prints or writes the same numbers as JSON.\n"
    "flags [default]:\n"
    "  --server HOST:PORT          the server (required)\n"
    "  --endpoint router|worker    pagellm.v1.Generation (token-id prompts) or pagellm.v1.Worker\n"
    "                              straight to one worker [router]\n"
    "  --num-prompts N             requests [200]\n"
    "  --request-rate R            requests/s; inf sends all at once [inf]\n"
    "  --burstiness B              gamma shape of arrival gaps: 1 Poisson, < 1 burstier [1]\n"
    "  --max-concurrency N         most requests in flight; 0 unlimited [0]\n"
    "  --dataset random|sharegpt-like\n"
    "                              random: --input-len/--output-len +- --range-ratio;\n"
    "                              sharegpt-like: lognormal lengths, means 161 / 338 [random]\n"
    "  --input-len N               [1024]\n"
    "  --output-len N              [128]\n"
    "  --range-ratio R             lengths uniform in [len * (1 - R), len * (1 + R)] [0]\n"
    "  --max-model-len N           cap on prompt + output tokens; 0: the server's [0]\n"
    "  --temperature T             [0]\n"
    "  --seed N                    dataset and arrival times [0]\n"
    "  --request-timeout S         per-request deadline in seconds; 0 none [0]\n"
    "  --json [PATH]               write the JSON to PATH; without PATH print only the JSON\n"
    "                              on stdout (the table goes to stderr)\n"
    "  --save-detailed             add per-request arrays to the JSON\n";

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "pagellm bench: %s\n", s.ToString().c_str());
  return 1;
}

// Takes "--json", "--json=PATH" and "--json PATH" out of argv (absl's --json of
// `pagellm generate` is a bool). Returns "-" for stdout, nullopt without --json.
std::optional<std::string> TakeJsonFlag(std::vector<std::string>* args) {
  std::optional<std::string> path;
  for (size_t i = 1; i < args->size();) {
    const std::string& a = (*args)[i];
    if (a == "--") break;
    if (a == "--json") {
      const bool has_value =
          i + 1 < args->size() && ((*args)[i + 1] == "-" || (*args)[i + 1].rfind("-", 0) != 0);
      path = has_value ? (*args)[i + 1] : "-";
      args->erase(args->begin() + i, args->begin() + i + (has_value ? 2 : 1));
    } else if (a.rfind("--json=", 0) == 0) {
      path = a.substr(7);
      args->erase(args->begin() + i);
    } else {
      ++i;
    }
  }
  return path;
}

// Whether normalized `args` set --name (absl of this version keeps that to itself).
bool FlagGiven(const std::vector<std::string>& args, const std::string& name) {
  for (size_t i = 1; i < args.size() && args[i] != "--"; ++i) {
    if (args[i] == "--" + name || args[i].rfind("--" + name + "=", 0) == 0) return true;
  }
  return false;
}

}  // namespace

int BenchMain(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  std::vector<std::vector<std::string>> unused;
  std::vector<std::string> args = NormalizeArgs(argc, argv, {}, &unused);
  const std::optional<std::string> json_path = TakeJsonFlag(&args);
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  ParseFlags(static_cast<int>(cargs.size()), cargs.data());

  const std::string server = absl::GetFlag(FLAGS_server);
  if (server.empty()) return Fail(absl::InvalidArgumentError("--server HOST:PORT is required"));
  absl::StatusOr<bench::Endpoint> endpoint = bench::ParseEndpoint(absl::GetFlag(FLAGS_endpoint));
  if (!endpoint.ok()) return Fail(endpoint.status());
  absl::StatusOr<bench::DatasetKind> kind = bench::ParseDatasetKind(absl::GetFlag(FLAGS_dataset));
  if (!kind.ok()) return Fail(kind.status());
  const uint64_t seed = absl::GetFlag(FLAGS_seed).value_or(0);

  const std::string run_endpoint(bench::EndpointName(*endpoint));
  bench::BenchTarget target(server, *endpoint);
  absl::StatusOr<v1::ModelInfo> info = target.GetModelInfo(absl::Seconds(30));
  if (!info.ok()) {
    const bool wrong_service = info.status().code() == absl::StatusCode::kUnimplemented;
    return Fail(absl::Status(
        info.status().code(),
        absl::StrCat("GetModelInfo from ", server, ": ", info.status().message(),
                     wrong_service ? absl::StrCat("(the server does not serve the ", run_endpoint,
                                                  " API: check --endpoint)")
                                   : "")));
  }

  bench::DatasetOptions d;
  d.kind = *kind;
  d.num_prompts = absl::GetFlag(FLAGS_num_prompts);
  d.input_len = absl::GetFlag(FLAGS_input_len);
  d.output_len = absl::GetFlag(FLAGS_output_len);
  d.range_ratio = absl::GetFlag(FLAGS_range_ratio);
  d.vocab_size = info->vocab_size();
  const int64_t cap = absl::GetFlag(FLAGS_max_model_len);
  d.max_model_len = cap > 0 ? static_cast<int32_t>(cap) : info->max_model_len();
  d.seed = seed;
  absl::StatusOr<std::vector<bench::BenchRequest>> requests = bench::MakeDataset(d);
  if (!requests.ok()) return Fail(requests.status());

  bench::ServingBenchOptions o;
  o.request_rate = absl::GetFlag(FLAGS_request_rate);
  o.burstiness = absl::GetFlag(FLAGS_burstiness);
  o.max_concurrency = absl::GetFlag(FLAGS_max_concurrency);
  o.seed = seed;
  // `pagellm generate`'s --temperature defaults to 1; a benchmark's to greedy, as vLLM's.
  o.temperature =
      FlagGiven(args, "temperature") ? static_cast<float>(absl::GetFlag(FLAGS_temperature)) : 0.0f;
  const double timeout_s = absl::GetFlag(FLAGS_request_timeout);
  o.request_timeout = timeout_s > 0 ? absl::Seconds(timeout_s) : absl::InfiniteDuration();

  bench::RunInfo run;
  run.server = server;
  run.endpoint = run_endpoint;
  run.model = info->model_name();
  run.dataset = absl::GetFlag(FLAGS_dataset);
  run.num_prompts = d.num_prompts;
  run.request_rate = o.request_rate;
  run.burstiness = o.burstiness;
  run.max_concurrency = o.max_concurrency;
  run.seed = seed;

  std::fprintf(stderr, "pagellm bench: %d prompts to %s (%s, model %s); initial test run...\n",
               d.num_prompts, server.c_str(), run.endpoint.c_str(), run.model.c_str());
  absl::StatusOr<bench::ServingBenchResult> result = bench::RunServingBench(&target, *requests, o);
  if (!result.ok()) return Fail(result.status());

  const std::string table = bench::FormatReport(run, result->metrics);
  const bool json_to_stdout = json_path.has_value() && *json_path == "-";
  std::fputs(table.c_str(), json_to_stdout ? stderr : stdout);
  if (json_path.has_value()) {
    const std::string json =
        bench::ReportJson(run, result->metrics,
                          absl::GetFlag(FLAGS_save_detailed)
                              ? std::span<const bench::RequestRecord>(result->records)
                              : std::span<const bench::RequestRecord>())
            .dump(json_to_stdout ? -1 : 2);
    if (json_to_stdout) {
      std::printf("%s\n", json.c_str());
    } else {
      std::ofstream out(*json_path);
      out << json << "\n";
      if (!out) return Fail(absl::UnavailableError(absl::StrCat("cannot write ", *json_path)));
    }
  }
  return 0;
}

}  // namespace pagellm::cli
