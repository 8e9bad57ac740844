#include "drafter/drafter.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <random>

#include "core/error.h"
#include "model/fingerprint.h"
#include "model/layer_io.h"

namespace mtp::drafter {

namespace {
std::string prefix(int k) { return "mtp." + std::to_string(k) + "."; }

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

nlohmann::json parse_meta(const io::Metadata& m, const std::string& key, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) fail<FormatError>("drafter '{}': __metadata__ has no '{}'", path, key);
  try {
    return nlohmann::json::parse(it->second);
  } catch (const std::exception& e) {
    fail<FormatError>("drafter '{}': __metadata__['{}'] is not JSON: {}", path, key, e.what());
  }
}
}  // namespace

nlohmann::json DrafterConfig::to_json() const {
  return {{"K", K},
          {"window", window},
          {"hidden_dtype", std::string(dtype_name(hidden_dtype))},
          {"fusion", "eh_proj·[enorm(embed); hnorm(h)]"},
          {"module_input", "module k row t: (h_{k-1}[t], embed(tok[t+k+1])) -> tok[t+k+2]"}};
}

DrafterConfig DrafterConfig::from_json(const nlohmann::json& j) {
  DrafterConfig d;
  try {
    d.K = j.at("K").get<int>();
    d.window = j.value("window", 0);
    d.hidden_dtype = dtype_from_name(j.value("hidden_dtype", std::string("BF16")));
  } catch (const nlohmann::json::exception& e) {
    fail<FormatError>("drafter config: {}", e.what());
  }
  if (d.K < 1 || d.K > 16) fail<FormatError>("drafter config: K = {} (must be 1..16)", d.K);
  if (d.window < 0) fail<FormatError>("drafter config: window = {} (must be >= 0)", d.window);
  if (d.hidden_dtype != DType::BF16 && d.hidden_dtype != DType::F16 &&
      d.hidden_dtype != DType::F32) {
    fail<FormatError>("drafter config: hidden_dtype {} (must be BF16, F16 or F32)",
                      dtype_name(d.hidden_dtype));
  }
  return d;
}

