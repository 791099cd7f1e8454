// LoRA adapters against the reference implementation of their format: Hugging Face transformers
// with peft, which applies the adapter unmerged in fp32 (tests/data/lora/peft_smollm2.json, made
// by tools/fixtures/make_lora_fixture.py from the seeded adapter of tools/fixtures/
// make_test_lora.py, which tools/prepare_models.sh writes to models/). On both layouts of the
// F32 base -- GGUF, whose Q/K rows llama.cpp permuted (the adapter's B rows must follow), and
// the Hugging Face directory -- pagellm must
//   - continue each prompt with the adapter as peft does, and without it as the base model does,
//     with both kinds of request in the same batches (multi-LoRA serving);
//   - agree with peft's teacher-forced top-1 wherever peft is not at a near-tie;
//   - never hand the base model's cached KV to an adapter's request, or the reverse, while
//     requests of the same adapter share theirs;
//   - refuse an adapter it does not serve;
//   - load and unload adapters while serving (runtime LoRA updating): an unloaded adapter is
//     refused at once while its running requests finish as peft's, its slot is freed after the
//     last, and an adapter loaded into it continues as peft's;
//   - serve more adapters than it has slots (--max-cpu-loras above --max-loras): adapters move
//     in and out of the one slot as their requests run, each request continuing as peft's with
//     its own adapter;
//   - serve more adapters than host memory holds (--max-cpu-loras below the adapters served):
//     an adapter without requests lets go of its weights, and a request for it waits while they
//     are read again, then continues as peft's.
// With PAGELLM_TEST_TP=3 (ctest lora_test_tp3) the same runs over a tensor-parallel group, each
// rank applying its slice of the adapter.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_util.h"

namespace pagellm {
namespace {

constexpr char kFixture[] = "tests/data/lora/peft_smollm2.json";
constexpr char kAdapter[] = "models/SmolLM2-135M-Instruct-lora-test";

class LoraTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    PAGELLM_SKIP_WITHOUT_MODEL(GetParam());
    PAGELLM_SKIP_WITHOUT_MODEL(kAdapter);
    std::ifstream in(kFixture);
    ASSERT_TRUE(in) << kFixture;
    fixture_ = nlohmann::json::parse(in);
    CpuBackendOptions o;
    o.threads = 2;
    o.kv_cache_dtype = "f32";  // as the reference
    o.num_kv_blocks = 256;
    auto m = testing::OpenModel(GetParam(), o, {{"test-lora", kAdapter}});
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    ASSERT_EQ(model_.backend->adapter_names(), std::vector<std::string>{"test-lora"});
  }

  // Greedy continuations, n_gen tokens each, ignore_eos: request "l<i>" with the adapter and
  // "b<i>" without, for every case, in the order `order` gives ("lb": interleaved, all added
  // before the first step; "b,l": every base request run to the end first).
  struct Run {
    std::vector<std::vector<int32_t>> lora, base;
    EngineStats first, second;
  };
  Run Generate(bool base_first) {
    Run r;
    const size_t n = fixture_["cases"].size();
    r.lora.resize(n);
    r.base.resize(n);
    auto engine = Engine::Create(model_.backend.get(), model_.tokenizer.get(), EngineOptions());
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return r;
    auto add = [&](bool lora) {
      for (size_t i = 0; i < n; ++i) {
        SamplingParams p = testing::GreedyParams(fixture_["n_gen"].get<int>());
        if (lora) p.lora_adapter = "test-lora";
        const auto ids = fixture_["cases"][i]["prompt_ids"].get<std::vector<int32_t>>();
        ASSERT_TRUE((*engine)->AddRequest(absl::StrCat(lora ? "l" : "b", i), ids, p).ok());
      }
    };
    auto drain = [&](EngineStats* stats) {
      auto run = testing::RunEngine(engine->get());
      ASSERT_TRUE(run.ok()) << run.status();
      for (const auto& [key, tokens] : run->tokens) {
        const size_t i = std::stoul(key.first.substr(1));
        (key.first[0] == 'l' ? r.lora : r.base)[i] = tokens;
      }
      *stats = run->stats;
    };
    if (base_first) {
      add(false);
      drain(&r.first);
      add(true);
      drain(&r.second);
    } else {
      add(true);
      add(false);
      drain(&r.first);
    }
    return r;
  }

