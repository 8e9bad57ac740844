// Weight-matrix × activation kernels: Y[q, rows] = X[q, cols] · Wᵀ.
//
// Batch invariance (docs/INVARIANTS.md invariant 1): the value of Y[r][o] depends only on
// X[r] and W[o] — never on q, on the other rows of X, on the thread count, or on
// how the output range is split. The reduction over `cols` is done in a fixed
// order that is a function of `cols` and the SIMD target alone. This is what
// makes the batched verify forward bit-identical to q one-token forwards.
//
// Weights are repacked at load into the kernels' layout (PackedMatrix); they are
// held as fp32, bf16 or fp16 (all arithmetic fp32), or as rows of ggml blocks
// (Q8_0 ... Q6_K, kernels/quant_blocks.h), multiplied by int8-quantized
// activations (kernels/quant_dot.h states that arithmetic).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>
#include <string>

#include "core/dtype.h"
#include "core/ggml_type.h"
#include "kernels/simd.h"  // simd_target(), MTPSPEC_SIMD

namespace mtp {
class ThreadPool;
}

namespace mtp::kernels {

// F16: IEEE half, held for checkpoints stored in it (every value converts to
// fp32 exactly, so an F16 hold computes the fp32 hold's bits; bf16 could not
// hold those values).
enum class WeightType : uint8_t { F32, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, F16 };
// "fp32" | "bf16" | "fp16" | "q8_0" | "q4_0" | "q4_1" | "q5_0" | "q5_1" | "q4_k" | "q5_k" |
// "q6_k" (the --weights spellings).
const char* weight_type_name(WeightType t);
// The inverse of weight_type_name; throws InputError naming the allowed set.
WeightType parse_weight_type(const std::string& name);
bool weight_type_quantized(WeightType t);  // one of the eight ggml block types
// The ggml type of a hold (F32 for fp32, BF16 for bf16).
GgmlType weight_ggml_type(WeightType t);
// Bytes per element of a hold (block bytes / block elements: 4.5/8 for Q4_K).
double weight_type_bytes_per_elem(WeightType t);

// A [rows, cols] weight matrix in the kernels' packed layout.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // src: row-major [rows, cols] elements of type src_type (F32, BF16 or F16).
  // Converted to `hold` (fp16 -> bf16 rounds to nearest even) and repacked.
  // A quantized hold quantizes each row with quantize_row (quant_blocks.h).
  // Where cols is not a multiple of the hold's block, the matrix is held in
  // a fallback (as llama-quantize does): Q4_K and Q5_K -> Q5_0, Q6_K -> Q8_0
  // (cols % 256 != 0), and any quantized hold -> bf16 (cols % 32 != 0);
  // hold() says what was chosen.
  static PackedMatrix pack(const void* src, DType src_type, size_t rows, size_t cols,
                           WeightType hold);
  // blocks: `rows` rows of raw ggml data of type `type` as stored in a GGUF
  // file (ggml_row_bytes(type, cols) bytes each, rows back to back). Any
  // supported type (quant_blocks.h: F32, F16, BF16, Q8_0 ... Q6_K): block
  // types are held as they are (bit-exact copies, rearranged by
  // groups of 16 rows, kernels/grouped_blocks.h — row_blocks gives the bytes back), F32
  // and F16 as fp32, BF16 as bf16. Throws ShapeError for another type or a cols that is not a
  // whole number of blocks.
  static PackedMatrix pack_blocks(const void* blocks, GgmlType type, size_t rows, size_t cols);
  // `rows` rows stored row-major as they are, read in place (no copy; a tied
  // head over the mapped token table): `type` F32, BF16 or F16 elements
  // (held as fp32, bf16, fp16), or a block type pack_blocks takes
  // (ggml_row_bytes(type, cols) bytes per row). matmul() gives the bits a
  // packed copy of the same values gives (kernels/matmul_rows.cc); block
  // types run the reference arithmetic (quant_dot.h), much slower than a
  // packed copy. `owner` keeps the storage alive (null: the caller does). Throws
  // ShapeError as pack_blocks for another type or a partial block.
  static PackedMatrix view(const void* data, GgmlType type, size_t rows, size_t cols,
                           std::shared_ptr<const void> owner);
  bool is_view() const { return view_; }
  // The row-wise concatenation of matrices with the same cols but possibly
  // different holds (a GGUF Q4_K_M layer fuses Q4_K q/k rows with Q6_K v
  // rows into one wqkv): matmul runs each part's kernel on its own output
  // rows, so every output element is exactly what its part alone computes
  // (batch invariance unchanged). hold() is the first part's; is_composite()
  // tells. One part is returned as it is.
  static PackedMatrix concat_rows(std::vector<PackedMatrix> parts);
  bool is_composite() const { return parts_ != nullptr; }
  const std::vector<PackedMatrix>& parts() const { return *parts_; }

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  WeightType hold() const { return hold_; }
  bool empty() const { return rows_ == 0; }
  size_t bytes() const { return bytes_; }  // packed storage size (a view: the bytes it reads)
  // Row r as fp32 (exactly the values the kernel multiplies by). For tests and
  // reference implementations; not fast.
  void row_f32(size_t r, float* out) const;
  // Row r of a quantized hold as GGUF bytes (ggml_row_bytes(type, cols): the
  // blocks a file would store; exact). ShapeError for another hold.
  void row_blocks(size_t r, uint8_t* out) const;

