// Reading one decoder layer (Hugging Face tensor names under a prefix) from a
// safetensors TensorSet. Shared by the target loader (prefix
// "model.layers.{i}.") and the drafter file (prefix "mtp.{k}.block."), so a
// module block is read exactly like a target layer of the same family.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/ggml_type.h"
#include "io/safetensors.h"
#include "kernels/matmul.h"
#include "model/config.h"
#include "model/weights.h"

namespace mtp::model {

using TensorShapes = std::vector<std::pair<std::string, std::vector<int64_t>>>;

// Matrices stored as ggml blocks in a safetensors file (a quantized drafter,
// docs/FORMATS.md "Drafter file"): a U8 tensor [rows, ggml_row_bytes(type,
// cols)] under the matrix's own name; its block type and logical shape come
// from the file's __metadata__ (safetensors has no block dtypes).
struct BlockTensor {
  GgmlType type;
  int64_t rows = 0, cols = 0;
};
using BlockTensors = std::map<std::string, BlockTensor>;

// "[2, 3]": a shape for messages.
std::string shape_str(const std::vector<int64_t>& s);

// Every tensor of layer `layer` of family `c` (its kind: c.layer_kind), with
// its shape, named prefix + HF name. A layer reading another's K/V has no
// k/v projections or k norm; a K = V layer no v projection.
TensorShapes layer_tensor_shapes(const ModelConfig& c, const std::string& prefix, int layer = 0);

// The native MTP head's tensors (Qwen3.5's mtp.*: fc, the two pre-fc norms,
// the final norm, one full-attention layer of native_mtp_config(c)).
TensorShapes native_mtp_tensors(const ModelConfig& c);

// Checks presence, dtype (F32/BF16/F16) and shape of each expected tensor;
// throws FormatError / ShapeError naming the tensor, the file and `what`.
// Tensors named in `blocks` must instead be U8 [rows, row bytes] with the
// logical shape [rows, cols] expected.
void check_tensor_shapes(const io::TensorSet& ts, const TensorShapes& expected,
                         const std::string& what, const BlockTensors* blocks = nullptr);

// The tensor, after a NaN/Inf check (FormatError naming it).
const io::TensorView& finite_tensor(const io::TensorSet& ts, const std::string& name);

// Norm weight as fp32 (1 + w in fp32 when one_plus).
std::vector<float> load_norm(const io::TensorSet& ts, const std::string& name, bool one_plus);

// PackedMatrix::pack of [rows, cols] elements of `stored`, held as
// resolve_hold(hold, stored); an InputError (a value beyond fp16's range under
// --weights fp16) is rethrown prefixed with `what` (the tensors and file).
kernels::PackedMatrix pack_float_matrix(const void* src, DType stored, size_t rows, size_t cols,
                                        const Hold& hold, const std::string& what);

// Row-wise concatenation of [r_i, cols] tensors packed as one matrix.
kernels::PackedMatrix pack_rows(const std::vector<const io::TensorView*>& parts,
                                const Hold& hold);

// Runs task(0..n-1) on a pool of up to physical_cores() threads (the
// loaders' per-layer work); every task runs, and the first error by task
// index is rethrown, so which error a bad checkpoint reports does not depend
// on the scheduling.
void run_load_tasks(size_t n, const std::function<void(size_t)>& task);

// The row-wise concatenation of the named [r_i, cols] tensors as one matrix:
// float tensors held as `hold` (pack_rows), tensors in `blocks` as stored, bit
// for bit, whatever `hold` (after a check that every value is finite); a
// matrix of parts of several types is composite (PackedMatrix::concat_rows).
kernels::PackedMatrix load_matrix(const io::TensorSet& ts, const std::vector<std::string>& names,
                                  const Hold& hold, const BlockTensors* blocks = nullptr);

// Layer `layer` of family `c` under `prefix` (its matrices through load_matrix).
LayerWeights load_layer(const io::TensorSet& ts, const ModelConfig& c, const std::string& prefix,
                        const Hold& hold, const BlockTensors* blocks = nullptr, int layer = 0);

}  // namespace mtp::model
