// The GGUF reader and writer (io/gguf.h): every value type round trips,
// tensors of any ggml type keep their bytes at aligned offsets, and every
// malformed file — truncated, wrong magic, v1, big-endian, misaligned,
// overlapping, unknown type, bad row length, hostile counts — is a typed
// error naming the file and the key or tensor, never a crash or a huge
// allocation. Files are patched byte by byte from the writer's output, so
// each test changes exactly one field.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/ggml_type.h"
#include "core/mapped_file.h"
#include "io/gguf.h"
#include "test_util.h"

namespace mtp::test {
namespace {

using io::GgufFile;
using io::GgufMetadata;
using io::GgufType;
using io::GgufValue;
using io::GgufWriteTensor;

std::string bytes_of(size_t n, uint8_t seed) {
  std::string b(n, '\0');
  for (size_t i = 0; i < n; ++i) b[i] = char(uint8_t(seed + 37 * i));
  return b;
}

GgufMetadata all_types() {
  GgufMetadata kv;
  kv.push_back({"t.u8", GgufValue::of(GgufType::U8, 200)});
  kv.push_back({"t.i8", GgufValue::of_signed(GgufType::I8, -100)});
  kv.push_back({"t.u16", GgufValue::of(GgufType::U16, 65000)});
  kv.push_back({"t.i16", GgufValue::of_signed(GgufType::I16, -32000)});
  kv.push_back({"t.u32", GgufValue::u32(4000000000u)});
  kv.push_back({"t.i32", GgufValue::i32(-2000000000)});
  kv.push_back({"t.u64", GgufValue::of(GgufType::U64, 1ull << 63)});
  kv.push_back({"t.i64", GgufValue::of_signed(GgufType::I64, -(1ll << 62))});
  kv.push_back({"t.f32", GgufValue::f32(0.1f)});
  kv.push_back({"t.f64", GgufValue::of_float(GgufType::F64, 0.1)});
  kv.push_back({"t.bool", GgufValue::boolean(true)});
  kv.push_back({"t.str", GgufValue::str("h\xC3\xA9llo")});
  kv.push_back({"t.empty", GgufValue::str("")});
  kv.push_back({"t.strs", GgufValue::strings({"a", "", "ccc"})});
  kv.push_back({"t.nested", GgufValue::array(GgufType::Array, {GgufValue::i32s({1, 2}),
                                                               GgufValue::i32s({}),
                                                               GgufValue::i32s({-3})})});
  return kv;
}

std::vector<GgufWriteTensor> some_tensors() {
  return {{"a.f32", {3, 2}, 0, bytes_of(24, 1)},
          {"b.q8_0", {64, 3}, uint32_t(GgmlType::Q8_0), bytes_of(2 * 34 * 3, 2)},
          {"c.q4_k", {256}, uint32_t(GgmlType::Q4_K), bytes_of(144, 3)},
          {"d.f16", {5}, uint32_t(GgmlType::F16), bytes_of(10, 4)}};
}

std::string write(const std::string& tag, const std::string& bytes) {
  const std::string p = temp_dir("gguf") + "/" + tag + ".gguf";
  std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  return p;
}

// Offset of the tensor info of `name` (just after its name) in a file.
size_t info_of(const std::string& b, const std::string& name) {
  std::string key(8, '\0');
  uint64_t n = name.size();
  std::memcpy(key.data(), &n, 8);
  key += name;
  size_t at = b.rfind(key);
  EXPECT_NE(at, std::string::npos) << name;
  return at + key.size();
}
template <class T>
void poke(std::string& b, size_t at, T v) {
  std::memcpy(&b[at], &v, sizeof(T));
}

TEST(Gguf, RoundTripsEveryValueTypeAndTensor) {
  for (uint32_t version : {2u, 3u}) {
    const std::string p = temp_dir("gguf") + "/rt.gguf";
    io::write_gguf(p, all_types(), some_tensors(), version);
    GgufFile f(p);
    EXPECT_EQ(f.version(), version);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.data_offset() % 32, 0u);
    ASSERT_EQ(f.metadata().size(), all_types().size());
    EXPECT_EQ(f.get_uint("t.u8"), 200u);
    EXPECT_EQ(f.get_int("t.i8"), -100);
    EXPECT_EQ(f.get_int("t.u16"), 65000);
    EXPECT_EQ(f.get_int("t.i16"), -32000);
    EXPECT_EQ(f.get_uint("t.u32"), 4000000000u);
    EXPECT_EQ(f.get_int("t.i32"), -2000000000);
    EXPECT_EQ(f.find("t.u64")->u, 1ull << 63);
    EXPECT_EQ(f.get_int("t.i64"), -(1ll << 62));
    EXPECT_EQ(f.get_float("t.f32"), double(0.1f));
    EXPECT_EQ(f.get_float("t.f64"), 0.1);
    EXPECT_EQ(f.get_bool("t.bool"), true);
    EXPECT_EQ(f.get_string("t.str"), "h\xC3\xA9llo");
    EXPECT_EQ(f.get_string("t.empty"), "");
    const auto* strs = f.get_array("t.strs", GgufType::String);
    ASSERT_TRUE(strs);
    ASSERT_EQ(strs->size(), 3u);
    EXPECT_EQ((*strs)[2].s, "ccc");
    const auto* nested = f.get_array("t.nested", GgufType::Array);
    ASSERT_TRUE(nested && nested->size() == 3);
    EXPECT_EQ((*nested)[0].arr[1].i, 2);
    EXPECT_TRUE((*nested)[1].arr.empty());
    EXPECT_EQ((*nested)[2].arr[0].i, -3);
    EXPECT_EQ(f.find("nope"), nullptr);
    EXPECT_FALSE(f.get_int("nope"));
    for (auto& w : some_tensors()) {
      const io::GgufTensor* t = f.tensor(w.name);
      ASSERT_TRUE(t) << w.name;
      EXPECT_EQ(t->dims, w.dims);
      EXPECT_EQ(t->type, w.type);
      EXPECT_EQ(t->offset % 32, 0u);
      ASSERT_EQ(t->nbytes, w.bytes.size());
      EXPECT_EQ(std::memcmp(t->data, w.bytes.data(), t->nbytes), 0) << w.name;
    }
    EXPECT_EQ(f.tensor("b.q8_0")->shape(), (std::vector<int64_t>{3, 64}));
    EXPECT_EQ(f.tensor("b.q8_0")->rows(), 3u);
  }
}

TEST(Gguf, AlignmentFromMetadata) {
  GgufMetadata kv = {{"general.alignment", GgufValue::u32(256)}};
  const std::string p = temp_dir("gguf") + "/al.gguf";
  io::write_gguf(p, kv, some_tensors());
  GgufFile f(p);
  EXPECT_EQ(f.alignment(), 256u);
  EXPECT_EQ(f.data_offset() % 256, 0u);
  for (auto& t : f.tensors()) EXPECT_EQ(t.offset % 256, 0u) << t.name;
  // The writer refuses what the reader would.
  expect_error<InputError>([] { io::gguf_bytes({{"general.alignment", GgufValue::u32(48)}}, {}); },
                           {"power of two"});
}

// write_gguf streams the header and each tensor (owned bytes or a view into
// memory it does not copy) and writes exactly the bytes gguf_bytes builds,
// at the default and at a larger alignment.
TEST(Gguf, StreamedWriteEqualsTheBytesWithViewedTensors) {
  const std::vector<GgufWriteTensor> owned = some_tensors();
  std::vector<GgufWriteTensor> viewed;
  for (size_t i = 0; i < owned.size(); ++i) {
    GgufWriteTensor t = owned[i];
    if (i % 2 == 0) {
      t.view = owned[i].bytes;  // `owned` outlives the writes
      t.bytes.clear();
    }
    viewed.push_back(std::move(t));
  }
  for (const GgufMetadata& kv : {all_types(), GgufMetadata{{"general.alignment", GgufValue::u32(256)}}}) {
    const std::string want = io::gguf_bytes(kv, owned);
    EXPECT_EQ(io::gguf_bytes(kv, viewed), want);
    const std::string p = temp_dir("gguf") + "/streamed.gguf";
    io::write_gguf(p, kv, viewed);
    std::ifstream in(p, std::ios::binary);
    const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want);
  }
}