  // Layout-specific storage, owned by the kernel implementation.
  const uint8_t* data() const { return data_.get(); }

 private:
  friend struct PackedMatrixAccess;
  size_t rows_ = 0, cols_ = 0, bytes_ = 0;
  WeightType hold_ = WeightType::F32;
  bool view_ = false;                // row-major storage read in place (view())
  std::shared_ptr<uint8_t[]> data_;  // 64-byte aligned (a view: as stored)
  std::shared_ptr<const std::vector<PackedMatrix>> parts_;  // concat_rows only
};

// Y[q, rows] = X[q, cols] · Wᵀ. x has row stride x_stride (>= cols) and y has
// row stride y_stride (>= rows). Batch-invariant (see above). pool may be null;
// it is used only when w.bytes() · q > 128 KiB (kParallelMinWork in matmul.cc;
// smaller products run on the calling thread: handing half to a worker costs
// more than it saves there).
// x needs no alignment, but rows that do not start on a 64-byte line (or a
// stride that is not a multiple of 16 floats) are first copied into an aligned
// per-thread buffer (q·cols floats): aligned callers skip that copy. The copy
// changes no bits.
void matmul(const PackedMatrix& w, const float* x, size_t x_stride, size_t q, float* y,
            size_t y_stride, ThreadPool* pool);
inline void matmul(const PackedMatrix& w, const float* x, size_t q, float* y, ThreadPool* pool) {
  matmul(w, x, w.cols(), q, y, w.rows(), pool);
}

namespace detail {
// Sets the bytes · q threshold for using the pool (default 128 KiB); returns the
// previous one. For tests, which use 0 so small products exercise the split.
size_t set_parallel_min_work(size_t bytes_times_q);
// Sets the packed bytes above which a 2-row bf16/fp16 product runs as a padded
// 3-row tile on AVX3 (default 1 MiB, matmul.cc kOnePassTiles); returns the
// previous one. For tests: no bits change either way.
size_t set_pad_pair_min_bytes(size_t bytes);
// Whether a q = 1 product prefetches its weight stream in software (q >= 2
// always does), for every weight type. By CPU vendor: measured (docs/lab/
// performance-history.md "Huge pages and prefetch into L2", "an Intel host —
// AVX-VNNI on AVX2"), Zen 4's hardware prefetcher keeps a q = 1 stream at
// DRAM speed and software prefetches there only slow it (Zen 5: quantized
// K types too, "one multiply for a tile's scales"), while on the Intel
// (Sapphire/Emerald Rapids) host a q = 1 bf16 product without them ran
// slower than q = 2 with them.
// set_prefetch_single_row(1 / 0 / -1 = by vendor) returns the previous mode;
// prefetching changes no bits.
bool prefetch_single_row();
int set_prefetch_single_row(int mode);
// Activation bytes (all q rows, whole rows) up to which an AVX3 verify
// product over a block-after-block layout (<= 2048 cols) reads each block's
// row as one chunk (matmul.cc group_chunk): 5/8 of the host's L1D, at
// least 16 KiB. set_whole_row_x_bytes returns the previous value; for tests, which
// run both orders: no bits change either way.
size_t whole_row_x_bytes();
size_t set_whole_row_x_bytes(size_t bytes);
}  // namespace detail

// Scalar reference with the same contract: plain sequential fp32 sum (so its
// bits differ from the SIMD kernel's; compare with a tolerance).
void matmul_ref(const PackedMatrix& w, const float* x, size_t q, float* y);

}  // namespace mtp::kernels
