// The CUDA backend end to end on a GPU (skipped without one): its logits against the CPU
// backend's (fp32 arithmetic over the same bf16 weights) through chunked prefill, a mixed step
// and decode steps, for a Llama and a Qwen2 (QKV bias) shape; copy-on-write and a swap round trip
// leave the next step's logits bit-identical; final hidden states (embeddings) as the CPU's;
// sampling and prompt-scoring rows answer as the reference sampler does over the same logits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "worker/backend/cpu/cpu_backend.h"
#include "worker/backend/cpu/sampler.h"
#include "worker/backend/cuda/cuda_backend.h"
#include "worker/backend/cuda/testing/gpu_test_model.h"
#include "worker/backend/step_arrays.h"
#include "worker/model/testing/tiny_model.h"

namespace pagellm {
namespace {

using testing::HasGpu;
using testing::RelativeError;

ModelConfig SmallConfig(bool qwen2) { return testing::SmallGpuConfig(qwen2); }

// Sequences over a trivial block allocator, and steps built from them.
class Steps {
 public:
  Steps(int64_t block_size, int64_t stride) : bs_(block_size), step_(block_size, stride) {}
  int AddSeq() {
    seqs_.push_back({});
    return static_cast<int>(seqs_.size()) - 1;
  }
  std::vector<int32_t>& blocks(int s) { return seqs_[s].blocks; }
  int32_t NewBlock() { return next_block_++; }
  // One step: for each (seq, tokens) the tokens are appended; every row's last token wants logits.
  // Sequence s runs LoRA adapter adapters[s] when given (-1: none).
  ForwardBatch Build(const std::vector<std::pair<int, std::vector<int32_t>>>& rows,
                     const std::vector<int32_t>& adapters = {}) {
    step_.Clear();
    for (const auto& [id, tokens] : rows) {
      Seq& s = seqs_[id];
      while (static_cast<int64_t>(s.blocks.size()) * bs_ <
             s.len + static_cast<int64_t>(tokens.size())) {
        s.blocks.push_back(NewBlock());
      }
      step_.AddRow(tokens, s.len, s.blocks, -1,
                   adapters.empty() ? -1 : adapters[static_cast<size_t>(id)]);
      s.len += static_cast<int32_t>(tokens.size());
    }
    return step_.batch();
  }
  // Forgets the last token of `s` (to run the same step again).
  void Rewind(int s) { --seqs_[s].len; }

 private:
  struct Seq {
    std::vector<int32_t> blocks;
    int32_t len = 0;
  };
  int64_t bs_;
  int32_t next_block_ = 0;
  std::vector<Seq> seqs_;
  StepArrays step_;
};

std::vector<int32_t> RandomTokens(int n, std::mt19937& rng) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % 512);
  return t;
}

class CudaBackendGpuTest : public ::testing::TestWithParam<bool> {};

