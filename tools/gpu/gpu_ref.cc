// pagellm-gpu-ref: our side of the end-to-end check against transformers (tools/gpu/check.sh).
// Reads REF.json from tools/gpu/hf_reference.py ({"prompts": [[ids]], "greedy": [[ids]],
// "max_tokens": N}) and writes OURS.json:
//   "greedy":              the engine's greedy continuation of each prompt (max_tokens tokens,
//                          EOS ignored), all prompts batched through one Engine;
//   "teacher_forced_top1": for each prompt, the backend's argmax next token at each position of
//                          prompt + ref greedy whose next token ref greedy holds (one prefill per
//                          sequence, in chunks of --max-num-batched-tokens);
//   "beams":               when REF.json has "beam" ({"width", "max_tokens", "beams"}), the
//                          engine's beam search (ignore_eos: no hypothesis closes; length
//                          penalty 1) on the first len(beams) prompts, best beam first.
// Token ids in and out: the tokenizer plays no part in the comparison.
//
// Usage: pagellm-gpu-ref --model DIR --device cuda --input REF.json --output OURS.json
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/flags_util.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/backend/step_arrays.h"
#include "worker/engine/engine.h"
#include "worker/flags/engine_flags.h"
#include "worker/flags/open_from_flags.h"

ABSL_FLAG(std::string, input, "", "reference JSON from tools/gpu/hf_reference.py");
ABSL_FLAG(std::string, output, "", "where to write our greedy and teacher-forced tokens");

