#include "worker/model/mapped_file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace pagellm {
namespace {

// Resident kB of the mapping that contains `p`, from /proc/self/smaps; -1 if not found.
int64_t ResidentKb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find('-') < 17) {
      inside = addr >= lo && addr < hi;
      continue;
    }
    long kb = 0;
    if (inside && std::sscanf(line.c_str(), "Rss: %ld kB", &kb) == 1) return kb;
  }
  return -1;
}

class MappedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/mapped_file_test.bin";
    std::ofstream out(path_, std::ios::binary);
    for (int i = 0; i < (1 << 20); ++i) out.put(static_cast<char>(i * 7 + 3));
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

uint64_t Checksum(const MappedFile& f) {
  uint64_t h = 0;
  for (uint64_t i = 0; i < f.size(); ++i) h = h * 31 + f.data()[i];
  return h;
}

TEST_F(MappedFileTest, DroppedPagesLeaveTheResidentSetAndReadBackTheSame) {
  auto f = MappedFile::Open(path_, "test");
  ASSERT_TRUE(f.ok()) << f.status();
  const uint64_t before = Checksum(**f);  // touches every page
  ASSERT_GE(ResidentKb((*f)->data()), 1000);
  (*f)->DropPages((*f)->data(), (*f)->size());
  EXPECT_LE(ResidentKb((*f)->data()), 8);
  EXPECT_EQ(before, Checksum(**f));  // read from the file again
}

TEST_F(MappedFileTest, OnlyWholePagesInsideTheRangeAreDropped) {
  auto f = MappedFile::Open(path_, "test");
  ASSERT_TRUE(f.ok()) << f.status();
  const uint64_t sum = Checksum(**f);  // touches every page
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  const int64_t all = ResidentKb((*f)->data());
  ASSERT_GE(all, 1000);
  // Half a page short at each end: the partial pages stay.
  (*f)->DropPages((*f)->data() + page / 2, 4 * page);
  EXPECT_EQ(all - 3 * page / 1024, ResidentKb((*f)->data()));
  // Ranges past the end, empty and null ones are ignored.
  (*f)->DropPages((*f)->data() + (*f)->size(), 1 << 20);
  (*f)->DropPages((*f)->data(), 0);
  (*f)->DropPages(nullptr, 1 << 20);
  EXPECT_EQ(all - 3 * page / 1024, ResidentKb((*f)->data()));
  EXPECT_EQ(sum, Checksum(**f));
}

TEST_F(MappedFileTest, OwnedBytesAreNeverDropped) {
  std::string bytes(1 << 16, 'x');
  auto f = MappedFile::FromBytes(bytes);
  f->DropPages(f->data(), f->size());  // would zero anonymous memory
  EXPECT_EQ(bytes, std::string(reinterpret_cast<const char*>(f->data()), f->size()));
}

}  // namespace
}  // namespace pagellm