model::ModelConfig module_block_config(const model::ModelConfig& target, const DrafterConfig& d) {
  model::ModelConfig c = target;
  c.n_layers = 1;
  c.sliding_window = d.window;
  c.layer_sliding = {uint8_t(d.window > 0 ? 1 : 0)};
  return c;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> drafter_tensor_shapes(
    const model::ModelConfig& target, const DrafterConfig& d) {
  const int64_t dm = target.d_model;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  model::ModelConfig bc = module_block_config(target, d);
  for (int k = 0; k < d.K; ++k) {
    out.push_back({prefix(k) + "enorm.weight", {dm}});
    out.push_back({prefix(k) + "hnorm.weight", {dm}});
    out.push_back({prefix(k) + "eh_proj.weight", {dm, 2 * dm}});
    for (auto& t : model::layer_tensor_shapes(bc, prefix(k) + "block.")) out.push_back(t);
  }
  return out;
}

Drafter Drafter::load(const std::string& path, const model::ModelConfig& target,
                      const std::string& target_fingerprint, kernels::WeightType hold) {
  io::TensorSet ts = io::TensorSet::open_file(path);
  Drafter dr;
  dr.path_ = path;
  dr.meta_ = ts.metadata();
  auto fmt_it = dr.meta_.find("format");
  if (fmt_it == dr.meta_.end() || fmt_it->second != kFormat) {
    fail<FormatError>("'{}' is not an mtpspec drafter file (__metadata__ format is '{}', "
                      "expected '{}')", path, fmt_it == dr.meta_.end() ? "" : fmt_it->second,
                      kFormat);
  }
  int version = 0;
  try {
    version = std::stoi(dr.meta_.at("format_version"));
  } catch (const std::exception&) {
    fail<FormatError>("drafter '{}': missing or bad format_version", path);
  }
  if (version < 1 || version > kFormatVersion) {
    fail<FormatError>("drafter '{}' has format version {}; this mtpspec reads versions 1..{}",
                      path, version, kFormatVersion);
  }
  nlohmann::json tgt = parse_meta(dr.meta_, "target", path);
  std::string fp = tgt.value("fingerprint", std::string());
  if (fp != target_fingerprint) {
    fail<ConfigError>("drafter '{}' was trained for target {} ({}); this target is {} ({}). "
                      "Train a drafter for this model (mtpspec precompute/train/export)",
                      path, fp.empty() ? "<none>" : fp, tgt.value("architecture", "?"),
                      target_fingerprint, model::arch_name(target.arch));
  }
  dr.cfg_ = DrafterConfig::from_json(parse_meta(dr.meta_, "config", path));
  dr.block_cfg_ = module_block_config(target, dr.cfg_);
  model::check_tensor_shapes(ts, drafter_tensor_shapes(target, dr.cfg_), "drafter " + path);
  const bool op = target.norm_one_plus;
  for (int k = 0; k < dr.cfg_.K; ++k) {
    MtpModule m;
    m.enorm = model::load_norm(ts, prefix(k) + "enorm.weight", op);
    m.hnorm = model::load_norm(ts, prefix(k) + "hnorm.weight", op);
    m.eh_proj = model::pack_rows({&model::finite_tensor(ts, prefix(k) + "eh_proj.weight")}, hold);
    m.block = model::load_layer(ts, dr.block_cfg_, prefix(k) + "block.", hold);
    dr.modules_.push_back(std::move(m));
  }
  return dr;
}

void write_drafter(const std::string& path, const model::ModelConfig& target,
                   const std::string& target_fingerprint, const DrafterConfig& d,
                   const std::map<std::string, std::vector<float>>& tensors,
                   const nlohmann::json& training, DType stored) {
  if (stored != DType::F32 && stored != DType::BF16) {
    fail<InputError>("drafter tensors are stored as F32 or BF16, not {}", dtype_name(stored));
  }
  auto shapes = drafter_tensor_shapes(target, d);
  if (tensors.size() != shapes.size()) {
    fail<ShapeError>("drafter has {} tensors; a K={} drafter for this target has {}",
                     tensors.size(), d.K, shapes.size());
  }
  std::vector<std::vector<uint16_t>> bf(shapes.size());
  std::vector<io::TensorView> views;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const auto& [name, shape] = shapes[i];
    auto it = tensors.find(name);
    if (it == tensors.end()) fail<ShapeError>("drafter tensor '{}' is missing", name);
    size_t n = 1;
    for (auto s : shape) n *= size_t(s);
    if (it->second.size() != n) {
      fail<ShapeError>("drafter tensor '{}' has {} values; its shape needs {}", name,
                       it->second.size(), n);
    }
    if (stored == DType::F32) {
      views.push_back(io::make_view(name, DType::F32, shape, it->second));
    } else {
      bf[i].resize(n);
      for (size_t j = 0; j < n; ++j) bf[i][j] = f32_to_bf16(it->second[j]);
      views.push_back(io::make_view(name, DType::BF16, shape, bf[i]));
    }
  }
  io::Metadata meta;
  meta["format"] = kFormat;
  meta["format_version"] = std::to_string(kFormatVersion);
  meta["config"] = d.to_json().dump();
  meta["target"] = nlohmann::json{{"fingerprint", target_fingerprint},
                                  {"architecture", model::arch_name(target.arch)},
                                  {"config_hash", model::sha256_hex(target.to_json().dump())},
                                  {"config", target.to_json()}}
                       .dump();
  meta["capture"] = kCapture;
  meta["training"] = training.dump();
  meta["created"] = utc_now();
  io::write_safetensors(path, views, meta);
}

std::map<std::string, std::vector<float>> random_drafter_tensors(const model::ModelConfig& target,
                                                                 const DrafterConfig& d,
                                                                 uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::map<std::string, std::vector<float>> out;
  for (auto& [name, shape] : drafter_tensor_shapes(target, d)) {
    size_t n = 1;
    for (auto s : shape) n *= size_t(s);
    std::vector<float> v(n);
    const bool is_norm = name.find("norm") != std::string::npos;
    const bool is_bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (is_norm) {
      std::fill(v.begin(), v.end(), target.norm_one_plus ? 0.f : 1.f);
    } else if (!is_bias) {
      float sd = 1.0f / std::sqrt(float(shape.back()));
      for (auto& x : v) x = sd * normal(rng);
    }
    out[name] = std::move(v);
  }
  return out;
}

}  // namespace mtp::drafter
