// write_file_atomic: the whole file or nothing, and a clear error naming it.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <thread>

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

// A file this process has mapped is an input: writers refuse to replace it,
// by any spelling (a link, "./"), and write it again once the map is gone.
TEST(WriteFileAtomic, AFileMappedNowIsRefused) {
  const std::string dir = test::temp_dir("atomic-write-mapped");
  const std::string path = dir + "/weights.bin";
  write_file_atomic(path, "the input");
  fs::create_symlink(path, dir + "/link.bin");
  {
    MappedFile m(path);
    for (const std::string& p : {path, dir + "/./weights.bin", dir + "/link.bin"}) {
      test::expect_error<InputError>([&] { write_file_atomic(p, "output"); },
                                     {"refusing to write", "reading it"});
    }
    MappedFile moved = std::move(m);  // the registry follows the mapping
    test::expect_error<InputError>([&] { write_file_atomic(path, "output"); }, {"reading it"});
    write_file_atomic(dir + "/other.bin", "output");  // another file is fine
  }
  EXPECT_EQ(read_file(path), "the input");
  write_file_atomic(path, "output");
  EXPECT_EQ(read_file(path), "output");
}

// A write larger than the folder's free space is refused before a byte is
// written (widen --shape layers=100000 filled the disk first).
TEST(WriteFileAtomic, MoreBytesThanTheFolderHasFreeAreRefused) {
  const std::string dir = test::temp_dir("atomic-write-space");
  test::expect_error<IoError>([&] { check_free_space(dir + "/big.bin", uint64_t(1) << 62); },
                              {"big.bin", "GB free"});
  check_free_space(dir + "/small.bin", 1);
  EXPECT_TRUE(fs::is_empty(dir));
}

// A device never ends (/dev/zero grew the read by 200 MB/s until killed): it
// is refused; a pipe (`-f <(cmd)`) is read to its end.
TEST(ReadFile, ADeviceIsRefusedAPipeIsRead) {
  if (fs::exists("/dev/zero")) {
    test::expect_error<IoError>([] { read_file("/dev/zero"); }, {"/dev/zero", "device"});
  }
  const std::string fifo = test::temp_dir("read-fifo") + "/p";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::FILE* f = std::fopen(fifo.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("from a pipe", f);
    std::fclose(f);
  });
  EXPECT_EQ(read_file(fifo), "from a pipe");
  writer.join();
}

}  // namespace
}  // namespace mtp
