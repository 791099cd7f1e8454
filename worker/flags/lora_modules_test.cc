#include "worker/flags/lora_modules.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm::cli {
namespace {

using ::testing::HasSubstr;

TEST(LoraModulesTest, ReadsVllmsNameEqualsPathEntries) {
  auto m = ParseLoraModules({"sql-lora=/adapters/sql", "", "org/chat:v2=rel/dir=with=equals"});
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].name, "sql-lora");
  EXPECT_EQ((*m)[0].path, "/adapters/sql");
  EXPECT_EQ((*m)[1].name, "org/chat:v2");
  EXPECT_EQ((*m)[1].path, "rel/dir=with=equals");  // only the first '=' separates
  EXPECT_TRUE(ParseLoraModules({}).value().empty());
}

TEST(LoraModulesTest, RefusesMalformedNamesAndDuplicates) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"/just/a/path"}, "is not NAME=PATH"}, {{"=/p"}, "is not NAME=PATH"},
      {{"name="}, "is not NAME=PATH"},        {{"has space=/p"}, "may hold only"},
      {{"quote\"=/p"}, "may hold only"},      {{std::string(129, 'a') + "=/p"}, "over 128 bytes"},
      {{"a=/p", "a=/q"}, "names 'a' twice"},
  };
  for (const auto& [entries, words] : bad) {
    const absl::Status st = ParseLoraModules(entries).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << entries[0];
    EXPECT_THAT(std::string(st.message()), HasSubstr(words)) << entries[0];
  }
  std::vector<std::string> many;
  for (int i = 0; i <= kMaxLoraModules; ++i) many.push_back("a" + std::to_string(i) + "=/p");
  EXPECT_THAT(std::string(ParseLoraModules(many).status().message()), HasSubstr("at most 64"));
}

}  // namespace
}  // namespace pagellm::cli