  // Continuations identical to the reference's, all but at most one (a near-tie may go either
  // way between two fp32 implementations), and the mean common prefix close to the whole.
  void ExpectMatches(const std::vector<std::vector<int32_t>>& got, const char* key,
                     const char* what) {
    int identical = 0;
    size_t prefix = 0, total = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const auto want = fixture_["cases"][i][key].get<std::vector<int32_t>>();
      size_t k = 0;
      while (k < want.size() && k < got[i].size() && got[i][k] == want[k]) ++k;
      prefix += k;
      total += want.size();
      if (got[i] == want) {
        ++identical;
      } else {
        std::printf("%s: case %s leaves peft at token %zu\n", what,
                    fixture_["cases"][i]["name"].get<std::string>().c_str(), k);
      }
    }
    std::printf("%s: %d/%zu continuations identical to peft, common prefix %zu/%zu tokens\n", what,
                identical, got.size(), prefix, total);
    EXPECT_GE(identical + 1, static_cast<int>(got.size())) << what;
    EXPECT_GE(prefix * 10, total * 9) << what;
  }
  // Three adapters under the names "first", "muted" and "second", as read from kAdapter.
  // "muted" has B = 0: it must write what the base model writes, so a request run with another
  // adapter's weights shows. (A tensor-parallel group's followers read adapters from their
  // directories: there, the same weights under three names.)
  std::map<std::string, std::shared_ptr<const LoraAdapter>> ThreeAdapters() {
    std::map<std::string, std::shared_ptr<const LoraAdapter>> out;
    for (const char* name : {"first", "second"}) {
      auto a = model_.load_lora({name, kAdapter});
      EXPECT_TRUE(a.ok()) << a.status();
      if (!a.ok()) return {};
      out[name] = *a;
    }
    auto muted = std::make_shared<LoraAdapter>(*out["second"]);
    muted->name = "muted";
    for (auto& layer : muted->layers) {
      for (LoraMatrix& m : layer) {
        if (!tp()) std::fill(m.bt.begin(), m.bt.end(), 0.0f);
      }
    }
    out["muted"] = muted;
    return out;
  }
  [[nodiscard]] bool tp() const { return model_.backend->tensor_parallel_size() > 1; }

  // The first `n` cases' requests for each of the ThreeAdapters and the base model, all queued
  // before the first step, run (testing::RunEngine with `between_steps`); then each one's
  // continuations against peft's, and no block left.
  void RunThreeAdaptersAndTheBase(Engine& e, size_t n, const char* how,
                                  const std::function<bool()>& between_steps, EngineStats* stats) {
    const std::vector<std::string> adapters = {"first", "muted", "second", ""};
    for (size_t i = 0; i < n; ++i) {
      for (size_t a = 0; a < adapters.size(); ++a) {
        SamplingParams p = testing::GreedyParams(fixture_["n_gen"].get<int>());
        p.lora_adapter = adapters[a];
        const auto ids = fixture_["cases"][i]["prompt_ids"].get<std::vector<int32_t>>();
        ASSERT_TRUE(e.AddRequest(absl::StrCat(a, "-", i), ids, p).ok());
      }
    }
    auto run = testing::RunEngine(&e, 100000, between_steps);
    ASSERT_TRUE(run.ok()) << run.status();
    std::vector<std::vector<std::vector<int32_t>>> got(adapters.size(),
                                                       std::vector<std::vector<int32_t>>(n));
    for (const auto& [key, tokens] : run->tokens) {
      const size_t dash = key.first.find('-');
      got[std::stoul(key.first.substr(0, dash))][std::stoul(key.first.substr(dash + 1))] = tokens;
    }
    ExpectMatches(got[0], "lora_greedy", absl::StrCat("first of three adapters, ", how).c_str());
    ExpectMatches(got[1], tp() ? "lora_greedy" : "base_greedy",
                  absl::StrCat("muted, between the others, ", how).c_str());
    ExpectMatches(got[2], "lora_greedy", absl::StrCat("second of three adapters, ", how).c_str());
    ExpectMatches(got[3], "base_greedy", "the base model beside them");
    EXPECT_EQ(e.num_used_blocks(), 0);
    *stats = run->stats;
  }

  nlohmann::json fixture_;
  testing::TestModel model_;
};

