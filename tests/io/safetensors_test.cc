// safetensors reader/writer and sharded TensorSet: round trips, and every kind
// of damaged input giving a typed error (never a crash).
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace mtp::io {
namespace {

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// A safetensors file from a header string and a data section; `len` overrides
// the length field.
std::string raw(const std::string& header, const std::string& data, int64_t len = -1) {
  uint64_t n = len < 0 ? header.size() : uint64_t(len);
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

using test::expect_error;

struct Sample {
  std::vector<float> f32 = {1.5f, -2.f, 3.25f, 0.f, 1e-3f, -7.f};
  std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x4049, 0x0001};
  std::vector<int32_t> i32 = {1, -2, 70000, 4};
  std::vector<uint8_t> u8 = {7, 8, 9};  // odd size: later tensors are unaligned
  std::vector<int64_t> i64 = {-5};
  std::vector<float> empty;
  std::vector<TensorView> views() const {
    return {make_view("w.f32", DType::F32, {2, 3}, f32), make_view("a.bf16", DType::BF16, {4}, bf16),
            make_view("z.i32", DType::I32, {2, 2}, i32), make_view("m.u8", DType::U8, {3}, u8),
            make_view("scalar", DType::I64, {}, i64), make_view("empty", DType::F32, {0, 5}, empty)};
  }
};

TEST(Safetensors, RoundTrip) {
  std::string dir = test::temp_dir("st-rt");
  std::string path = dir + "/x.safetensors";
  Sample s;
  Metadata meta = {{"format", "pt"}, {"config", R"({"k": 2})"}};
  write_safetensors(path, s.views(), meta);

  SafetensorsFile f(path);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"a.bf16", "empty", "m.u8", "scalar", "w.f32", "z.i32"}));
  EXPECT_EQ(f.metadata(), meta);
  for (const TensorView& want : s.views()) {
    const TensorView& got = f.get(want.name);
    EXPECT_EQ(got.dtype, want.dtype) << want.name;
    EXPECT_EQ(got.shape, want.shape) << want.name;
    ASSERT_EQ(got.nbytes, want.nbytes) << want.name;
    if (want.nbytes) EXPECT_EQ(std::memcmp(got.data, want.data, want.nbytes), 0) << want.name;
  }
  EXPECT_EQ(f.get("scalar").numel(), 1u);
  EXPECT_EQ(f.get("empty").numel(), 0u);

  // Layout: 8-aligned header padded with spaces, tensors in name order.
  std::string bytes = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes[8], '{');
  std::string header = bytes.substr(8, n);
  EXPECT_EQ(header.find_last_not_of(' ') + 1, header.find_last_of('}') + 1);
  json h = json::parse(header);
  EXPECT_EQ(h["a.bf16"]["data_offsets"], json({0, 8}));
  EXPECT_EQ(h["empty"]["data_offsets"], json({8, 8}));
  // Nothing but the file is left in the folder (no temporaries).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
}

TEST(Safetensors, OverwriteReplacesWholeFile) {
  std::string path = test::temp_dir("st-ow") + "/x.safetensors";
  std::vector<float> a(100, 1.f), b = {2.f};
  write_safetensors(path, {make_view("a", DType::F32, {100}, a)});
  write_safetensors(path, {make_view("b", DType::F32, {1}, b)});
  SafetensorsFile f(path);
  EXPECT_EQ(f.names(), std::vector<std::string>{"b"});
  EXPECT_EQ(*static_cast<const float*>(f.get("b").data), 2.f);
}

TEST(Safetensors, WriterRejectsBadInput) {
  std::string dir = test::temp_dir("st-wbad");
  std::vector<float> v(4);
  expect_error<ShapeError>([&] { write_safetensors(dir + "/a", {make_view("t", DType::F32, {5}, v)}); },
                           {"'t'", "20 bytes", "16"});
  expect_error<InputError>([&] {
    write_safetensors(dir + "/a", {make_view("t", DType::F32, {4}, v), make_view("t", DType::F32, {4}, v)});
  }, {"'t' given twice"});
  expect_error<InputError>(
      [&] { write_safetensors(dir + "/a", {make_view("__metadata__", DType::F32, {4}, v)}); },
      {"__metadata__"});
  expect_error<InputError>([&] { write_safetensors(dir + "/a", {make_view("bad\xff", DType::F32, {4}, v)}); },
                           {"UTF-8"});
  expect_error<IoError>([&] { write_safetensors(dir + "/no/such/dir/a", {}); }, {"no/such/dir"});
  EXPECT_FALSE(fs::exists(dir + "/a"));
}

TEST(Safetensors, MissingFile) {
  expect_error<IoError>([] { SafetensorsFile("/nonexistent/x.safetensors"); },
                        {"/nonexistent/x.safetensors"});
}