TEST_P(CudaBackendGpuTest, LogitsMatchTheCpuBackendThroughPrefillChunksAndDecode) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig cfg = SmallConfig(GetParam());
  auto ckpt = testing::TinyCheckpoint(GgmlType::kBF16, cfg, 7);
  ASSERT_NE(ckpt, nullptr);
  CpuBackendOptions co;
  co.num_kv_blocks = 256;
  co.kv_cache_dtype = "f32";
  auto cpu = CreateCpuBackend(ckpt, co);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  CudaBackendOptions go;
  go.num_kv_blocks = 256;
  go.max_batch_tokens = 512;
  auto gpu = CreateCudaBackend(ckpt, go);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->num_kv_blocks(), 256);

  const int64_t stride = cfg.max_position_embeddings / 16;
  Steps cpu_steps(16, stride), gpu_steps(16, stride);
  std::mt19937 rng(3);
  const std::vector<int32_t> a = RandomTokens(300, rng), b = RandomTokens(40, rng);
  std::vector<std::vector<std::pair<int, std::vector<int32_t>>>> plan;
  plan.push_back({{0, std::vector<int32_t>(a.begin(), a.begin() + 200)}});
  plan.push_back({{0, std::vector<int32_t>(a.begin() + 200, a.end())}, {1, b}});
  for (int i = 0; i < 6; ++i)
    plan.push_back({{0, RandomTokens(1, rng)}, {1, RandomTokens(1, rng)}});
  for (Steps* s : {&cpu_steps, &gpu_steps}) {
    s->AddSeq();
    s->AddSeq();
  }
  for (size_t step = 0; step < plan.size(); ++step) {
    const ForwardBatch cb = cpu_steps.Build(plan[step]);
    const ForwardBatch gb = gpu_steps.Build(plan[step]);
    std::vector<float> want(cb.num_logits * cfg.vocab_size), got(want.size(), NAN);
    ASSERT_TRUE((*cpu)->ForwardLogits(cb, want.data()).ok());
    const absl::Status s = (*gpu)->ForwardLogits(gb, got.data());
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_LT(RelativeError(got, want), 2e-2) << "step " << step;
    // The final norm's output (embeddings), rows in reverse order.
    std::vector<int32_t> rows(cb.num_logits);
    for (int32_t r = 0; r < cb.num_logits; ++r)
      rows[r] = static_cast<int32_t>(cb.num_logits) - 1 - r;
    std::vector<float> want_h(rows.size() * cfg.hidden_size), got_h(want_h.size(), NAN);
    ASSERT_TRUE((*cpu)->FinalHidden(rows, want_h.data()).ok());
    ASSERT_TRUE((*gpu)->FinalHidden(rows, got_h.data()).ok());
    EXPECT_LT(RelativeError(got_h, want_h), 2e-2) << "hidden states, step " << step;
  }
}

// A rank-4 adapter on every module of cfg's layers, uniform in +-scale (A) and +-1 (B^T).
std::shared_ptr<const LoraAdapter> RandomAdapter(const ModelConfig& cfg, uint32_t seed) {
  auto adapter = std::make_shared<LoraAdapter>();
  adapter->name = "test-lora";
  adapter->rank = 4;
  adapter->layers.resize(cfg.num_layers);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& layer : adapter->layers) {
    for (int m = 0; m < kNumLoraModules; ++m) {
      LoraMatrix& lm = layer[m];
      std::tie(lm.n_out, lm.n_in) = LoraModuleShape(cfg, static_cast<LoraModule>(m));
      lm.a.resize(adapter->rank * lm.n_in);
      lm.bt.resize(adapter->rank * lm.n_out);
      const float scale = 1.0f / std::sqrt(static_cast<float>(lm.n_in));
      for (float& v : lm.a) v = u(rng) * scale;
      for (float& v : lm.bt) v = u(rng) * 0.05f;
    }
  }
  return adapter;
}

// Over one tiny checkpoint of cfg: the CPU backend serving `adapter` from --lora-modules, the
// CPU backend without it, and a CUDA backend with `go`'s adapters and slots (a pool of 256
// blocks, steps of 512 tokens, 8 sequences).
struct LoraBackends {
  std::unique_ptr<Backend> cpu, plain, gpu;
};
absl::StatusOr<LoraBackends> MakeLoraBackends(const ModelConfig& cfg,
                                              std::shared_ptr<const LoraAdapter> adapter,
                                              CudaBackendOptions go) {
  auto ckpt = testing::TinyCheckpoint(GgmlType::kBF16, cfg, 7);
  if (ckpt == nullptr) return absl::InternalError("no checkpoint");
  LoraBackends b;
  CpuBackendOptions co;
  co.num_kv_blocks = 256;
  co.kv_cache_dtype = "f32";
  co.lora_adapters = {std::move(adapter)};
  ASSIGN_OR_RETURN(b.cpu, CreateCpuBackend(ckpt, co));
  co.lora_adapters.clear();
  ASSIGN_OR_RETURN(b.plain, CreateCpuBackend(ckpt, co));
  go.num_kv_blocks = 256;
  go.max_batch_tokens = 512;
  go.max_num_seqs = 8;
  ASSIGN_OR_RETURN(b.gpu, CreateCudaBackend(ckpt, go));
  return b;
}

