// write_file_atomic: the whole file or nothing, and a clear error naming it.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"
#include "test_util.h"

namespace mtp {
namespace {

namespace fs = std::filesystem;

TEST(WriteFileAtomic, ReplacesTheFileWhole) {
  const std::string dir = test::temp_dir("atomic-write");
  const std::string path = dir + "/f.json";
  write_file_atomic(path, "first");
  write_file_atomic(path, "second, longer");
  EXPECT_EQ(read_file(path), "second, longer");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
}

TEST(WriteFileAtomic, ADirectoryIsRefusedAndNothingIsLeft) {
  const std::string dir = test::temp_dir("atomic-write-dir");
  fs::create_directories(dir + "/sub");
  for (const std::string& p : {dir + "/sub", dir + "/sub/"}) {
    test::expect_error<IoError>([&] { write_file_atomic(p, "x"); }, {"is a directory", "sub"});
  }
  EXPECT_TRUE(fs::is_empty(dir + "/sub"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
}

TEST(WriteFileAtomic, AMissingFolderNamesThePath) {
  const std::string dir = test::temp_dir("atomic-write-missing");
  test::expect_error<IoError>([&] { write_file_atomic(dir + "/no/such/f", "x"); }, {"no/such/f"});
}

TEST(ReadFile, ADirectoryIsAnErrorNotAnEmptyFile) {
  const std::string dir = test::temp_dir("read-dir");
  test::expect_error<IoError>([&] { read_file(dir); }, {"is a directory", dir});
}

}  // namespace
}  // namespace mtp