TEST(Gguf, TypedAccessNamesKeyAndValue) {
  const std::string p = temp_dir("gguf") + "/typed.gguf";
  io::write_gguf(p, all_types(), {});
  GgufFile f(p);
  expect_error<FormatError>([&] { f.get_int("t.str"); }, {p, "t.str", "integer", "llo"});
  expect_error<FormatError>([&] { f.get_float("t.u32"); }, {"t.u32", "float"});
  expect_error<FormatError>([&] { f.get_uint("t.i8"); }, {"t.i8", "-100"});
  expect_error<FormatError>([&] { f.get_array("t.strs", GgufType::F32); }, {"t.strs", "f32"});
  expect_error<FormatError>([&] { f.get_int("t.u64"); }, {"t.u64", "out of range"});
}

TEST(Gguf, TruncatedAnywhereIsAnIoError) {
  const std::string full = io::gguf_bytes(all_types(), some_tensors());
  size_t end = 0;  // the end of the last tensor's bytes (padding follows)
  {
    GgufFile f(write("full", full));
    for (auto& t : f.tensors()) end = std::max(end, f.data_offset() + t.offset + t.nbytes);
  }
  // Every cut inside the header and metadata, and a few in the data.
  for (size_t cut = 0; cut < end; cut += cut < 600 ? 1 : 97) {
    const std::string p = write("cut", full.substr(0, cut));
    try {
      GgufFile f(p);
      ADD_FAILURE() << "cut at " << cut << " of " << full.size() << " opened";
    } catch (const IoError& e) {
      if (cut >= 4) EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
    } catch (const FormatError& e) {
      EXPECT_LT(cut, 4u) << e.what();  // too short for the magic
    }
  }
}

