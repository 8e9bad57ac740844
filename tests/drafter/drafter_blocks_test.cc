// Drafters stored as ggml blocks (DrafterStorage, docs/FORMATS.md "Drafter
// file"): each matrix is a U8 tensor of the rows quantize_row gives for the
// values written, named in __metadata__["quantized"]; the engine holds those
// blocks bit for bit, exactly as it holds the same floats requantized at load;
// a matrix the block type cannot hold stays BF16; a file whose records and
// tensors disagree is refused naming the tensor.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/ggml_type.h"
#include "drafter/drafter.h"
#include "io/safetensors.h"
#include "kernels/quant_blocks.h"
#include "model/fingerprint.h"
#include "model/loader.h"
#include "model_util.h"
#include "test_util.h"

namespace mtp::drafter {
namespace {

using test::expect_error;

struct BlocksTarget {
  model::LoadedModel lm;
  std::string fingerprint;
};

// d 64, ffn `hidden` (a multiple of 32 unless a test wants a fallback).
BlocksTarget blocks_target(const std::string& dir, int hidden) {
  test::write_random_llama2c(dir + "/t.bin", 64, hidden, 1, 4, 4, 50, 64, 1);
  BlocksTarget t;
  t.lm = model::load_model(dir + "/t.bin", {});
  t.fingerprint = model::target_fingerprint(t.lm, /*use_cache=*/false);
  return t;
}

// The type a matrix of `cols` is stored in for storage `t` (PackedMatrix::pack's
// fallbacks: K types -> Q5_0 when cols % 256, any block type -> none when cols % 32).
GgmlType expected_type(kernels::WeightType t, int64_t cols) {
  const GgmlType g = kernels::weight_ggml_type(t);
  if (cols % 32 != 0) return GgmlType::BF16;
  if (ggml_type_info(uint32_t(g)).block_elems == 256 && cols % 256 != 0) {
    return t == kernels::WeightType::Q6_K ? GgmlType::Q8_0 : GgmlType::Q5_0;
  }
  return g;
}

// The matrices of module k in load order, as the engine holds them.
std::vector<const kernels::PackedMatrix*> matrices(const Drafter& d, int k) {
  const MtpModule& m = d.modules()[size_t(k)];
  return {&m.eh_proj, &m.block.wqkv, &m.block.wo, &m.block.w_gate_up, &m.block.w_down};
}

TEST(DrafterBlocks, EachMatrixIsItsRowsQuantizedAndLoadsBitForBit) {
  const std::string dir = test::temp_dir("drafter-blocks");
  const BlocksTarget t = blocks_target(dir, 96);
  DrafterConfig dc;
  dc.K = 2;
  const auto tensors = random_drafter_tensors(t.lm.config, dc, 5);
  for (const char* type : {"q8_0", "q4_0", "q4_k", "q6_k"}) {
    SCOPED_TRACE(type);
    const DrafterStorage st = DrafterStorage::parse(type);
    const std::string path = dir + "/" + type + ".safetensors";
    write_drafter(path, t.lm.config, t.fingerprint, dc, tensors, {{"kind", "test"}}, st);
    io::TensorSet ts = io::TensorSet::open_file(path);
    const auto rec = nlohmann::json::parse(ts.metadata().at("quantized"));
    for (const auto& [name, shape] : drafter_tensor_shapes(t.lm.config, dc)) {
      const io::TensorView& v = ts.get(name);
      const std::vector<float>& x = tensors.at(name);
      if (shape.size() == 1) {  // norms stay F32, exactly
        ASSERT_EQ(v.dtype, DType::F32) << name;
        EXPECT_EQ(std::memcmp(v.data, x.data(), x.size() * 4), 0) << name;
        continue;
      }
      const GgmlType g = expected_type(st.blocks, shape[1]);
      ASSERT_EQ(v.dtype, DType::U8) << name;
      std::string tname = ggml_type_name(uint32_t(g));
      for (char& c : tname) c = char(std::tolower(c));
      EXPECT_EQ(rec.at(name).at("type"), tname) << name;
      EXPECT_EQ(rec.at(name).at("shape"), nlohmann::json(shape)) << name;
      const size_t rb = ggml_row_bytes(uint32_t(g), size_t(shape[1]));
      ASSERT_EQ(v.nbytes, rb * size_t(shape[0])) << name;
      std::vector<uint8_t> want(rb);
      for (int64_t r = 0; r < shape[0]; ++r) {
        kernels::quantize_row(g, x.data() + r * shape[1], size_t(shape[1]), want.data());
        ASSERT_EQ(std::memcmp(static_cast<const uint8_t*>(v.data) + size_t(r) * rb, want.data(), rb), 0)
            << name << " row " << r;
      }
    }
    // Held as stored, bit for bit = the same floats requantized at load.
    const Drafter file = Drafter::load(path, t.lm.config, t.fingerprint, kernels::WeightType::F32);
    const Drafter mem = Drafter::from_tensors(t.lm.config, t.fingerprint, dc, tensors, {},
                                              DType::F32, st.blocks);
    for (int k = 0; k < dc.K; ++k) {
      const auto a = matrices(file, k), b = matrices(mem, k);
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i]->hold(), b[i]->hold()) << "module " << k << " matrix " << i;
        ASSERT_EQ(a[i]->bytes(), b[i]->bytes());
        EXPECT_EQ(std::memcmp(a[i]->data(), b[i]->data(), a[i]->bytes()), 0) << "matrix " << i;
      }
      EXPECT_EQ(file.modules()[size_t(k)].enorm, mem.modules()[size_t(k)].enorm);
    }
    // round_to_storage gives the values the blocks hold; with_float_matrices
    // holds exactly those in fp32.
    auto rounded = tensors;
    round_to_storage(rounded, t.lm.config, dc, st);
    const Drafter f32 = file.with_float_matrices();
    const std::string eh = "mtp.1.eh_proj.weight";
    const auto& ehm = f32.modules()[1].eh_proj;
    EXPECT_EQ(ehm.hold(), kernels::WeightType::F32);
    std::vector<float> row(ehm.cols()), deq(ehm.cols());
    const size_t rb = ggml_row_bytes(uint32_t(expected_type(st.blocks, 128)), 128);
    for (size_t r = 0; r < ehm.rows(); ++r) {
      ehm.row_f32(r, row.data());
      kernels::dequantize_row(expected_type(st.blocks, 128),
                              static_cast<const uint8_t*>(ts.get(eh).data) + r * rb, 128, deq.data());
      ASSERT_EQ(row, deq) << "row " << r;
      ASSERT_EQ(0, std::memcmp(rounded.at(eh).data() + r * 128, deq.data(), 128 * 4)) << "row " << r;
    }
  }
}

