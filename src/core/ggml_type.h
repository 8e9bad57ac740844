// ggml's tensor element types (GGUF `ggml_type` ids) and their block geometry.
//
// One table shared by the GGUF reader (io/gguf.h), the quantized kernels
// (kernels/quant*.h) and the quantizer: a tensor of type t stores each row as
// row_elems / block_elems(t) blocks of block_bytes(t) bytes (ggml's layouts,
// docs/FORMATS.md). Ids are ggml's and must never be renumbered: they are what
// the file says. Types mtpspec cannot compute with are still named here, so an
// error can say "tensor blk.0.attn_q.weight has type Q2_K, which mtpspec does
// not support" instead of a number.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace mtp {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct GgmlTypeInfo {
  const char* name;    // ggml's spelling ("Q4_K"); nullptr: id unknown here
  size_t block_elems;  // elements per block (1 for plain types)
  size_t block_bytes;  // bytes per block
};

// Geometry of ggml type id `id` ({nullptr, 0, 0} when the id is not in the
// table above; ids 16..23 and 29, 31+ are IQ*/ternary formats mtpspec refuses).
inline GgmlTypeInfo ggml_type_info(uint32_t id) {
  switch (static_cast<GgmlType>(id)) {
    case GgmlType::F32: return {"F32", 1, 4};
    case GgmlType::F16: return {"F16", 1, 2};
    case GgmlType::BF16: return {"BF16", 1, 2};
    case GgmlType::Q4_0: return {"Q4_0", 32, 2 + 16};             // d, qs[16]
    case GgmlType::Q4_1: return {"Q4_1", 32, 2 + 2 + 16};         // d, m, qs[16]
    case GgmlType::Q5_0: return {"Q5_0", 32, 2 + 4 + 16};         // d, qh[4], qs[16]
    case GgmlType::Q5_1: return {"Q5_1", 32, 2 + 2 + 4 + 16};     // d, m, qh[4], qs[16]
    case GgmlType::Q8_0: return {"Q8_0", 32, 2 + 32};             // d, qs[32]
    case GgmlType::Q8_1: return {"Q8_1", 32, 2 + 2 + 32};         // d, s, qs[32]
    case GgmlType::Q2_K: return {"Q2_K", 256, 16 + 64 + 2 + 2};   // scales, qs, d, dmin
    case GgmlType::Q3_K: return {"Q3_K", 256, 32 + 64 + 12 + 2};  // hmask, qs, scales, d
    case GgmlType::Q4_K: return {"Q4_K", 256, 2 + 2 + 12 + 128};  // d, dmin, scales, qs
    case GgmlType::Q5_K: return {"Q5_K", 256, 2 + 2 + 12 + 32 + 128};  // + qh
    case GgmlType::Q6_K: return {"Q6_K", 256, 128 + 64 + 16 + 2};  // ql, qh, scales, d
    case GgmlType::Q8_K: return {"Q8_K", 256, 4 + 256 + 32};       // d (f32), qs, bsums
    case GgmlType::I8: return {"I8", 1, 1};
    case GgmlType::I16: return {"I16", 1, 2};
    case GgmlType::I32: return {"I32", 1, 4};
    case GgmlType::I64: return {"I64", 1, 8};
    case GgmlType::F64: return {"F64", 1, 8};
  }
  return {nullptr, 0, 0};
}

// ggml's name of the types outside the table (IQ*, ternary): named in errors
// only (their geometry is not needed to refuse them). nullptr: unknown id.
inline const char* ggml_unsupported_type_name(uint32_t id) {
  switch (id) {
    case 16: return "IQ2_XXS";
    case 17: return "IQ2_XS";
    case 18: return "IQ3_XXS";
    case 19: return "IQ1_S";
    case 20: return "IQ4_NL";
    case 21: return "IQ3_S";
    case 22: return "IQ2_S";
    case 23: return "IQ4_XS";
    case 29: return "IQ1_M";
    case 34: return "TQ1_0";
    case 35: return "TQ2_0";
    default: return nullptr;
  }
}

// "Q4_K"; "IQ2_XS" for a type outside the table that ggml names; "type 99"
// for an id ggml does not have (as far as this table knows).
inline std::string ggml_type_name(uint32_t id) {
  const GgmlTypeInfo i = ggml_type_info(id);
  if (i.name) return i.name;
  if (const char* n = ggml_unsupported_type_name(id)) return n;
  return "type " + std::to_string(id);
}

// Bytes of one row of `elems` elements; 0 when the id is unknown or elems is
// not a multiple of the block size (the caller reports which).
inline size_t ggml_row_bytes(uint32_t id, size_t elems) {
  const GgmlTypeInfo i = ggml_type_info(id);
  if (!i.name || elems % i.block_elems != 0) return 0;
  return elems / i.block_elems * i.block_bytes;
}

}  // namespace mtp