TEST(Gguf, WrongMagicVersionsAndByteOrder) {
  std::string b = io::gguf_bytes(all_types(), some_tensors());
  std::string m = b;
  m[0] = 'X';
  expect_error<FormatError>([&] { GgufFile f(write("magic", m)); }, {"not a GGUF file"});
  std::string v1 = b;
  poke<uint32_t>(v1, 4, 1);
  expect_error<FormatError>([&] { GgufFile f(write("v1", v1)); }, {"version 1"});
  std::string v9 = b;
  poke<uint32_t>(v9, 4, 9);
  expect_error<FormatError>([&] { GgufFile f(write("v9", v9)); }, {"version 9", "2 and 3"});
  std::string be = b;
  poke<uint32_t>(be, 4, 0x03000000u);  // version 3 written big-endian
  expect_error<FormatError>([&] { GgufFile f(write("be", be)); }, {"big-endian"});
  EXPECT_TRUE(GgufFile::has_magic(write("ok", b)));
  EXPECT_FALSE(GgufFile::has_magic(write("m", m)));
}

TEST(Gguf, HostileCountsAreRefusedBeforeAllocating) {
  const std::string b = io::gguf_bytes(all_types(), some_tensors());
  std::string kv = b, tn = b, arr = b, str = b;
  poke<uint64_t>(kv, 16, uint64_t(1) << 60);
  expect_error<IoError>([&] { GgufFile f(write("kv", kv)); }, {"metadata entries"});
  poke<uint64_t>(tn, 8, uint64_t(1) << 60);
  expect_error<FormatError>([&] { GgufFile f(write("tn", tn)); }, {"tensors", "at most"});
  std::string kv2 = b, tn2 = b;  // below the entry cap: checked against the bytes left
  poke<uint64_t>(kv2, 16, 500000);
  expect_error<IoError>([&] { GgufFile f(write("kv2", kv2)); }, {"500000 metadata entries"});
  poke<uint64_t>(tn2, 8, 500000);
  expect_error<IoError>([&] { GgufFile f(write("tn2", tn2)); }, {"500000 tensors"});
  // An array the file's bytes could hold, but more elements than any real
  // file: each would be held unpacked, so it is refused before reading.
  std::string big = io::gguf_bytes({{"big", GgufValue::array(GgufType::U8, {})}}, {});
  const size_t count_at = big.find("big") + 3 + 4 + 4;
  const uint64_t n = (uint64_t(1) << 23) + 1;
  poke<uint64_t>(big, count_at, n);
  big.resize(count_at + 8);
  big.append(size_t(n), '\0');
  expect_error<FormatError>([&] { GgufFile f(write("big", big)); }, {"big", "array elements"});
  // The array length of t.strs (after key, u32 type, u32 element type).
  size_t at = arr.find("t.strs") + 6 + 4 + 4;
  poke<uint64_t>(arr, at, uint64_t(1) << 61);
  expect_error<IoError>([&] { GgufFile f(write("arr", arr)); }, {"t.strs", "elements"});
  // The length of t.str's string value.
  at = str.find("t.str") + 5 + 4;
  poke<uint64_t>(str, at, ~uint64_t(0));
  expect_error<IoError>([&] { GgufFile f(write("str", str)); }, {"t.str", "length"});
}