TEST_P(CudaBackendGpuTest, LoraAdapterRowsMatchTheCpuBackend) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  // Sequence 0 runs the adapter, sequence 1 the base model, in the same steps: a prefill chunk,
  // a mixed step and decode steps (replayed graphs). Logits against the CPU backend's, which
  // applies the same adapter (tests/lora_test.cc checks that one against peft).
  const ModelConfig cfg = SmallConfig(GetParam());
  const std::shared_ptr<const LoraAdapter> adapter = RandomAdapter(cfg, 11);
  CudaBackendOptions go;
  go.lora_adapters = {adapter};
  auto backends = MakeLoraBackends(cfg, adapter, go);
  ASSERT_TRUE(backends.ok()) << backends.status();
  auto& [cpu, plain, gpu] = *backends;
  ASSERT_EQ(gpu->adapter_names(), std::vector<std::string>{"test-lora"});

  const int64_t stride = cfg.max_position_embeddings / 16;
  Steps cpu_steps(16, stride), gpu_steps(16, stride), plain_steps(16, stride);
  std::mt19937 rng(5);
  const std::vector<int32_t> a = RandomTokens(70, rng), b = RandomTokens(20, rng);
  std::vector<std::vector<std::pair<int, std::vector<int32_t>>>> plan;
  plan.push_back({{0, std::vector<int32_t>(a.begin(), a.begin() + 50)}});
  plan.push_back({{0, std::vector<int32_t>(a.begin() + 50, a.end())}, {1, b}});
  for (int i = 0; i < 3; ++i)
    plan.push_back({{0, RandomTokens(1, rng)}, {1, RandomTokens(1, rng)}});
  for (Steps* s : {&cpu_steps, &gpu_steps, &plain_steps}) {
    s->AddSeq();
    s->AddSeq();
  }
  const std::vector<int32_t> adapters = {0, -1};
  for (size_t step = 0; step < plan.size(); ++step) {
    const ForwardBatch cb = cpu_steps.Build(plan[step], adapters);
    const ForwardBatch gb = gpu_steps.Build(plan[step], adapters);
    const ForwardBatch pb = plain_steps.Build(plan[step]);
    std::vector<float> want(cb.num_logits * cfg.vocab_size), got(want.size(), NAN),
        base(want.size());
    ASSERT_TRUE(cpu->ForwardLogits(cb, want.data()).ok());
    ASSERT_TRUE(plain->ForwardLogits(pb, base.data()).ok());
    const absl::Status s = gpu->ForwardLogits(gb, got.data());
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_LT(RelativeError(got, want), 2e-2) << "step " << step;
    // The adapter's row moved well beyond that bound; the base row did not move at all.
    const size_t v = static_cast<size_t>(cfg.vocab_size);
    const std::vector<float> got0(got.begin(), got.begin() + v),
        base0(base.begin(), base.begin() + v);
    EXPECT_GT(RelativeError(got0, base0), 1e-1) << "step " << step;
    if (cb.num_logits == 2) {
      const std::vector<float> want1(want.begin() + v, want.end()),
          base1(base.begin() + v, base.end());
      EXPECT_EQ(want1, base1) << "step " << step;
    }
  }
}

