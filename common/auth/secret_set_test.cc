#include "common/auth/secret_set.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

TEST(SecretSetTest, ContainsExactlyTheGivenSecrets) {
  absl::StatusOr<SecretSet> set = SecretSet::FromList({"key-one", "key-two"});
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->Contains("key-one"));
  EXPECT_TRUE(set->Contains("key-two"));
  EXPECT_FALSE(set->Contains("key-on"));
  EXPECT_FALSE(set->Contains("key-one "));
  EXPECT_FALSE(set->Contains(""));
  EXPECT_FALSE(set->Contains(std::string(SecretSet::kMaxSecretBytes + 1, 'k')));
  EXPECT_FALSE(SecretSet().Contains("key-one")) << "an empty set accepts nothing";
}

TEST(SecretSetTest, RefusesEmptyAndOverlongSecrets) {
  EXPECT_FALSE(SecretSet::FromList({""}).ok());
  EXPECT_FALSE(SecretSet::FromList({std::string(SecretSet::kMaxSecretBytes + 1, 'k')}).ok());
}

TEST(SecretSetTest, FileHasOneSecretPerLineWithCommentsAndBlanks) {
  const std::string path = ::testing::TempDir() + "/keys.txt";
  {
    std::ofstream out(path);
    out << "# team A\n  alpha-key  \n\nbeta-key\n";
  }
  absl::StatusOr<SecretSet> set = SecretSet::FromFile(path);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->size(), 2u);
  EXPECT_TRUE(set->Contains("alpha-key"));
  EXPECT_FALSE(set->Contains("# team A"));
  EXPECT_EQ(SecretSet::FromFile(path + ".missing").status().code(), absl::StatusCode::kNotFound);
  std::remove(path.c_str());
}

TEST(SecretSetTest, BearerTokenTakesTheSchemeCaseInsensitively) {
  EXPECT_EQ(SecretSet::BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(SecretSet::BearerToken("bearer  abc "), "abc");
  EXPECT_EQ(SecretSet::BearerToken("Basic abc"), "");
  EXPECT_EQ(SecretSet::BearerToken("Bearer "), "");
  EXPECT_EQ(SecretSet::BearerToken(""), "");
}

}  // namespace
}  // namespace pagellm
