#include "common/shared_library.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pagellm {
namespace {

using ::testing::HasSubstr;

TEST(SharedLibraryTest, OpensTheFirstLibraryFoundAndReadsItsSymbols) {
  auto lib = SharedLibrary::Open({"libpagellm-no-such.so", "libm.so.6"}, "libm", "a hint");
  ASSERT_TRUE(lib.ok()) << lib.status();
  double (*cosine)(double) = nullptr;
  ASSERT_TRUE(lib->Get(&cosine, "cos").ok());
  EXPECT_EQ(cosine(0.0), 1.0);
  int (*missing)() = nullptr;
  const absl::Status s = lib->Get(&missing, "pagellm_no_such_symbol");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("libm has no pagellm_no_such_symbol"));
}

TEST(SharedLibraryTest, SaysWhatIsMissingAndWhatToDo) {
  auto lib = SharedLibrary::Open({"libpagellm-no-such.so.1", "libpagellm-no-such.so"}, "NoSuch",
                                 "install it");
  ASSERT_EQ(lib.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(lib.status().message(), HasSubstr("cannot load NoSuch"));
  EXPECT_THAT(lib.status().message(), HasSubstr("libpagellm-no-such.so.1"));
  EXPECT_THAT(lib.status().message(), HasSubstr("install it"));
}

}  // namespace
}  // namespace pagellm
