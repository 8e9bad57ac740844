// A Qwen3.5 GGUF's native MTP head, read and replaced in llama.cpp's qwen35
// layout (docs/FORMATS.md "The native MTP head in GGUF"): block n_layers of
// the file (block_count = n_layers + qwen35.nextn_predict_layers) holds the
// head's layer under the layer names (blk.{n}.attn_q.weight, ...) and its own
// tensors as blk.{n}.nextn.{eh_proj,enorm,hnorm,shared_head_norm}.weight
// (model::gguf_native_mtp_name). Every *norm.weight is stored as 1 + w (the
// converter adds the 1 in fp32), the matrices in any type llama.cpp writes.
//
// What `mtpspec train-native-head` writes for a GGUF checkpoint is the whole
// GGUF again — every metadata key and every other tensor as stored (a
// quantized trunk stays bit-identical), the head's tensors replaced, in F32 —
// the one file llama.cpp's qwen35 MTP speculation (--spec-type draft-mtp)
// and our engine load as the target with its head.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/layer_io.h"

namespace mtp::train {

using HeadTensors = std::map<std::string, std::vector<float>>;  // HF name -> values (row-major)

// The head of GGUF file `path` (whose config is `c`) by Hugging Face name
// (model::native_mtp_tensors(c)), each tensor dequantized to fp32 and its
// norms as w (stored - 1). FormatError / ShapeError naming the file and the
// tensor when one is missing or has another shape; ConfigError for a type
// mtpspec does not dequantize.
HeadTensors read_gguf_native_head(const std::string& path, const model::ModelConfig& c);

// Writes `out` atomically: GGUF `src` (config `c`) with the head's tensors
// replaced by `head` (every tensor of native_mtp_tensors(c), shapes checked;
// stored F32, norms as 1 + w), everything else as stored, in the file's
// order. Streamed: the trunk's bytes go from the source's memory map to the
// output; only the head's F32 values are held.
void write_gguf_native_head(const std::string& src, const model::ModelConfig& c,
                            const HeadTensors& head, const std::string& out);

}  // namespace mtp::train