namespace pagellm::cli {
namespace {

// Argmax of each position of `seq` in [first, last) (its next-token prediction), running the
// whole sequence through the backend over blocks 0, 1, ... of its pool.
absl::StatusOr<std::vector<int32_t>> TeacherForced(Backend& backend,
                                                   const std::vector<int32_t>& seq, int64_t first,
                                                   int64_t last) {
  const int64_t bs = backend.block_size(), vocab = backend.config().vocab_size;
  const int64_t n = static_cast<int64_t>(seq.size());
  const int64_t stride = (backend.config().max_position_embeddings + bs - 1) / bs;
  if ((n + bs - 1) / bs > backend.num_kv_blocks()) {
    return absl::ResourceExhaustedError("the KV pool is smaller than one reference sequence");
  }
  std::vector<int32_t> blocks((n + bs - 1) / bs);
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = static_cast<int32_t>(b);
  std::vector<int32_t> out;
  StepArrays step(bs, stride);
  const int64_t chunk = backend.max_batch_tokens();
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t c1 = std::min(n, c0 + chunk);
    step.Clear();  // logits for the chunk's positions >= first (none before it)
    step.AddRow(std::span<const int32_t>(seq).subspan(c0, c1 - c0), c0, blocks, first);
    const ForwardBatch b = step.batch();
    std::vector<float> logits(std::max<int64_t>(b.num_logits, 1) * vocab);
    RETURN_IF_ERROR(backend.ForwardLogits(b, logits.data()));
    for (int64_t r = 0; r < b.num_logits; ++r) {
      const float* l = logits.data() + r * vocab;
      out.push_back(static_cast<int32_t>(std::max_element(l, l + vocab) - l));
    }
  }
  out.resize(std::min<int64_t>(static_cast<int64_t>(out.size()), last - first));
  return out;
}

// The engine's beam search on the first len(spec["beams"]) prompts, all in one batch.
absl::StatusOr<nlohmann::json> BeamSearch(Engine& engine,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          const nlohmann::json& spec) {
  if (!spec.contains("width") || !spec.contains("max_tokens") || !spec.contains("beams") ||
      spec["beams"].size() > prompts.size()) {
    return absl::InvalidArgumentError("--input: beam needs width, max_tokens and beams");
  }
  SamplingParams params;
  params.temperature = 0.0;
  params.beam_width = spec["width"].get<int32_t>();
  params.max_tokens = spec["max_tokens"].get<int32_t>();
  params.ignore_eos = true;
  params.length_penalty = 1.0f;
  params.early_stopping = false;
  const size_t n = spec["beams"].size();
  for (size_t i = 0; i < n; ++i) {
    RETURN_IF_ERROR(engine.AddRequest(absl::StrCat("beam", i), prompts[i], params));
  }
  std::vector<std::vector<std::vector<int32_t>>> beams(
      n, std::vector<std::vector<int32_t>>(params.beam_width));
  std::vector<SequenceOutput> outputs;
  while (engine.HasUnfinished()) {
    outputs.clear();
    RETURN_IF_ERROR(engine.Step(&outputs));
    for (const SequenceOutput& o : outputs) {
      if (!o.error.ok()) return o.error;
      const size_t i = std::stoul(o.request_id.substr(4));
      if (o.sample_index < 0 || o.sample_index >= params.beam_width) {
        return absl::InternalError(absl::StrCat("beam rank ", o.sample_index));
      }
      auto& ids = beams[i][o.sample_index];
      ids.insert(ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  }
  return nlohmann::json(beams);
}

absl::Status Run() {
  std::ifstream in(absl::GetFlag(FLAGS_input));
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot read --input ", absl::GetFlag(FLAGS_input)));
  const nlohmann::json ref = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (ref.is_discarded() || !ref.contains("prompts") || !ref.contains("greedy") ||
      !ref.contains("max_tokens")) {
    return absl::InvalidArgumentError("--input needs prompts, greedy and max_tokens");
  }
  const auto prompts = ref["prompts"].get<std::vector<std::vector<int32_t>>>();
  const auto greedy = ref["greedy"].get<std::vector<std::vector<int32_t>>>();
  const int32_t max_tokens = ref["max_tokens"].get<int32_t>();
  if (prompts.size() != greedy.size()) return absl::InvalidArgumentError("prompts != greedy");

  ASSIGN_OR_RETURN(EngineOptions eo, EngineOptionsFromFlags());
  ASSIGN_OR_RETURN(OpenedModel model, OpenModelFromFlags());
  nlohmann::json out;
  out["teacher_forced_top1"] = nlohmann::json::array();
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<int32_t> seq = prompts[i];
    seq.insert(seq.end(), greedy[i].begin(), greedy[i].end());
    const int64_t first = static_cast<int64_t>(prompts[i].size()) - 1;
    ASSIGN_OR_RETURN(std::vector<int32_t> top1,
                     TeacherForced(*model.backend, seq, first, first + greedy[i].size()));
    out["teacher_forced_top1"].push_back(top1);
  }

  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(model.backend.get(), model.tokenizer.get(), eo));
  SamplingParams params;
  params.temperature = 0.0;
  params.max_tokens = max_tokens;
  params.ignore_eos = true;
  for (size_t i = 0; i < prompts.size(); ++i) {
    RETURN_IF_ERROR(engine->AddRequest(std::to_string(i), prompts[i], params));
  }
  std::vector<std::vector<int32_t>> ours(prompts.size());
  std::vector<SequenceOutput> outputs;
  while (engine->HasUnfinished()) {
    outputs.clear();
    RETURN_IF_ERROR(engine->Step(&outputs));
    for (const SequenceOutput& o : outputs) {
      if (!o.error.ok()) return o.error;
      auto& ids = ours[std::stoul(o.request_id)];
      ids.insert(ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  }
  out["greedy"] = ours;
  if (ref.contains("beam")) {
    ASSIGN_OR_RETURN(out["beams"], BeamSearch(*engine, prompts, ref["beam"]));
  }
  std::ofstream f(absl::GetFlag(FLAGS_output));
  f << out.dump() << "\n";
  if (!f)
    return absl::InternalError(absl::StrCat("cannot write --output ", absl::GetFlag(FLAGS_output)));
  return absl::OkStatus();
}

}  // namespace
}  // namespace pagellm::cli

int main(int argc, char** argv) {
  pagellm::cli::ParseFlags(argc, argv);
  const absl::Status s = pagellm::cli::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "pagellm-gpu-ref: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
