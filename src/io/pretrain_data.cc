#include "io/pretrain_data.h"

#include <filesystem>

#include "core/error.h"
#include "core/json.h"
#include "io/safetensors.h"

namespace mtp::io {

namespace fs = std::filesystem;

void TokenStream::add_document(const std::vector<int32_t>& ids, int32_t bos, int32_t eos) {
  starts.push_back(int64_t(tokens.size()));
  if (bos >= 0) tokens.push_back(bos);
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  if (eos >= 0) tokens.push_back(eos);
}

std::string pretrain_dir(const std::string& model_dir) {
  return (fs::path(model_dir) / "pretrain").string();
}

std::string pretrain_tokens_path(const std::string& model_dir) {
  return (fs::path(pretrain_dir(model_dir)) / "tokens.safetensors").string();
}

bool is_heldout_document(std::string_view text, double fraction) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return double(h % 1000000) < fraction * 1e6;
}

namespace {

// Offsets ascending, inside the stream, the first one 0 (when any).
bool consistent(const TokenStream& s) {
  for (size_t i = 0; i < s.starts.size(); ++i) {
    const int64_t lo = i == 0 ? 0 : s.starts[i - 1];
    if (s.starts[i] < lo || s.starts[i] >= int64_t(s.tokens.size())) return false;
    if (i == 0 && s.starts[i] != 0) return false;
  }
  return s.starts.empty() == s.tokens.empty();
}

}  // namespace

void write_pretrain_data(const std::string& path, const PretrainData& d) {
  for (const TokenStream* s : {&d.train, &d.heldout}) {
    if (!consistent(*s)) {
      fail<ShapeError>("pretraining data for '{}': document offsets do not match the stream", path);
    }
  }
  auto n = [](const auto& v) { return int64_t(v.size()); };
  std::vector<TensorView> views = {
      make_view("train", DType::I32, {n(d.train.tokens)}, d.train.tokens),
      make_view("train_starts", DType::I64, {n(d.train.starts)}, d.train.starts),
      make_view("heldout", DType::I32, {n(d.heldout.tokens)}, d.heldout.tokens),
      make_view("heldout_starts", DType::I64, {n(d.heldout.starts)}, d.heldout.starts)};
  fs::create_directories(fs::path(path).parent_path());
  write_safetensors(
      path, views,
      {{"format", kPretrainTokensFormat}, {"format_version", "1"}, {"info", d.info.dump()}});
}

namespace {

nlohmann::json info_of(const SafetensorsFile& f) {
  const Metadata& m = f.metadata();
  auto it = m.find("format");
  if (it == m.end() || it->second != kPretrainTokensFormat || !m.count("info")) {
    fail<FormatError>("'{}' is not an mtpspec pretraining tokens file", f.path());
  }
  nlohmann::json info = parse_json(m.at("info"), "'" + f.path() + "': __metadata__['info']");
  if (!info.is_object() || !info.contains("vocab") || !info["vocab"].is_number_integer()) {
    fail<FormatError>("'{}': bad info metadata", f.path());
  }
  return info;
}

template <class T>
std::vector<T> read_vector(const SafetensorsFile& f, const char* name, DType want) {
  const TensorView& v = f.get(name);
  if (v.dtype != want || v.shape.size() != 1) {
    fail<FormatError>("'{}': tensor '{}' must be 1-D {}", f.path(), name, dtype_name(want));
  }
  const T* p = static_cast<const T*>(v.data);
  return std::vector<T>(p, p + v.numel());
}

}  // namespace

PretrainData read_pretrain_data(const std::string& path) {
  SafetensorsFile f(path);
  PretrainData d;
  d.info = info_of(f);
  const int64_t vocab = d.info["vocab"].get<int64_t>();
  for (auto [s, name] : {std::pair{&d.train, "train"}, std::pair{&d.heldout, "heldout"}}) {
    s->tokens = read_vector<int32_t>(f, name, DType::I32);
    s->starts = read_vector<int64_t>(f, (std::string(name) + "_starts").c_str(), DType::I64);
    if (!consistent(*s)) {
      fail<FormatError>("'{}': the {} document offsets do not match the stream", path, name);
    }
    for (int32_t t : s->tokens) {
      if (t < 0 || t >= vocab) {
        fail<FormatError>("'{}': token {} in the {} stream is outside the vocabulary of {}", path,
                          t, name, vocab);
      }
    }
  }
  return d;
}

nlohmann::json read_pretrain_info(const std::string& path) {
  if (!fs::exists(path)) return {};
  try {
    return info_of(SafetensorsFile(path));
  } catch (const Error&) {
    return {};
  }
}

}  // namespace mtp::io