TEST(Safetensors, EveryTruncationIsATypedError) {
  std::string dir = test::temp_dir("st-trunc");
  std::string path = dir + "/full.safetensors";
  Sample s;
  write_safetensors(path, s.views(), {{"format", "pt"}});
  std::string full = read_file(path);
  uint64_t n = 0;
  std::memcpy(&n, full.data(), 8);
  for (size_t len = 0; len < full.size(); ++len) {
    std::string p = dir + "/t.safetensors";
    write_bytes(p, full.substr(0, len));
    try {
      SafetensorsFile f(p);
      ADD_FAILURE() << "truncated to " << len << " of " << full.size() << " bytes: no error";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }
  // The messages at the three characteristic points.
  std::string p = dir + "/t.safetensors";
  write_bytes(p, full.substr(0, 5));
  expect_error<IoError>([&] { SafetensorsFile{p}; }, {"truncated", "8-byte"});
  write_bytes(p, full.substr(0, 8 + n / 2));
  expect_error<IoError>([&] { SafetensorsFile{p}; }, {"truncated", "header needs"});
  write_bytes(p, full.substr(0, full.size() - 1));
  expect_error<IoError>([&] { SafetensorsFile{p}; }, {"truncated", "z.i32"});
}

class BadHeader : public ::testing::Test {
 protected:
  std::string open(const std::string& bytes) {
    path_ = test::temp_dir("st-bad") + "/bad.safetensors";
    write_bytes(path_, bytes);
    return path_;
  }
  std::string path_;
};

TEST_F(BadHeader, CorruptJson) {
  std::string p = open(raw(R"({"t": {"dtype": "F32", )", ""));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {"corrupt JSON header", p});
}

TEST_F(BadHeader, NotAnObject) {
  std::string p = open(raw("[1, 2, 3]", ""));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {"JSON object"});
  p = open(raw(R"({"t": 5})", ""));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {"'t'", "malformed"});
}

TEST_F(BadHeader, HugeHeaderLength) {
  std::string p = open(raw("{}", "", int64_t(1) << 40));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {"not a safetensors file"});
}

TEST_F(BadHeader, UnknownDtype) {
  std::string p = open(raw(R"({"t":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", "abcd"));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {"'t'", "unknown dtype 'F33'"});
}

TEST_F(BadHeader, UnsupportedDtypeOpensButRefusesLookup) {
  std::string p = open(raw(R"({"d":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
                           R"("f":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                           std::string(12, '\0')));
  SafetensorsFile f(p);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"d", "f"}));
  EXPECT_TRUE(f.contains("d"));
  EXPECT_NE(f.find("f"), nullptr);
  expect_error<ShapeError>([&] { f.get("d"); }, {"'d'", "F64"});
}

