#include "train/native_head_gguf.h"

#include <fmt/core.h>

#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "core/ggml_type.h"
#include "io/gguf.h"
#include "kernels/quant_blocks.h"
#include "model/loader.h"

namespace mtp::train {

namespace {

// Stored as 1 + w in the GGUF: llama.cpp's converter adds the 1 to every
// tensor whose name, after its renaming of mtp.* into block n_layers, ends in
// "norm.weight" (so nextn.enorm / nextn.hnorm too) but the gated
// linear-attention norm, which the head does not have.
bool stored_one_plus(const model::ModelConfig& c, const std::string& hf) {
  MTP_CHECK(hf.find("linear_attn.") == std::string::npos, "'{}' in the native head", hf);
  return c.norm_one_plus && model::gguf_native_mtp_name(c, hf).ends_with("norm.weight");
}

// The head's tensor `hf` in f: present with the shape native_mtp_tensors gives.
const io::GgufTensor& head_tensor(const io::GgufFile& f, const model::ModelConfig& c,
                                  const std::string& hf, const std::vector<int64_t>& shape) {
  const std::string name = model::gguf_native_mtp_name(c, hf);
  const io::GgufTensor* t = f.tensor(name);
  if (!t) {
    fail<FormatError>("GGUF file '{}' has no tensor {} (the native MTP head's {}; {} sets {} "
                      "trunk layers)", f.path(), name, hf, f.path(), c.n_layers);
  }
  if (t->shape() != shape) {
    fail<ShapeError>("tensor {} in '{}' has shape {}; the target's native head needs {}", name,
                     f.path(), model::shape_str(t->shape()), model::shape_str(shape));
  }
  return *t;
}

}  // namespace

HeadTensors read_gguf_native_head(const std::string& path, const model::ModelConfig& c) {
  const io::GgufFile f(path);
  HeadTensors out;
  for (const auto& [hf, shape] : model::native_mtp_tensors(c)) {
    const io::GgufTensor& t = head_tensor(f, c, hf, shape);
    const auto type = static_cast<GgmlType>(t.type);
    if (!kernels::ggml_type_supported(type)) {
      fail<ConfigError>("tensor {} in '{}' has type {}, which mtpspec cannot dequantize (it "
                        "reads {})", t.name, path, ggml_type_name(t.type),
                        kernels::kSupportedGgmlTypes);
    }
    std::vector<float> v(t.numel());
    const size_t row_bytes = ggml_row_bytes(t.type, t.row_elems());
    for (size_t r = 0; r < t.rows(); ++r) {
      kernels::dequantize_row(type, t.data + r * row_bytes, t.row_elems(),
                              v.data() + r * t.row_elems());
    }
    const bool one_plus = stored_one_plus(c, hf);
    for (float& x : v) {
      if (!std::isfinite(x)) {
        fail<FormatError>("tensor {} in '{}' holds a non-finite value", t.name, path);
      }
      if (one_plus) x -= 1.0f;
    }
    out.emplace(hf, std::move(v));
  }
  return out;
}

void write_gguf_native_head(const std::string& src, const model::ModelConfig& c,
                            const HeadTensors& head, const std::string& out) {
  const io::GgufFile f(src);
  std::map<std::string, std::string> replaced;  // GGUF name -> its F32 bytes
  for (const auto& [hf, shape] : model::native_mtp_tensors(c)) {
    const io::GgufTensor& t = head_tensor(f, c, hf, shape);
    const auto it = head.find(hf);
    MTP_CHECK(it != head.end() && it->second.size() == t.numel(),
              "the head to write lacks {} or has another size", hf);
    std::vector<float> v = it->second;
    if (stored_one_plus(c, hf)) {
      for (float& x : v) x = 1.0f + x;
    }
    std::string bytes(v.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), v.data(), bytes.size());
    replaced.emplace(t.name, std::move(bytes));
  }
  std::vector<io::GgufWriteTensor> tensors;
  tensors.reserve(f.tensors().size());
  for (const io::GgufTensor& t : f.tensors()) {
    auto r = replaced.find(t.name);
    if (r != replaced.end()) {
      tensors.push_back({t.name, t.dims, uint32_t(GgmlType::F32), std::move(r->second)});
    } else {
      // The trunk's bytes straight from the source's memory map (f outlives
      // the write): nothing but the head is held in memory.
      tensors.push_back({t.name, t.dims, t.type, {},
                         std::string_view(reinterpret_cast<const char*>(t.data), t.nbytes)});
    }
  }
  io::write_gguf(out, f.metadata(), tensors, f.version());
}

}  // namespace mtp::train