TEST_P(LoraTest, TheFixtureAdapterChangesWhatTheModelWrites) {
  // Otherwise a backend that ignored the adapter would pass the tests below.
  int changed = 0;
  for (const auto& c : fixture_["cases"]) changed += c["lora_greedy"] != c["base_greedy"];
  EXPECT_GE(changed * 4, static_cast<int>(fixture_["cases"].size()) * 3);
}

TEST_P(LoraTest, AdapterAndBaseRequestsInOneBatchContinueAsPeft) {
  const Run r = Generate(/*base_first=*/false);
  ExpectMatches(r.lora, "lora_greedy", "with the adapter");
  ExpectMatches(r.base, "base_greedy", "without it");
}

TEST_P(LoraTest, TeacherForcedTop1AgreesWithPeft) {
  testing::Top1Agreement a;
  for (const auto& c : fixture_["cases"]) {
    std::vector<int32_t> tokens = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto greedy = c["lora_greedy"].get<std::vector<int32_t>>();
    tokens.insert(tokens.end(), greedy.begin(), greedy.end());
    const absl::Status st = testing::AddTop1Agreement(
        model_.backend.get(), tokens, c["tf_top1"].get<std::vector<int32_t>>(),
        c["tf_margin"].get<std::vector<double>>(), 0.05, &a, /*adapter=*/0);
    ASSERT_TRUE(st.ok()) << st;
  }
  const auto [agree, total, confident_agree, confident] = a;
  std::printf(
      "teacher-forced top-1 agreement with peft: %lld/%lld, where its margin is >= 0.05: "
      "%lld/%lld\n",
      static_cast<long long>(agree), static_cast<long long>(total),
      static_cast<long long>(confident_agree), static_cast<long long>(confident));
  EXPECT_EQ(confident_agree, confident);
  EXPECT_GE(agree * 100, total * 99);
}

TEST_P(LoraTest, PrefixCacheIsNeverSharedAcrossAdapters) {
  // The base requests fill the prefix cache first; the adapter's requests of the same prompts
  // must not reuse those blocks (their KV differs), and still continue as peft.
  const Run r = Generate(/*base_first=*/true);
  ExpectMatches(r.base, "base_greedy", "base first");
  ExpectMatches(r.lora, "lora_greedy", "adapter after the base");
  EXPECT_EQ(r.second.prefix_cache_hit_tokens, r.first.prefix_cache_hit_tokens)
      << "the adapter's requests reused the base model's cached prefix";
  // Requests of the same adapter do share: the same prompt again hits the adapter's own blocks.
  auto engine = Engine::Create(model_.backend.get(), model_.tokenizer.get(), EngineOptions());
  ASSERT_TRUE(engine.ok());
  SamplingParams p = testing::GreedyParams(4);
  p.lora_adapter = "test-lora";
  const auto ids = fixture_["cases"][2]["prompt_ids"].get<std::vector<int32_t>>();
  ASSERT_GE(ids.size(), 17u);  // at least one full block of 16 to share
  for (const char* id : {"x", "y"}) {
    ASSERT_TRUE((*engine)->AddRequest(id, ids, p).ok());
    auto run = testing::RunEngine(engine->get());
    ASSERT_TRUE(run.ok()) << run.status();
    if (std::string(id) == "y") {
      EXPECT_GT(run->stats.prefix_cache_hit_tokens, 0);
    }
  }
}

