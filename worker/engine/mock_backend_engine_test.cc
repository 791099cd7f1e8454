#include <vector>

#include "gtest/gtest.h"
#include "worker/backend/mock/mock_backend.h"
#include "worker/engine/engine.h"

namespace pagellm {
namespace {

TEST(MockBackendTest, GeneratesDeterministicPrintableTextThroughTheEngine) {
  auto tokenizer = MockTokenizer();
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->Decode((*tokenizer)->Encode("héllo", false, false), true), "héllo");
  MockBackendOptions o;
  o.num_kv_blocks = 64;
  auto backend = CreateMockBackend(o);
  ASSERT_TRUE(backend.ok()) << backend.status();
  std::string texts[2];
  for (std::string& text : texts) {
    auto engine = Engine::Create(backend->get(), tokenizer->get(), EngineOptions());
    ASSERT_TRUE(engine.ok()) << engine.status();
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = 20;
    ASSERT_TRUE((*engine)->AddRequest("r", (*tokenizer)->Encode("abc", false, false), p).ok());
    std::vector<SequenceOutput> outs;
    while ((*engine)->HasUnfinished()) ASSERT_TRUE((*engine)->Step(&outs).ok());
    for (const SequenceOutput& out : outs) text += out.text;
    EXPECT_EQ(outs.back().finish_reason, FinishReason::kLength);
  }
  EXPECT_EQ(texts[0].size(), 20u);
  EXPECT_EQ(texts[0], texts[1]);
  for (char c : texts[0]) EXPECT_TRUE(c >= 32 && c < 127) << static_cast<int>(c);
}

TEST(MockBackendTest, RejectsBadSizes) {
  MockBackendOptions o;
  o.num_kv_blocks = 0;
  EXPECT_FALSE(CreateMockBackend(o).ok());
}

}  // namespace
}  // namespace pagellm