TEST_F(BadHeader, OffsetsOutOfRange) {
  std::string p = open(raw(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abcd"));
  expect_error<IoError>([&] { SafetensorsFile{p}; }, {"'t'", "[0, 8]", "4-byte data section"});
  p = open(raw(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", "abcd"));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {"'t'", "begin > end"});
  p = open(raw(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", "abcd"));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {"'t'", "non-negative"});
}

TEST_F(BadHeader, SizeMismatch) {
  std::string p = open(raw(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {"'t'", "needs 8 bytes", "span 4"});
  p = open(raw(R"({"t":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,4]}})",
               "abcd"));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {"'t'", "too many"});
}

TEST_F(BadHeader, Overlap) {
  std::string p = open(raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                           std::string(12, '\0')));
  expect_error<FormatError>([&] { SafetensorsFile{p}; }, {"'a'", "'b'", "overlap"});
}

TEST_F(BadHeader, MalformedEntries) {
  auto check = [&](const std::string& header, const std::string& what) {
    std::string p = open(raw(header, std::string(8, '\0')));
    expect_error<FormatError>([&] { SafetensorsFile{p}; }, {what});
  };
  check(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})", "'shape'");
  check(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "non-negative");
  check(R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "non-negative");
  check(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "data_offsets");
  check(R"({"t":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", "'dtype'");
  check(R"({"__metadata__":{"a":1}})", "__metadata__");
  check(R"({"__metadata__":[1]})", "__metadata__");
}

TEST(Safetensors, MissingTensorNamesTensorAndFile) {
  std::string path = test::temp_dir("st-miss") + "/x.safetensors";
  std::vector<float> v = {1.f};
  write_safetensors(path, {make_view("a", DType::F32, {1}, v)});
  SafetensorsFile f(path);
  EXPECT_EQ(f.find("b"), nullptr);
  expect_error<FormatError>([&] { f.get("b"); }, {"'b'", path});
}

// ------------------------------------------------------------------ TensorSet

// Writes shards {file: {tensor: value}} and an index listing them.
void write_sharded(const std::string& dir, const std::map<std::string, std::map<std::string, float>>& shards,
                   json weight_map = nullptr) {
  json wm = json::object();
  for (auto& [file, tensors] : shards) {
    std::vector<std::vector<float>> bufs;
    std::vector<TensorView> views;
    bufs.reserve(tensors.size());
    for (auto& [name, val] : tensors) {
      bufs.push_back({val, val + 1});
      views.push_back(make_view(name, DType::F32, {2}, bufs.back()));
      wm[name] = file;
    }
    write_safetensors(dir + "/" + file, views, {{"shard", file}});
  }
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map.is_null() ? wm : weight_map}};
  write_file_atomic(dir + "/model.safetensors.index.json", index.dump());
}

TEST(TensorSet, SingleFile) {
  std::string dir = test::temp_dir("ts-single");
  std::vector<float> v = {4.f, 5.f};
  write_safetensors(dir + "/model.safetensors", {make_view("x", DType::F32, {2}, v)});
  TensorSet ts = TensorSet::open_dir(dir);
  EXPECT_EQ(ts.source(), dir);
  EXPECT_EQ(ts.names(), std::vector<std::string>{"x"});
  EXPECT_EQ(ts.file_of("x"), dir + "/model.safetensors");
  EXPECT_EQ(static_cast<const float*>(ts.get("x").data)[1], 5.f);
  expect_error<FormatError>([&] { ts.get("y"); }, {"'y'", dir});
}

TEST(TensorSet, ShardedLookupAndLifetime) {
  std::string dir = test::temp_dir("ts-shard");
  write_sharded(dir, {{"model-00001-of-00002.safetensors", {{"a", 1.f}, {"c", 3.f}}},
                      {"model-00002-of-00002.safetensors", {{"b", 2.f}}}});
  const float* pb = nullptr;
  std::shared_ptr<void> hold;
  {
    TensorSet ts = TensorSet::open_dir(dir);
    EXPECT_EQ(ts.names(), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(ts.files().size(), 2u);
    EXPECT_EQ(fs::path(ts.file_of("b")).filename(), "model-00002-of-00002.safetensors");
    EXPECT_EQ(static_cast<const float*>(ts.get("c").data)[0], 3.f);
    EXPECT_EQ(ts.metadata().count("shard"), 1u);
    pb = static_cast<const float*>(ts.get("b").data);
    hold = ts.keep_alive();
  }
  // The TensorSet is gone; the handle keeps the maps (and the view) valid.
  EXPECT_EQ(pb[0], 2.f);
  EXPECT_EQ(pb[1], 3.f);
}

TEST(TensorSet, PrefersSingleFile) {
  std::string dir = test::temp_dir("ts-pref");
  write_sharded(dir, {{"s1.safetensors", {{"a", 1.f}}}});
  std::vector<float> v = {9.f, 9.f};
  write_safetensors(dir + "/model.safetensors", {make_view("a", DType::F32, {2}, v)});
  EXPECT_EQ(static_cast<const float*>(TensorSet::open_dir(dir).get("a").data)[0], 9.f);
}

TEST(TensorSet, IndexErrors) {
  {
    std::string dir = test::temp_dir("ts-e1");
    expect_error<IoError>([&] { TensorSet::open_dir(dir); }, {"model.safetensors", dir});
    write_bytes(dir + "/pytorch_model.bin", "x");
    expect_error<IoError>([&] { TensorSet::open_dir(dir); }, {"PyTorch"});
  }
  {  // index names a shard that is not there
    std::string dir = test::temp_dir("ts-e2");
    write_sharded(dir, {{"s1.safetensors", {{"a", 1.f}}}}, json{{"a", "s1.safetensors"}, {"b", "gone.safetensors"}});
    expect_error<IoError>([&] { TensorSet::open_dir(dir); }, {"gone.safetensors"});
  }
  {  // index maps a tensor to a shard that does not hold it
    std::string dir = test::temp_dir("ts-e3");
    write_sharded(dir, {{"s1.safetensors", {{"a", 1.f}}}, {"s2.safetensors", {{"b", 1.f}}}},
                  json{{"a", "s1.safetensors"}, {"b", "s1.safetensors"}});
    expect_error<FormatError>([&] { TensorSet::open_dir(dir); }, {"'b'", "s1.safetensors"});
  }
  {  // the same tensor in two shards
    std::string dir = test::temp_dir("ts-e4");
    write_sharded(dir, {{"s1.safetensors", {{"a", 1.f}}}, {"s2.safetensors", {{"a", 2.f}, {"b", 1.f}}}},
                  json{{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
    expect_error<FormatError>([&] { TensorSet::open_dir(dir); }, {"'a'", "both"});
  }
  {  // index is not JSON / has no weight_map / escapes the folder
    std::string dir = test::temp_dir("ts-e5");
    write_bytes(dir + "/model.safetensors.index.json", "{not json");
    expect_error<FormatError>([&] { TensorSet::open_dir(dir); }, {"not valid JSON"});
    write_bytes(dir + "/model.safetensors.index.json", R"({"metadata": {}})");
    expect_error<FormatError>([&] { TensorSet::open_dir(dir); }, {"weight_map"});
    write_bytes(dir + "/model.safetensors.index.json", R"({"weight_map": {"a": "../x.safetensors"}})");
    expect_error<FormatError>([&] { TensorSet::open_dir(dir); }, {"../x.safetensors"});
  }
}

}  // namespace
}  // namespace mtp::io
