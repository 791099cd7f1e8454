#include "tests/test_util.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "gloo/rendezvous/hash_store.h"
#include "worker/backend/factory/backend_factory.h"
#include "worker/backend/tp/tensor_parallel_backend.h"
#include "worker/dist/gloo_communicator.h"
#include "worker/model/model_loader.h"

namespace pagellm::testing {

bool PathExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

bool ModelsRequired() {
  const char* v = std::getenv("PAGELLM_REQUIRE_MODELS");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

std::string TestModelPath(const std::string& path) {
  const char* v = std::getenv("PAGELLM_TEST_MODEL");
  return v != nullptr && *v != '\0' ? std::string(v) : path;
}

namespace {

// Reads adapters for `checkpoint`'s model (as a worker's MakeLoraLoader).
LoraLoader LoraLoaderFor(const ModelCheckpoint& checkpoint) {
  return [config = checkpoint.config, neox = checkpoint.rope_neox](
             const LoraModuleSpec& spec) -> absl::StatusOr<std::shared_ptr<const LoraAdapter>> {
    ASSIGN_OR_RETURN(std::unique_ptr<LoraAdapter> adapter,
                     LoadLoraAdapter(spec.name, spec.path, config, neox));
    return std::shared_ptr<const LoraAdapter>(std::move(adapter));
  };
}

LoadModelOptions LoadOptions(const std::string& path) {
  LoadModelOptions lo;
  const std::vector<std::string> dummy = absl::StrSplit(path, ':');
  if (dummy.size() == 3 && dummy[0] == "dummy") {
    lo.format = "dummy";
    lo.dummy_preset = dummy[1];
    lo.dummy_type = dummy[2];
    lo.tokenizer_path = TestModelPath("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    return lo;
  }
  lo.path = TestModelPath(path);
  return lo;
}

// Follower threads, each serving the leader's steps over its own slice until the leader stops.
struct FollowerThreads {
  gloo::rendezvous::HashStore store;
  std::vector<std::thread> threads;
  ~FollowerThreads() {
    for (std::thread& t : threads) t.join();
  }
};

absl::StatusOr<std::unique_ptr<Backend>> CreateGroup(
    std::shared_ptr<const ModelCheckpoint> checkpoint, const CpuBackendOptions& options, int world,
    FollowerThreads* group) {
  auto rank_options = [&](int r, Communicator* comm) {
    CpuBackendOptions o = options;
    o.threads = std::max(1, options.threads / world);
    o.shard = {.rank = r, .world_size = world};
    o.communicator = comm;
    return o;
  };
  auto connect = [&](int r) {
    GlooOptions g;
    g.rank = r;
    g.world_size = world;
    g.timeout = absl::Seconds(60);
    return ConnectGloo(g, group->store);
  };
  for (int r = 1; r < world; ++r) {
    group->threads.emplace_back([=] {
      auto comm = connect(r);
      if (!comm.ok()) return;
      auto backend = CreateCpuBackend(checkpoint, rank_options(r, comm->get()));
      if (backend.ok()) {
        (void)RunTensorParallelFollower(backend->get(), comm->get(), LoraLoaderFor(*checkpoint));
      }
    });
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, connect(0));
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> rank0,
                   CreateCpuBackend(checkpoint, rank_options(0, comm.get())));
  return MakeTensorParallelLeader(std::move(rank0), std::move(comm));
}

int TestTensorParallelSize() {
  const char* v = std::getenv("PAGELLM_TEST_TP");
  return v != nullptr ? std::max(1, std::atoi(v)) : 1;
}

}  // namespace

absl::StatusOr<TestModel> OpenModel(const std::string& path, const CpuBackendOptions& options,
                                    const std::vector<LoraModuleSpec>& lora) {
  return OpenModelGroup(path, options, TestTensorParallelSize(), lora);
}

absl::StatusOr<TestModel> OpenModelGroup(const std::string& path,
                                         const CpuBackendOptions& cpu_options, int world_size,
                                         const std::vector<LoraModuleSpec>& lora) {
  ASSIGN_OR_RETURN(LoadedModel m, LoadModel(LoadOptions(path)));
  CpuBackendOptions options = cpu_options;
  for (const LoraModuleSpec& spec : lora) {
    ASSIGN_OR_RETURN(std::unique_ptr<LoraAdapter> adapter,
                     LoadLoraAdapter(spec.name, TestModelPath(spec.path), m.checkpoint->config,
                                     m.checkpoint->rope_neox));
    options.lora_adapters.push_back(std::move(adapter));
  }
  TestModel t;
  t.tokenizer = std::move(m.tokenizer);
  t.load_lora = LoraLoaderFor(*m.checkpoint);
  if (world_size > 1) {
    auto group = std::make_shared<FollowerThreads>();
    t.group = group;
    ASSIGN_OR_RETURN(t.backend, CreateGroup(m.checkpoint, options, world_size, group.get()));
    return t;
  }
  const char* device = std::getenv("PAGELLM_TEST_DEVICE");
  if (device != nullptr && std::strcmp(device, "cuda") == 0) {
    BackendOptions bo;
    bo.device = "cuda";
    bo.cuda.block_size = options.block_size;
    bo.cuda.num_kv_blocks = options.num_kv_blocks > 0 ? options.num_kv_blocks : 4096;
    bo.cuda.swap_space_bytes = options.swap_space_bytes;
    bo.cuda.max_batch_tokens = options.max_batch_tokens;
    bo.cuda.validate_batches = options.validate_batches;
    bo.cuda.lora_adapters = options.lora_adapters;
    ASSIGN_OR_RETURN(t.backend, CreateBackend(bo, m.checkpoint));
    return t;
  }
  ASSIGN_OR_RETURN(t.backend, CreateCpuBackend(m.checkpoint, options));
  return t;
}

absl::StatusOr<int64_t> KvBlockBytes(const std::string& path, int64_t block_size) {
  ASSIGN_OR_RETURN(LoadedModel m, LoadModel(LoadOptions(path)));
  const ModelConfig& c = m.checkpoint->config;
  return 2 * c.num_layers * c.num_kv_heads * block_size * c.head_dim * 2;
}

absl::StatusOr<std::vector<std::vector<int32_t>>> GreedyGenerate(
    Backend* backend, const Tokenizer* tokenizer, const std::vector<std::vector<int32_t>>& prompts,
    int max_tokens, bool together, const EngineOptions& options) {
  ASSIGN_OR_RETURN(auto engine, Engine::Create(backend, tokenizer, options));
  const SamplingParams p = GreedyParams(max_tokens);
  std::vector<std::vector<int32_t>> out(prompts.size());
  std::vector<SequenceOutput> step;
  auto drain = [&]() -> absl::Status {
    while (engine->HasUnfinished()) {
      step.clear();
      RETURN_IF_ERROR(engine->Step(&step));
      for (const SequenceOutput& o : step) {
        auto& v = out[std::stoul(o.request_id)];
        v.insert(v.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      }
    }
    return absl::OkStatus();
  };
  for (size_t i = 0; i < prompts.size(); ++i) {
    RETURN_IF_ERROR(engine->AddRequest(std::to_string(i), prompts[i], p));
    if (!together) RETURN_IF_ERROR(drain());
  }
  RETURN_IF_ERROR(drain());
  if (engine->num_used_blocks() != 0) {
    return absl::InternalError(absl::StrCat(engine->num_used_blocks(), " KV blocks leaked"));
  }
  return out;
}

absl::StatusOr<std::vector<float>> AllPositionLogits(Backend* backend,
                                                     const std::vector<int32_t>& tokens,
                                                     int32_t adapter) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t bs = backend->block_size();
  // The backend is idle (no engine uses it), so the first blocks of the pool are free to use.
  const int64_t num_blocks = (n + bs - 1) / bs;
  if (num_blocks > backend->num_kv_blocks()) {
    return absl::ResourceExhaustedError("the sequence does not fit the KV pool");
  }
  // The block table has the engine's stride for the model's full context.
  const int64_t stride = (backend->config().max_position_embeddings + bs - 1) / bs;
  std::vector<int32_t> table(std::max(stride, num_blocks), 0);
  for (int64_t i = 0; i < num_blocks; ++i) table[i] = static_cast<int32_t>(i);
  std::vector<int32_t> positions(n), seq(n, 0), logit_rows(n);
  std::vector<int32_t> query_start = {0, static_cast<int32_t>(n)};
  std::vector<int32_t> seq_lens = {static_cast<int32_t>(n)};
  std::vector<int64_t> slots(n);
  for (int64_t i = 0; i < n; ++i) {
    positions[i] = static_cast<int32_t>(i);
    logit_rows[i] = static_cast<int32_t>(i);
    slots[i] = static_cast<int64_t>(table[i / bs]) * bs + i % bs;
  }
  ForwardBatch batch;
  batch.num_tokens = n;
  batch.token_ids = tokens.data();
  batch.positions = positions.data();
  batch.token_seq = seq.data();
  batch.slots = slots.data();
  batch.num_seqs = 1;
  batch.query_start = query_start.data();
  batch.seq_lens = seq_lens.data();
  batch.block_tables = table.data();
  batch.block_table_stride = static_cast<int64_t>(table.size());
  batch.num_logits = n;
  batch.logit_indices = logit_rows.data();
  batch.all_decode = n == 1;
  batch.seq_adapter = adapter >= 0 ? &adapter : nullptr;
  std::vector<float> logits(n * backend->config().vocab_size);
  RETURN_IF_ERROR(backend->ForwardLogits(batch, logits.data()));
  return logits;
}

absl::Status AddTop1Agreement(Backend* backend, const std::vector<int32_t>& tokens,
                              const std::vector<int32_t>& top1, const std::vector<double>& margin,
                              double confident_margin, Top1Agreement* out, int32_t adapter) {
  if (top1.size() != tokens.size() || margin.size() != tokens.size()) {
    return absl::InvalidArgumentError("reference rows do not match the tokens");
  }
  ASSIGN_OR_RETURN(std::vector<float> logits, AllPositionLogits(backend, tokens, adapter));
  const int64_t vocab = backend->config().vocab_size;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const float* row = logits.data() + i * vocab;
    const int32_t best = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
    out->agree += best == top1[i];
    ++out->total;
    if (margin[i] >= confident_margin) {
      out->confident_agree += best == top1[i];
      ++out->confident;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<EngineRun> RunEngine(Engine* engine, int max_steps,
                                    const std::function<bool()>& between_steps) {
  EngineRun run;
  std::vector<SequenceOutput> step;
  for (int i = 0; i < max_steps; ++i) {
    const bool worked = between_steps && between_steps();
    if (!engine->HasUnfinished()) {
      if (worked) continue;
      break;
    }
    step.clear();
    RETURN_IF_ERROR(engine->Step(&step));
    for (const SequenceOutput& o : step) {
      const auto key = std::make_pair(o.request_id, o.sample_index);
      auto& v = run.tokens[key];
      v.insert(v.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      for (const SampleResult& lp : o.logprobs) run.logprobs[key].push_back(lp.logprob);
      run.cumulative_logprob[key] = o.cumulative_logprob;
    }
  }
  if (engine->HasUnfinished() || engine->num_waiting() > 0) {
    return absl::InternalError(absl::StrCat("unfinished after ", max_steps, " steps"));
  }
  const BlockManager::Stats bm = engine->block_manager().GetStats();
  if (bm.device_used != 0 || bm.swap_used != 0) {
    return absl::InternalError(
        absl::StrCat("KV blocks leaked: ", bm.device_used, " device, ", bm.swap_used, " swap"));
  }
  run.stats = engine->stats();
  return run;
}

absl::StatusOr<EngineRun> RunPrompts(const TestModel& m, const EngineOptions& options,
                                     const std::vector<std::string>& prompts,
                                     const SamplingParams& params) {
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(m.backend.get(), m.tokenizer.get(), options));
  for (size_t i = 0; i < prompts.size(); ++i) {
    RETURN_IF_ERROR(engine->AddRequest(std::to_string(i),
                                       m.tokenizer->Encode(prompts[i], true, false), params));
  }
  return RunEngine(engine.get());
}

}  // namespace pagellm::testing