TEST(DrafterBlocks, AMatrixTheBlocksCannotHoldStaysBf16) {
  const std::string dir = test::temp_dir("drafter-blocks-fallback");
  const BlocksTarget t = blocks_target(dir, 48);  // down_proj cols 48: not a multiple of 32
  DrafterConfig dc;
  dc.K = 1;
  const auto tensors = random_drafter_tensors(t.lm.config, dc, 6);
  const std::string path = dir + "/d.safetensors";
  write_drafter(path, t.lm.config, t.fingerprint, dc, tensors, {}, DrafterStorage::parse("q8_0"));
  io::TensorSet ts = io::TensorSet::open_file(path);
  EXPECT_EQ(ts.get("mtp.0.block.mlp.down_proj.weight").dtype, DType::BF16);
  EXPECT_EQ(ts.get("mtp.0.block.mlp.up_proj.weight").dtype, DType::U8);
  const Drafter d = Drafter::load(path, t.lm.config, t.fingerprint, kernels::WeightType::F32);
  EXPECT_EQ(d.modules()[0].block.w_down.hold(), kernels::WeightType::BF16);
  EXPECT_EQ(d.modules()[0].block.w_gate_up.hold(), kernels::WeightType::Q8_0);
}

// Rewrites `src` to `dst` with the metadata key set and/or one tensor replaced.
void rewrite_blocks(const std::string& src, const std::string& dst, const std::string& key,
             const std::string& value, const std::string& tensor = "",
             const std::vector<uint8_t>* bytes = nullptr, std::vector<int64_t> shape = {}) {
  io::TensorSet ts = io::TensorSet::open_file(src);
  std::vector<io::TensorView> views;
  for (const auto& n : ts.names()) {
    if (n == tensor && bytes) {
      views.push_back(io::make_view(n, DType::U8, shape, *bytes));
    } else {
      views.push_back(ts.get(n));
    }
  }
  io::Metadata meta = ts.metadata();
  if (!key.empty()) meta[key] = value;
  io::write_safetensors(dst, views, meta);
}

