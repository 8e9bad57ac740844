#include "train/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "core/setting.h"
#include "core/mapped_file.h"
#include "io/safetensors.h"

namespace mtp::train {

std::string checkpoint_path(const std::string& run_dir) {
  return (std::filesystem::path(run_dir) / "checkpoint.safetensors").string();
}

void save_checkpoint(const std::string& path, const Checkpoint& c) {
  const int64_t P = int64_t(c.params.size());
  if (int64_t(c.adam_m.size()) != P || int64_t(c.adam_v.size()) != P ||
      (!c.ema.empty() && int64_t(c.ema.size()) != P)) {
    fail<ShapeError>("checkpoint vectors disagree in size ({} params)", P);
  }
  std::vector<io::TensorView> views = {io::make_view("params", DType::F32, {P}, c.params),
                                       io::make_view("adam_m", DType::F32, {P}, c.adam_m),
                                       io::make_view("adam_v", DType::F32, {P}, c.adam_v)};
  if (!c.ema.empty()) views.push_back(io::make_view("ema", DType::F32, {P}, c.ema));
  io::Metadata meta;
  meta["format"] = kCheckpointFormat;
  meta["format_version"] = std::to_string(kCheckpointVersion);
  meta["state"] = c.state.dump();
  io::write_safetensors(path, views, meta);
}

namespace {
// Every field of a state that a reader takes, type-checked once here (the
// trainer, pretraining and export then read them with plain get<>).
void check_state(const nlohmann::json& s, const std::string& where) {
  using obj = nlohmann::json::object_t;
  for (const char* k : {"step", "total_steps"}) {
    if (json_value<int64_t>(s, k, 0, where) < 0) {
      fail<FormatError>("{}: field '{}' must be >= 0; got {}", where, k, s[k].dump());
    }
  }
  json_find<obj>(s, "trajectory", where);
  json_find<obj>(s, "drafter_config", where);
  if (auto shards = json_find<obj>(s, "shards", where)) {
    json_find<std::string>(nlohmann::json(*shards), "dir", where + " shards");
  }
  if (auto t = json_find<obj>(s, "target", where)) {
    const nlohmann::json tgt(*t);
    json_find<std::string>(tgt, "path", where + " target");
    json_find<std::string>(tgt, "fingerprint", where + " target");
  }
  if (auto layout = json_find<nlohmann::json::array_t>(s, "layout", where)) {
    for (size_t i = 0; i < layout->size(); ++i) {
      const std::string w = fmt::format("{} layout[{}]", where, i);
      const nlohmann::json& e = (*layout)[i];
      json_get<std::string>(e, "name", w);
      json_get<int64_t>(e, "offset", w);
      for (const auto& d : json_get<nlohmann::json::array_t>(e, "shape", w)) {
        json_as<int64_t>(d, "shape", w);
      }
    }
  }
}
}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
  io::SafetensorsFile f(path);
  const io::Metadata& m = f.metadata();
  auto it = m.find("format");
  if (it == m.end() || it->second != kCheckpointFormat) {
    fail<FormatError>("'{}' is not an mtpspec training checkpoint", path);
  }
  Checkpoint c;
  const std::string where = fmt::format("checkpoint '{}': __metadata__['state']", path);
  auto state = m.find("state");
  if (state == m.end()) fail<FormatError>("{} is missing", where);
  c.state = parse_json(state->second, where);
  check_state(c.state, where);
  auto read = [&](const char* name, std::vector<float>& out, bool required) {
    const io::TensorView* v = f.find(name);
    if (!v) {
      if (required) fail<FormatError>("checkpoint '{}' has no tensor '{}'", path, name);
      return;
    }
    if (v->dtype != DType::F32 || v->shape.size() != 1) {
      fail<FormatError>("checkpoint '{}': tensor '{}' must be 1-D F32", path, name);
    }
    const float* p = static_cast<const float*>(v->data);
    out.assign(p, p + v->numel());
  };
  read("params", c.params, true);
  read("adam_m", c.adam_m, true);
  read("adam_v", c.adam_v, true);
  read("ema", c.ema, false);
  if (c.adam_m.size() != c.params.size() || c.adam_v.size() != c.params.size() ||
      (!c.ema.empty() && c.ema.size() != c.params.size())) {
    fail<FormatError>("checkpoint '{}': optimizer state and parameters disagree in size", path);
  }
  return c;
}

std::map<std::string, std::vector<float>> checkpoint_tensors(const Checkpoint& c, bool ema) {
  if (ema && c.ema.empty()) {
    fail_setting<InputError>("ema", "this run was trained without EMA (an EMA decay of 0): "
                             "export its raw weights instead");
  }
  const std::vector<float>& flat = ema ? c.ema : c.params;
  std::map<std::string, std::vector<float>> out;
  for (const auto& e : json_get<nlohmann::json::array_t>(c.state, "layout", "checkpoint state")) {
    const int64_t off = e.at("offset").get<int64_t>();
    int64_t n = 1;
    for (auto s : e.at("shape")) n *= s.get<int64_t>();
    if (off < 0 || off + n > int64_t(flat.size())) {
      fail<FormatError>("checkpoint layout entry '{}' is outside the parameter vector",
                        e.at("name").get<std::string>());
    }
    out[e.at("name").get<std::string>()].assign(flat.begin() + off, flat.begin() + off + n);
  }
  return out;
}

void check_trajectory(const Checkpoint& c, const nlohmann::json& traj, const std::string& run_dir,
                      const std::string& same) {
  const nlohmann::json old(
      json_value<nlohmann::json::object_t>(c.state, "trajectory", {}, "checkpoint state"));
  for (auto& [key, val] : traj.items()) {
    if (!old.contains(key) || old[key] != val) {
      fail<InputError>("cannot resume '{}': {} was {} and is now {} (a resumed run must use {})",
                       run_dir, key, old.contains(key) ? old[key].dump() : "unset", val.dump(),
                       same);
    }
  }
}

std::optional<Checkpoint> checkpoint_to_resume(const std::string& path, bool resume,
                                               const nlohmann::json& trajectory,
                                               const std::string& run_dir,
                                               const std::string& kind, const std::string& same) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  Checkpoint c = load_checkpoint(path);
  if (!resume) {
    fail_setting<InputError>("resume", "'{}' already holds a {} checkpoint (step {} of {}): "
                             "resume it to continue it, or write to a new folder", run_dir, kind,
                             c.state.value("step", 0L), c.state.value("total_steps", 0L));
  }
  check_trajectory(c, trajectory, run_dir, same);
  return c;
}

std::ofstream open_metrics(const std::string& path, long step, bool resumed) {
  if (std::filesystem::exists(path)) {
    // A fresh run (no checkpoint: a new folder, or one killed before its first
    // checkpoint) starts an empty file; a resumed one keeps what led to its
    // checkpoint. A line cut by a kill does not parse and is dropped.
    std::string kept;
    if (resumed) {
      std::istringstream in(read_file(path));
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        nlohmann::json j;
        try {
          j = parse_json(line, fmt::format("{}:{}", path, n));
        } catch (const FormatError&) {
          continue;  // a line cut by a kill
        }
        if (!j.is_object()) continue;
        const std::string where = fmt::format("{}:{}", path, n);
        const int64_t s = json_value<int64_t>(j, "step", 0, where);
        if (s < step || (s == step && json_value<std::string>(j, "kind", "", where) != "parity")) {
          kept += line + "\n";
        }
      }
    }
    write_file_atomic(path, kept);
  }
  std::ofstream f(path, std::ios::app);
  if (!f) fail<IoError>("cannot write '{}'", path);
  return f;
}

}  // namespace mtp::train