TEST_P(CudaBackendGpuTest, AnAdapterLoadedWhileServingMatchesTheCpuBackend) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  // Runtime LoRA updating: two reserved slots, none filled at start; the adapter goes into slot
  // 1 between steps (captured decode graphs read the slot table as it is then), runs beside a
  // base row as the CPU backend runs it from --lora-modules, and leaves again.
  const ModelConfig cfg = SmallConfig(GetParam());
  const std::shared_ptr<const LoraAdapter> adapter = RandomAdapter(cfg, 11);
  CudaBackendOptions go;
  go.max_loras = 2;
  go.max_lora_rank = 8;
  auto backends = MakeLoraBackends(cfg, adapter, go);
  ASSERT_TRUE(backends.ok()) << backends.status();
  auto& [cpu, plain, gpu] = *backends;
  Backend& g = *gpu;
  ASSERT_TRUE(g.adapters_can_change());
  EXPECT_EQ(g.adapter_names(), (std::vector<std::string>{"", ""}));
  ASSERT_TRUE(g.SetAdapter(1, adapter).ok());
  EXPECT_EQ(g.adapter_names(), (std::vector<std::string>{"", "test-lora"}));
  auto too_large = std::make_shared<LoraAdapter>(*RandomAdapter(cfg, 12));
  too_large->rank = 16;  // beyond the slots' reserved rank
  EXPECT_EQ(g.SetAdapter(0, too_large).code(), absl::StatusCode::kInvalidArgument);

  const int64_t stride = cfg.max_position_embeddings / 16;
  Steps cpu_steps(16, stride), gpu_steps(16, stride), plain_steps(16, stride);
  std::mt19937 rng(6);
  std::vector<std::vector<std::pair<int, std::vector<int32_t>>>> plan;
  plan.push_back({{0, RandomTokens(30, rng)}, {1, RandomTokens(10, rng)}});
  for (int i = 0; i < 2; ++i)
    plan.push_back({{0, RandomTokens(1, rng)}, {1, RandomTokens(1, rng)}});
  for (Steps* s : {&cpu_steps, &gpu_steps, &plain_steps}) {
    s->AddSeq();
    s->AddSeq();
  }
  for (size_t step = 0; step < plan.size(); ++step) {
    const ForwardBatch cb = cpu_steps.Build(plan[step], {0, -1});
    const ForwardBatch gb = gpu_steps.Build(plan[step], {1, -1});
    const ForwardBatch pb = plain_steps.Build(plan[step]);
    std::vector<float> want(cb.num_logits * cfg.vocab_size), got(want.size(), NAN),
        base(want.size());
    ASSERT_TRUE(cpu->ForwardLogits(cb, want.data()).ok());
    ASSERT_TRUE(plain->ForwardLogits(pb, base.data()).ok());
    const absl::Status st = g.ForwardLogits(gb, got.data());
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_LT(RelativeError(got, want), 2e-2) << "step " << step;
    const size_t v = static_cast<size_t>(cfg.vocab_size);
    EXPECT_GT(RelativeError(std::vector<float>(got.begin(), got.begin() + v),
                            std::vector<float>(base.begin(), base.begin() + v)),
              1e-1)
        << "the adapter changed nothing, step " << step;
  }
  // Unloaded: the base row goes on as the plain CPU backend's.
  ASSERT_TRUE(g.SetAdapter(1, nullptr).ok());
  EXPECT_EQ(g.SetAdapter(1, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(g.adapter_names(), (std::vector<std::string>{"", ""}));
  const std::vector<std::pair<int, std::vector<int32_t>>> last = {{1, RandomTokens(1, rng)}};
  const ForwardBatch pb = plain_steps.Build(last);
  const ForwardBatch gb = gpu_steps.Build(last);
  std::vector<float> want(cfg.vocab_size), got(cfg.vocab_size, NAN);
  ASSERT_TRUE(plain->ForwardLogits(pb, want.data()).ok());
  ASSERT_TRUE(g.ForwardLogits(gb, got.data()).ok());
  EXPECT_LT(RelativeError(got, want), 2e-2);

  // Another adapter in the same slot (the engine moves adapters through slots when it serves
  // more than they hold): its rows are its own, none of the first one's weights left.
  const std::shared_ptr<const LoraAdapter> next = RandomAdapter(cfg, 13);
  ASSERT_TRUE(g.SetAdapter(1, next).ok());
  ASSERT_TRUE(cpu->SetAdapter(0, nullptr).ok());
  ASSERT_TRUE(cpu->SetAdapter(0, next).ok());
  const std::vector<std::pair<int, std::vector<int32_t>>> again = {{0, RandomTokens(1, rng)}};
  const ForwardBatch cb2 = cpu_steps.Build(again, {0, -1});
  const ForwardBatch gb2 = gpu_steps.Build(again, {1, -1});
  ASSERT_TRUE(cpu->ForwardLogits(cb2, want.data()).ok());
  ASSERT_TRUE(g.ForwardLogits(gb2, got.data()).ok());
  EXPECT_LT(RelativeError(got, want), 2e-2) << "the slot's next adapter";
}

TEST_P(CudaBackendGpuTest, CopyOnWriteAndSwapKeepTheNextStepBitIdentical) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig cfg = SmallConfig(GetParam());
  auto ckpt = testing::TinyCheckpoint(GgmlType::kBF16, cfg, 8);
  CudaBackendOptions go;
  go.num_kv_blocks = 64;
  go.swap_space_bytes = 64ll << 20;
  go.max_batch_tokens = 256;
  auto gpu = CreateCudaBackend(ckpt, go);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_GT((*gpu)->num_swap_blocks(), 8);
  Backend& be = **gpu;
  const int64_t stride = cfg.max_position_embeddings / 16;
  Steps steps(16, stride);
  const int s = steps.AddSeq();
  std::mt19937 rng(4);
  const ForwardBatch prefill = steps.Build({{s, RandomTokens(40, rng)}});  // blocks 0, 1, 2
  std::vector<float> scratch(cfg.vocab_size);
  ASSERT_TRUE(be.ForwardLogits(prefill, scratch.data()).ok());
  const std::vector<int32_t> next = RandomTokens(1, rng);
  std::vector<float> want(cfg.vocab_size), got(cfg.vocab_size);
  ASSERT_TRUE(be.ForwardLogits(steps.Build({{s, next}}), want.data()).ok());
  steps.Rewind(s);

  // Copy-on-write of the partly filled last block into a fresh block.
  const int32_t fresh = steps.NewBlock();
  ASSERT_TRUE(be.CopyKv({{KvCopy{KvCopy::Kind::kDeviceToDevice, steps.blocks(s)[2], fresh}}}).ok());
  steps.blocks(s)[2] = fresh;
  ASSERT_TRUE(be.ForwardLogits(steps.Build({{s, next}}), got.data()).ok());
  EXPECT_EQ(got, want);
  steps.Rewind(s);

  // Swap every block out, then in to other device blocks.
  std::vector<KvCopy> out, in;
  for (size_t i = 0; i < steps.blocks(s).size(); ++i) {
    out.push_back({KvCopy::Kind::kDeviceToSwap, steps.blocks(s)[i], static_cast<int32_t>(i + 5)});
    const int32_t dst = steps.NewBlock();
    in.push_back({KvCopy::Kind::kSwapToDevice, static_cast<int32_t>(i + 5), dst});
    steps.blocks(s)[i] = dst;
  }
  ASSERT_TRUE(be.CopyKv(out).ok());
  ASSERT_TRUE(be.CopyKv(in).ok());
  std::fill(got.begin(), got.end(), NAN);
  ASSERT_TRUE(be.ForwardLogits(steps.Build({{s, next}}), got.data()).ok());
  EXPECT_EQ(got, want);

  // Ids outside the pools are refused, not executed.
  EXPECT_EQ(be.CopyKv({{KvCopy{KvCopy::Kind::kDeviceToSwap, 0, 1 << 20}}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(CudaBackendGpuTest, MemoryPlanningSizesThePoolFromTheBudget) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig cfg = SmallConfig(GetParam());
  auto ckpt = testing::TinyCheckpoint(GgmlType::kBF16, cfg, 9);
  CudaBackendOptions go;
  go.gpu_memory_utilization = 0.05;
  go.max_batch_tokens = 1024;
  auto small = CreateCudaBackend(ckpt, go);
  ASSERT_TRUE(small.ok()) << small.status();
  const int64_t small_blocks = (*small)->num_kv_blocks();
  small->reset();
  go.gpu_memory_utilization = 0.10;
  auto large = CreateCudaBackend(ckpt, go);
  ASSERT_TRUE(large.ok()) << large.status();
  size_t free = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  const int64_t block_bytes = 2 * cfg.num_layers * cfg.num_kv_heads * 16 * cfg.head_dim * 2;
  // Doubling the fraction adds 5% of the device to the pool, to within a few blocks.
  EXPECT_NEAR(static_cast<double>((*large)->num_kv_blocks() - small_blocks) * block_bytes,
              0.05 * static_cast<double>(total), 0.002 * static_cast<double>(total));
}

TEST_P(CudaBackendGpuTest, DecodeGraphsAgreeWithEagerSteps) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig cfg = SmallConfig(GetParam());
  auto ckpt = testing::TinyCheckpoint(GgmlType::kBF16, cfg, 12);
  CudaBackendOptions go;
  go.num_kv_blocks = 128;
  go.max_batch_tokens = 512;
  auto graphs = CreateCudaBackend(ckpt, go);
  go.enforce_eager = true;
  auto eager = CreateCudaBackend(ckpt, go);
  ASSERT_TRUE(graphs.ok()) << graphs.status();
  ASSERT_TRUE(eager.ok()) << eager.status();
  EXPECT_EQ((*graphs)->num_kv_blocks(), 128);
  EXPECT_EQ((*eager)->num_kv_blocks(), 128);
  const int64_t stride = cfg.max_position_embeddings / 16;
  std::mt19937 rng(6);
  // Five sequences (3 rows pad to a graph of 4... then 5 to 8), decode after distinct prompts.
  std::vector<std::vector<std::pair<int, std::vector<int32_t>>>> plan;
  std::vector<std::pair<int, std::vector<int32_t>>> prefill;
  for (int s = 0; s < 5; ++s) prefill.push_back({s, RandomTokens(20 + 37 * s, rng)});
  plan.push_back(prefill);
  for (int i = 0; i < 4; ++i) {
    std::vector<std::pair<int, std::vector<int32_t>>> step;
    for (int s = 0; s < (i % 2 == 0 ? 3 : 5); ++s) step.push_back({s, RandomTokens(1, rng)});
    plan.push_back(step);
  }
  Steps a(16, stride), b(16, stride);
  for (int s = 0; s < 5; ++s) {
    a.AddSeq();
    b.AddSeq();
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    const ForwardBatch ga = a.Build(plan[i]), eb = b.Build(plan[i]);
    EXPECT_EQ(ga.all_decode, i > 0);
    std::vector<float> got(ga.num_logits * cfg.vocab_size, NAN), want(got.size(), NAN);
    ASSERT_TRUE((*graphs)->ForwardLogits(ga, got.data()).ok());
    ASSERT_TRUE((*eager)->ForwardLogits(eb, want.data()).ok());
    EXPECT_LT(RelativeError(got, want), 1e-2) << "step " << i;
  }
}

TEST_P(CudaBackendGpuTest, SamplingMatchesTheReferenceSamplerOnTheSameLogits) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig cfg = SmallConfig(GetParam());
  auto ckpt = testing::TinyCheckpoint(GgmlType::kBF16, cfg, 13);
  CudaBackendOptions go;
  go.num_kv_blocks = 64;
  go.max_batch_tokens = 256;
  auto gpu = CreateCudaBackend(ckpt, go);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  Backend& be = **gpu;
  Steps steps(16, cfg.max_position_embeddings / 16);
  std::mt19937 rng(8);
  std::vector<std::pair<int, std::vector<int32_t>>> rows;
  for (int s = 0; s < 6; ++s) {
    steps.AddSeq();
    rows.push_back({s, RandomTokens(10 + s, rng)});
  }
  std::vector<float> logits(6 * cfg.vocab_size);
  const ForwardBatch first = steps.Build(rows);
  ASSERT_TRUE(be.ForwardLogits(first, logits.data()).ok());

  // Six kinds of rows: greedy, greedy with logprobs, greedy before min_tokens (the argmax
  // suppressed as a stop token), seeded temperature, repetition penalty, a beam row.
  std::vector<SamplingParams> params(6);
  for (auto& p : params) p.temperature = 0.0f;
  params[1].logprobs = 5;
  params[2].min_tokens = 3;
  params[2].ignore_eos = true;
  params[3].temperature = 0.8f;
  params[3].top_p = 0.9f;
  params[4].repetition_penalty = 1.3f;
  const std::vector<int32_t> history = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  std::vector<SamplingRow> srows(6);
  for (int s = 0; s < 6; ++s) {
    srows[s].logits_row = s;
    srows[s].seq.params = &params[s];
    srows[s].seq.prompt_ids = absl::MakeConstSpan(history);
    srows[s].seq.rng = SamplingRng(100 + s);
  }
  {
    const float* row2 = logits.data() + 2 * cfg.vocab_size;
    params[2].stop_token_ids = {
        static_cast<int32_t>(std::max_element(row2, row2 + cfg.vocab_size) - row2)};
  }
  srows[5].num_top_candidates = 4;
  const std::vector<int32_t> eos = {0};
  const SamplingBatch batch{absl::MakeConstSpan(srows), absl::MakeConstSpan(eos)};
  auto reference = Sampler::Create({cfg.vocab_size, eos});
  ASSERT_TRUE(reference.ok());
  SamplerOutput want, got;
  ASSERT_TRUE((*reference)->SampleBatch(logits, batch, &want).ok());

  Steps again(16, cfg.max_position_embeddings / 16);
  for (int s = 0; s < 6; ++s) again.AddSeq();
  ASSERT_TRUE(be.Forward(again.Build(rows), batch, &got).ok());
  ASSERT_EQ(got.rows.size(), want.rows.size());
  for (int s = 0; s < 5; ++s) {
    ASSERT_TRUE(got.rows[s].status.ok()) << s << ": " << got.rows[s].status;
    EXPECT_EQ(got.rows[s].result.token_id, want.rows[s].result.token_id) << s;
  }
  EXPECT_NE(got.rows[2].result.token_id, params[2].stop_token_ids[0]);
  EXPECT_NEAR(got.rows[1].result.logprob, want.rows[1].result.logprob, 1e-4);
  EXPECT_EQ(got.rows[1].result.rank, want.rows[1].result.rank);
  ASSERT_EQ(got.rows[1].result.num_top_logprobs, 5);
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(got.rows[1].result.top_logprobs()[k].token_id,
              want.rows[1].result.top_logprobs()[k].token_id);
  }
  ASSERT_EQ(got.rows[5].num_candidates, 4);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(got.CandidatesOf(got.rows[5])[k].token_id,
              want.CandidatesOf(want.rows[5])[k].token_id);
  }
}