TEST(Gguf, BadTensorInfosNameTheTensor) {
  const std::string b = io::gguf_bytes({}, some_tensors());
  // info layout after the name: u32 n_dims, i64 dims[n], u32 type, u64 offset.
  std::string mis = b;
  size_t at = info_of(mis, "b.q8_0");
  poke<uint64_t>(mis, at + 4 + 16 + 4, 32 + 8);
  expect_error<FormatError>([&] { GgufFile f(write("mis", mis)); },
                            {"b.q8_0", "offset 40", "alignment 32"});
  std::string unk = b;
  poke<uint32_t>(unk, info_of(unk, "a.f32") + 4 + 16, 17);
  expect_error<FormatError>([&] { GgufFile f(write("unk", unk)); },
                            {"tensor a.f32 has ggml type 17 (IQ2_XS), which mtpspec does not support"});
  std::string row = b;
  poke<int64_t>(row, info_of(row, "b.q8_0") + 4, 48);  // 48 is not a multiple of 32
  expect_error<FormatError>([&] { GgufFile f(write("row", row)); },
                            {"b.q8_0", "Q8_0", "48", "multiple of the block size"});
  std::string ovl = b;
  poke<uint64_t>(ovl, info_of(ovl, "d.f16") + 4 + 8 + 4, 0);  // on top of a.f32
  expect_error<FormatError>([&] { GgufFile f(write("ovl", ovl)); }, {"overlap", "d.f16"});
  std::string big = b;
  poke<int64_t>(big, info_of(big, "a.f32") + 4, int64_t(1) << 40);
  poke<int64_t>(big, info_of(big, "a.f32") + 12, int64_t(1) << 40);
  expect_error<FormatError>([&] { GgufFile f(write("big", big)); }, {"a.f32", "overflows"});
  std::string past = b;
  poke<int64_t>(past, info_of(past, "d.f16") + 4, 1 << 20);
  expect_error<IoError>([&] { GgufFile f(write("past", past)); }, {"d.f16", "truncated"});
  std::string dims = b;
  poke<uint32_t>(dims, info_of(dims, "a.f32"), 7);
  expect_error<FormatError>([&] { GgufFile f(write("dims", dims)); }, {"a.f32", "7 dimensions"});
}

TEST(Gguf, DuplicatesAndBadValuesAreFormatErrors) {
  GgufMetadata kv = {{"k.aa", GgufValue::u32(1)}, {"k.ab", GgufValue::u32(2)},
                     {"general.alignment", GgufValue::u32(32)}, {"k.b", GgufValue::boolean(true)}};
  std::string b = io::gguf_bytes(kv, {{"x.a", {4}, 0, bytes_of(16, 1)}, {"x.b", {4}, 0, bytes_of(16, 2)}});
  std::string dk = b;
  dk[dk.find("k.ab") + 3] = 'a';
  expect_error<FormatError>([&] { GgufFile f(write("dk", dk)); }, {"'k.aa' appears twice"});
  std::string dt = b;
  dt[dt.rfind("x.b") + 2] = 'a';
  expect_error<FormatError>([&] { GgufFile f(write("dt", dt)); }, {"x.a", "twice"});
  std::string al = b;
  poke<uint32_t>(al, al.find("general.alignment") + 17 + 4, 48);
  expect_error<FormatError>([&] { GgufFile f(write("al", al)); }, {"general.alignment", "48"});
  std::string bl = b;
  bl[bl.find("k.b") + 3 + 4] = 7;
  expect_error<FormatError>([&] { GgufFile f(write("bl", bl)); }, {"k.b", "bool"});
  std::string vt = b;
  poke<uint32_t>(vt, vt.find("k.aa") + 4, 77);
  expect_error<FormatError>([&] { GgufFile f(write("vt", vt)); }, {"k.aa", "value type 77"});
  expect_error<InputError>([] { io::gguf_bytes({{"a", GgufValue::u32(1)}, {"a", GgufValue::u32(1)}}, {}); },
                           {"'a' given twice"});
  expect_error<InputError>([] { io::gguf_bytes({}, {{"t", {64}, 8, std::string(30, '\0')}}); },
                           {"t", "Q8_0", "30 bytes", "imply 68"});
}

TEST(Gguf, DeeplyNestedArraysAreRefused) {
  GgufValue v = GgufValue::i32s({1});
  for (int d = 0; d < 12; ++d) v = GgufValue::array(GgufType::Array, {v});
  const std::string p = write("deep", io::gguf_bytes({{"deep", v}}, {}));
  expect_error<FormatError>([&] { GgufFile f(p); }, {"deep", "nests arrays"});
}

}  // namespace
}  // namespace mtp::test