TEST(DrafterBlocks, RecordsThatDisagreeWithTheTensorsAreRefusedNamingThem) {
  const std::string dir = test::temp_dir("drafter-blocks-bad");
  const BlocksTarget t = blocks_target(dir, 96);
  DrafterConfig dc;
  dc.K = 1;
  const std::string good = dir + "/good.safetensors";
  write_drafter(good, t.lm.config, t.fingerprint, dc, random_drafter_tensors(t.lm.config, dc, 7),
                {}, DrafterStorage::parse("q8_0"));
  auto load = [&](const std::string& p) {
    return [&, p] { Drafter::load(p, t.lm.config, t.fingerprint, kernels::WeightType::F32); };
  };
  auto rec = nlohmann::json::parse(io::TensorSet::open_file(good).metadata().at("quantized"));
  const std::string wo = "mtp.0.block.self_attn.o_proj.weight";
  {
    auto r = rec;
    r[wo]["type"] = "q9_0";
    rewrite_blocks(good, dir + "/type.safetensors", "quantized", r.dump());
    expect_error<FormatError>(load(dir + "/type.safetensors"), {wo, "q9_0", "type.safetensors"});
  }
  {
    auto r = rec;
    r["mtp.0.enorm.weight"] = {{"type", "q8_0"}, {"shape", {64, 64}}};
    rewrite_blocks(good, dir + "/norm.safetensors", "quantized", r.dump());
    expect_error<FormatError>(load(dir + "/norm.safetensors"),
                              {"mtp.0.enorm.weight", "not a weight matrix"});
  }
  {
    auto r = rec;
    r[wo]["shape"] = {64, 40};
    rewrite_blocks(good, dir + "/cols.safetensors", "quantized", r.dump());
    expect_error<FormatError>(load(dir + "/cols.safetensors"), {wo, "multiple of its block"});
  }
  {
    auto r = rec;
    r[wo]["shape"] = {32, 64};
    rewrite_blocks(good, dir + "/shape.safetensors", "quantized", r.dump());
    expect_error<ShapeError>(load(dir + "/shape.safetensors"), {wo, "[32, 64]", "[64, 64]"});
  }
  rewrite_blocks(good, dir + "/json.safetensors", "quantized", "[1, 2]");
  expect_error<FormatError>(load(dir + "/json.safetensors"), {"quantized", "not a JSON object"});
  // Truncated rows of blocks.
  const std::vector<uint8_t> short_rows(64 * 30, 0);
  rewrite_blocks(good, dir + "/bytes.safetensors", "", "", wo, &short_rows, {64, 30});
  expect_error<ShapeError>(load(dir + "/bytes.safetensors"), {wo, "U8 [64, 68]", "[64, 30]"});
  // A NaN block scale (fp16 0x7E00) in row 3.
  io::TensorSet ts = io::TensorSet::open_file(good);
  const io::TensorView& v = ts.get(wo);
  std::vector<uint8_t> nan(static_cast<const uint8_t*>(v.data),
                           static_cast<const uint8_t*>(v.data) + v.nbytes);
  nan[3 * 68 + 0] = 0x00;
  nan[3 * 68 + 1] = 0x7E;
  rewrite_blocks(good, dir + "/nan.safetensors", "", "", wo, &nan, v.shape);
  expect_error<FormatError>(load(dir + "/nan.safetensors"), {"row 3", wo});
  // Unknown storage names.
  expect_error<InputError>([] { DrafterStorage::parse("q3_k"); }, {"q3_k", "q8_0"});
}

}  // namespace
}  // namespace mtp::drafter
