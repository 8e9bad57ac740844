#include "drafter/shards.h"

#include <fmt/core.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/json.h"
#include "core/setting.h"
#include "core/mapped_file.h"

namespace mtp::drafter {

std::string shard_file_name(int index) { return fmt::format("shard-{:05}.safetensors", index); }

ShardBuilder::ShardBuilder(int seq_len, int d_model, DType dt) : seq_len_(seq_len), d_(d_model), dt_(dt) {
  if (dt != DType::BF16 && dt != DType::F16 && dt != DType::F32) {
    fail<InputError>("hidden dtype must be bf16, fp16 or fp32, got {}", dtype_name(dt));
  }
}

void ShardBuilder::add(const std::vector<int32_t>& tokens, const float* hidden,
                       const std::vector<uint8_t>& mask) {
  const size_t L = tokens.size(), T = size_t(seq_len_), d = size_t(d_), es = dtype_size(dt_);
  if (L == 0 || L > T || mask.size() != L) {
    fail<InputError>("shard sequence of {} tokens ({} mask values) for seq_len {}", L,
                     mask.size(), T);
  }
  size_t base = tokens_.size();
  tokens_.resize(base + T, 0);
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + base);
  mask_.resize(base + T, 0);
  std::copy(mask.begin(), mask.end(), mask_.begin() + base);
  size_t hb = hidden_.size();
  hidden_.resize(hb + T * d * es, 0);
  uint8_t* dst = hidden_.data() + hb;
  for (size_t i = 0; i < L * d; ++i) {
    float v = hidden[i];
    if (dt_ == DType::F32) {
      std::memcpy(dst + i * 4, &v, 4);
    } else if (dt_ == DType::BF16) {
      uint16_t h = f32_to_bf16(v);
      std::memcpy(dst + i * 2, &h, 2);
    } else {
      if (!(std::fabs(v) <= 65504.f)) {
        fail_setting<InputError>("hidden_dtype",
                                 "capture hidden value {} at sequence {} position {} does not "
                                 "fit fp16 (±65,504); store the capture hidden in bf16", v, n_,
                                 i / d);
      }
      uint16_t h = f32_to_f16(v);
      std::memcpy(dst + i * 2, &h, 2);
    }
  }
  lengths_.push_back(int32_t(L));
  real_ += long(L);
  ++n_;
}

void ShardBuilder::write(const std::string& path, const io::Metadata& meta) const {
  const int64_t S = n_, T = seq_len_, d = d_;
  std::vector<io::TensorView> views = {
      io::make_view("tokens", DType::I32, {S, T}, tokens_),
      io::make_view("hidden", dt_, {S, T, d}, hidden_),
      io::make_view("loss_mask", DType::U8, {S, T}, mask_),
      io::make_view("length", DType::I32, {S}, lengths_)};
  io::write_safetensors(path, views, meta);
}

void ShardBuilder::clear() {
  n_ = 0;
  real_ = 0;
  tokens_.clear();
  lengths_.clear();
  hidden_.clear();
  mask_.clear();
}

void Shard::hidden_row(int s, int t, float* out) const {
  size_t off = (size_t(s) * seq_len + size_t(t)) * d_model;
  to_f32(hidden + off * dtype_size(hidden_dtype), hidden_dtype, size_t(d_model), out);
}

Shard read_shard(const std::string& path) {
  Shard s;
  s.file = io::TensorSet::open_file(path);
  const io::TensorView& tok = s.file.get("tokens");
  const io::TensorView& hid = s.file.get("hidden");
  const io::TensorView& msk = s.file.get("loss_mask");
  const io::TensorView& len = s.file.get("length");
  if (tok.dtype != DType::I32 || tok.shape.size() != 2 || hid.shape.size() != 3 ||
      msk.dtype != DType::U8 || len.dtype != DType::I32 || hid.shape[0] != tok.shape[0] ||
      hid.shape[1] != tok.shape[1] || msk.shape != tok.shape || len.shape.size() != 1 ||
      len.shape[0] != tok.shape[0] ||
      (hid.dtype != DType::BF16 && hid.dtype != DType::F16 && hid.dtype != DType::F32)) {
    fail<FormatError>("shard '{}' does not have the tokens/hidden/loss_mask/length layout", path);
  }
  s.sequences = int(tok.shape[0]);
  s.seq_len = int(tok.shape[1]);
  s.d_model = int(hid.shape[2]);
  s.hidden_dtype = hid.dtype;
  // Readers index these as int32/uint16/float arrays: a view at an address
  // that is not a multiple of its element size is copied (reading it in place
  // would be a misaligned load, undefined behaviour).
  auto aligned = [&](const io::TensorView& v) -> const void* {
    if (reinterpret_cast<uintptr_t>(v.data) % dtype_size(v.dtype) == 0) return v.data;
    auto copy = std::make_shared<std::vector<uint64_t>>((v.nbytes + 7) / 8);
    if (v.nbytes) std::memcpy(copy->data(), v.data, v.nbytes);
    s.aligned_copies.push_back(copy);
    return copy->data();
  };
  s.tokens = static_cast<const int32_t*>(aligned(tok));
  s.hidden = static_cast<const uint8_t*>(aligned(hid));
  s.loss_mask = static_cast<const uint8_t*>(msk.data);
  s.length = static_cast<const int32_t*>(aligned(len));
  return s;
}

nlohmann::json read_manifest(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "manifest.json").string();
  const std::string where = "'" + path + "'";
  const nlohmann::json m = parse_json(read_file(path), where);
  // Every field a reader takes, type-checked here once (train/data.cc,
  // draft_vocab.cc then read them with plain get<>).
  if (json_get<std::string>(m, "format", where) != kShardsFormat) {
    fail<FormatError>("'{}' is not an mtpspec shards manifest (format {})", path,
                      json_excerpt(m["format"]));
  }
  if (json_get<int64_t>(m, "version", where) > kShardsVersion) {
    fail<FormatError>("'{}' has version {}; this mtpspec reads up to {}", path,
                      m["version"].dump(), kShardsVersion);
  }
  json_get<std::string>(m, "target_fingerprint", where);
  json_get<std::string>(m, "hidden_dtype", where);
  for (const char* k : {"seq_len", "d_model"}) {
    if (json_get<int32_t>(m, k, where) < 1) {
      fail<FormatError>("{}: field '{}' must be at least 1; got {}", where, k, m[k].dump());
    }
  }
  json_find<nlohmann::json::object_t>(m, "target", where);
  const auto shards = json_get<nlohmann::json::array_t>(m, "shards", where);
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string field = fmt::format("shards[{}]", i);
    json_as<nlohmann::json::object_t>(shards[i], field, where);
    json_get<std::string>(shards[i], "file", where + " " + field);
    json_find<std::string>(shards[i], "split", where + " " + field);
    json_find<int32_t>(shards[i], "sequences", where + " " + field);
  }
  return m;
}

}  // namespace mtp::drafter
