#include "common/tokenizer/string_table.h"

#include <string>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

using namespace std::string_literals;

TEST(StringTableTest, IdsReadBackTheirTextsIncludingEmptyAndNulBytes) {
  StringTable t;
  for (const std::string& s : {"a"s, ""s, "\0b"s, "Ġthe"s, "a"s}) ASSERT_TRUE(t.Add(s).ok());
  ASSERT_EQ(t.size(), 5);
  EXPECT_EQ(t[0], "a");
  EXPECT_EQ(t[1], "");
  EXPECT_EQ(t[2], "\0b"s);
  EXPECT_EQ(t[3], "Ġthe");
  EXPECT_EQ(t[4], "a");
}

TEST(StringTableTest, FindsOnlyIndexedIdsAndReportsTheFirstOfADuplicate) {
  StringTable t;
  for (const char* s : {"x", "y", "z", "y"}) ASSERT_TRUE(t.Add(s).ok());
  EXPECT_EQ(t.Find("x"), -1);  // nothing indexed yet
  EXPECT_EQ(t.Index(0), -1);
  EXPECT_EQ(t.Index(1), -1);
  EXPECT_EQ(t.Index(3), 1);  // "y" is id 1 already; 3 stays unindexed
  EXPECT_EQ(t.Find("x"), 0);
  EXPECT_EQ(t.Find("y"), 1);
  EXPECT_EQ(t.Find("z"), -1);  // never indexed
  EXPECT_EQ(t.Find("xy"), -1);
  EXPECT_EQ(t.Find(""), -1);
}

TEST(StringTableTest, ManyTextsStayFindableAsTheIndexGrows) {
  StringTable t;
  for (int i = 0; i < 20000; ++i) ASSERT_TRUE(t.Add(std::to_string(i * 7)).ok());
  for (int i = 0; i < t.size(); ++i) ASSERT_EQ(t.Index(i), -1);
  for (int i = 0; i < 20000; ++i) ASSERT_EQ(t.Find(std::to_string(i * 7)), i);
  EXPECT_EQ(t.Find("3"), -1);
}

}  // namespace
}  // namespace pagellm