TEST_P(LoraTest, AnAdapterTheBackendDoesNotServeIsRefused) {
  auto engine = Engine::Create(model_.backend.get(), model_.tokenizer.get(), EngineOptions());
  ASSERT_TRUE(engine.ok());
  SamplingParams p = testing::GreedyParams(4);
  p.lora_adapter = "sql-lora";
  const absl::Status st = (*engine)->AddRequest("r", {1, 2, 3}, p);
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_NE(std::string(st.message()).find("test-lora"), std::string::npos) << st;
  EXPECT_FALSE((*engine)->HasUnfinished());
}

TEST_P(LoraTest, AdaptersLoadAndUnloadWhileServing) {
  auto engine = Engine::Create(model_.backend.get(), model_.tokenizer.get(), EngineOptions());
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  // Every backend can (CPU, a tensor-parallel group, CUDA with PAGELLM_TEST_DEVICE=cuda).
  ASSERT_TRUE(model_.backend->adapters_can_change()) << model_.backend->name();
  const size_t n = fixture_["cases"].size();
  auto add = [&](const std::string& adapter, const std::string& prefix) {
    for (size_t i = 0; i < n; ++i) {
      SamplingParams p = testing::GreedyParams(fixture_["n_gen"].get<int>());
      p.lora_adapter = adapter;
      const auto ids = fixture_["cases"][i]["prompt_ids"].get<std::vector<int32_t>>();
      ASSERT_TRUE(e.AddRequest(absl::StrCat(prefix, i), ids, p).ok());
    }
  };
  auto drain = [&](std::vector<std::vector<int32_t>>* got) {
    auto run = testing::RunEngine(&e);
    ASSERT_TRUE(run.ok()) << run.status();
    got->resize(n);
    for (const auto& [key, tokens] : run->tokens) (*got)[std::stoul(key.first.substr(1))] = tokens;
  };

  // Unloaded while its requests run: new ones are refused, the running ones finish with it.
  add("test-lora", "l");
  std::vector<SequenceOutput> outputs;
  ASSERT_TRUE(e.Step(&outputs).ok());
  ASSERT_TRUE(e.UnloadAdapter("test-lora").ok());
  EXPECT_TRUE(e.served_adapters().empty());
  SamplingParams p = testing::GreedyParams(4);
  p.lora_adapter = "test-lora";
  EXPECT_EQ(e.AddRequest("late", {1, 2, 3}, p).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(model_.backend->adapter_names()[0], "test-lora") << "freed while in use";
  std::vector<std::vector<int32_t>> got;
  drain(&got);
  for (size_t i = 0; i < n; ++i) {  // the first step's tokens, then the rest
    std::vector<int32_t> all;
    for (const SequenceOutput& o : outputs) {
      if (o.request_id == absl::StrCat("l", i)) all = o.new_token_ids;
    }
    all.insert(all.end(), got[i].begin(), got[i].end());
    got[i] = all;
  }
  ExpectMatches(got, "lora_greedy", "unloaded while running");
  EXPECT_EQ(model_.backend->adapter_names()[0], "") << "the slot outlived its last request";

  // Loaded again from disk under another name, into the freed slot.
  auto adapter = model_.load_lora({"runtime-lora", kAdapter});
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  ASSERT_TRUE(e.LoadAdapter(*adapter).ok());
  EXPECT_EQ(e.served_adapters(), std::vector<std::string>{"runtime-lora"});
  add("runtime-lora", "r");
  drain(&got);
  ExpectMatches(got, "lora_greedy", "loaded while serving");
  EXPECT_EQ(e.LoadAdapter(*adapter).code(), absl::StatusCode::kAlreadyExists);
  auto other = model_.load_lora({"second", kAdapter});
  ASSERT_TRUE(other.ok());
  const absl::Status full = e.LoadAdapter(*other);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_EQ(e.num_used_blocks(), 0);
}

TEST_P(LoraTest, ServesMoreAdaptersThanSlotsMovingThemAsRequestsNeed) {
  if (std::string(GetParam()).ends_with("-hf")) GTEST_SKIP() << "the base's layout plays no part";
  EngineOptions o;
  o.max_cpu_loras = 3;
  auto engine = Engine::Create(model_.backend.get(), model_.tokenizer.get(), o);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  ASSERT_TRUE(e.UnloadAdapter("test-lora").ok());  // its slot now takes adapters that move
  // Three adapters, one slot.
  auto three = ThreeAdapters();
  ASSERT_EQ(three.size(), 3u);
  for (const char* name : {"first", "muted", "second"}) {
    ASSERT_TRUE(e.LoadAdapter(three[name]).ok()) << name;
  }
  auto fourth = model_.load_lora({"fourth", kAdapter});
  ASSERT_TRUE(fourth.ok());
  // Without an adapter reader, none can let go of its weights.
  EXPECT_EQ(e.LoadAdapter(*fourth).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(e.served_adapters().size(), 3u);
  EngineStats stats;
  RunThreeAdaptersAndTheBase(e, fixture_["cases"].size(), "in one slot", nullptr, &stats);
  // Each adapter went into the slot (the first at its load, the others when their requests ran).
  EXPECT_GE(stats.lora_slot_loads, 3);
}

TEST_P(LoraTest, ServesMoreAdaptersThanHostMemoryHoldsReadingThemAgainWhenNeeded) {
  if (std::string(GetParam()).ends_with("-hf")) GTEST_SKIP() << "the base's layout plays no part";
  EngineOptions o;
  o.max_cpu_loras = 1;  // one adapter in host memory (and in the one slot) at a time
  auto engine = Engine::Create(model_.backend.get(), model_.tokenizer.get(), o);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  ASSERT_TRUE(e.UnloadAdapter("test-lora").ok());
  // The "disk": what a read of each adapter's directory gives (a new copy each time, as a read
  // would).
  auto disk = ThreeAdapters();
  ASSERT_EQ(disk.size(), 3u);
  struct Read {
    int32_t id;
    uint64_t ticket;
    std::string name;
  };
  std::vector<Read> reads;
  e.set_adapter_reader([&](int32_t id, uint64_t ticket, const LoraModuleSpec& spec) {
    reads.push_back({id, ticket, spec.name});
  });
  // Each load lets go of the one before (none has requests yet).
  for (const char* name : {"first", "muted", "second"}) {
    ASSERT_TRUE(e.LoadAdapter(disk[name]).ok()) << name;
  }
  EXPECT_EQ(e.served_adapters().size(), 3u);
  std::vector<std::string> read_order;
  EngineStats stats;
  // Over three ranks (lora_test_tp3) three prompts of the eight show the same, in less time.
  RunThreeAdaptersAndTheBase(
      e, tp() ? 3 : fixture_["cases"].size(), "one held at a time",
      [&] {
        std::vector<Read> due;
        due.swap(reads);
        for (const Read& r : due) {
          read_order.push_back(r.name);
          std::vector<std::string> failed;
          e.AdapterRead(r.id, r.ticket, std::make_shared<LoraAdapter>(*disk.at(r.name)), &failed);
          EXPECT_TRUE(failed.empty());
        }
        return !due.empty();
      },
      &stats);
  // Each adapter was read again once, in the order its requests came, when the one before had
  // no request left.
  EXPECT_EQ(read_order, (std::vector<std::string>{"first", "muted", "second"}));
  EXPECT_EQ(stats.lora_adapter_reads, 3);
}

INSTANTIATE_TEST_SUITE_P(BaseLayouts, LoraTest,
                         ::testing::Values("models/SmolLM2-135M-Instruct.F32.gguf",
                                           "models/SmolLM2-135M-Instruct-hf"),
                         [](const auto& info) { return info.index == 0 ? "Gguf" : "HfDir"; });

}  // namespace
}  // namespace pagellm