TEST_P(CudaBackendGpuTest, PromptScoringRowsReadEveryPositionsLogits) {
  // Prompt logprobs: a 120-token prefill whose every position's logits are kept (more rows than
  // --max-num-seqs; CudaBackend sizes its logits for kMaxScoredRowsPerStep more), each position
  // scoring the next prompt token, the last one sampling -- as the reference sampler scores the
  // same logits.
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig cfg = SmallConfig(GetParam());
  auto ckpt = testing::TinyCheckpoint(GgmlType::kBF16, cfg, 17);
  CudaBackendOptions go;
  go.num_kv_blocks = 64;
  go.max_batch_tokens = 256;
  go.max_num_seqs = 8;
  auto gpu = CreateCudaBackend(ckpt, go);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  Backend& be = **gpu;
  ASSERT_GE(be.max_logits_rows(), 120);
  std::mt19937 rng(4);
  const std::vector<int32_t> prompt = RandomTokens(120, rng);
  std::vector<int32_t> every(prompt.size());
  for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<int32_t>(i);
  Steps steps(16, cfg.max_position_embeddings / 16), again(16, cfg.max_position_embeddings / 16);
  steps.AddSeq();
  again.AddSeq();
  ForwardBatch b = steps.Build({{0, prompt}});
  b.num_logits = static_cast<int64_t>(every.size());
  b.logit_indices = every.data();
  std::vector<float> logits(every.size() * cfg.vocab_size);
  ASSERT_TRUE(be.ForwardLogits(b, logits.data()).ok());

  SamplingParams p;
  p.temperature = 0.0f;
  p.prompt_logprobs = 3;
  std::vector<SamplingRow> rows(every.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].logits_row = static_cast<int32_t>(i);
    rows[i].seq.params = &p;
    if (i + 1 < rows.size()) rows[i].score_token = prompt[i + 1];
  }
  const std::vector<int32_t> eos = {0};
  const SamplingBatch batch{absl::MakeConstSpan(rows), absl::MakeConstSpan(eos)};
  auto reference = Sampler::Create({cfg.vocab_size, eos});
  ASSERT_TRUE(reference.ok());
  SamplerOutput want, got;
  ASSERT_TRUE((*reference)->SampleBatch(logits, batch, &want).ok());
  ForwardBatch b2 = again.Build({{0, prompt}});
  b2.num_logits = b.num_logits;
  b2.logit_indices = every.data();
  ASSERT_TRUE(be.Forward(b2, batch, &got).ok());
  ASSERT_EQ(got.rows.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(got.rows[i].status.ok()) << got.rows[i].status;
    EXPECT_EQ(got.rows[i].result.token_id, want.rows[i].result.token_id);
    if (rows[i].score_token < 0) continue;
    EXPECT_NEAR(got.rows[i].result.logprob, want.rows[i].result.logprob, 1e-4);
    EXPECT_EQ(got.rows[i].result.rank, want.rows[i].result.rank);
    ASSERT_EQ(got.rows[i].result.num_top_logprobs, 3);
  }
}

TEST_P(CudaBackendGpuTest, GeneratedWeightsServeFiniteLogits) {
  if (!HasGpu()) GTEST_SKIP() << "no CUDA device";
  const ModelConfig cfg = SmallConfig(GetParam());
  auto gen = MakeGeneratedCheckpoint(cfg, GgmlType::kBF16, 11);
  ASSERT_TRUE(gen.ok()) << gen.status();
  CudaBackendOptions go;
  go.num_kv_blocks = 64;
  go.max_batch_tokens = 256;
  auto gpu = CreateCudaBackend(std::shared_ptr<const ModelCheckpoint>(*std::move(gen)), go);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  Steps steps(16, cfg.max_position_embeddings / 16);
  steps.AddSeq();
  std::mt19937 rng(5);
  std::vector<float> logits(cfg.vocab_size, NAN);
  ASSERT_TRUE((*gpu)->ForwardLogits(steps.Build({{0, RandomTokens(50, rng)}}), logits.data()).ok());
  float lo = INFINITY, hi = -INFINITY;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_LT(lo, hi);  // not a constant row: the weights were written
}

INSTANTIATE_TEST_SUITE_P(Shapes, CudaBackendGpuTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "qwen2" : "llama"; });

}  // namespace
}  // namespace pagellm
