// Target fingerprint (docs/SEMANTICS.md, docs/INVARIANTS.md invariant 4): SHA-256 over the
// canonical config plus, for every stored tensor sorted by name, its name,
// stored dtype, shape and stored bytes (what is on disk, not the repacked
// matrices): --weights fp32|bf16|auto keep it; a target requantized at load
// (--weights q8_0 ...) gets its own (target_fingerprint). A llama2.c checkpoint is hashed as one
// pseudo-tensor "llama2c.payload" (U8, everything after the 28-byte header);
// a GGUF file's tensors are hashed with their ggml type ("ggml:Q8_0") and
// stored bytes, so a GGUF copy of a checkpoint (config source "gguf", F16 or
// quantized bytes) never shares the checkpoint's fingerprint.
//
// Hashing a multi-GB checkpoint takes seconds, so results are cached in
// $XDG_CACHE_HOME/mtpspec/fingerprints.json (default ~/.cache/mtpspec), keyed by
// the weight files' (real path, size, mtime) — never beside the model, whose
// folder may be read-only. A cache that cannot be read or written is ignored.
#pragma once
#include <string>

#include "model/loader.h"

namespace mtp::model {

// Hex SHA-256 of the target at `lm.path` with config `lm.config`.
std::string target_fingerprint(const LoadedModel& lm, bool use_cache = true);

// Hex SHA-256 of a byte string.
std::string sha256_hex(const std::string& bytes);

// Folder for mtpspec's cache files (created on demand).
std::string cache_dir();

}  // namespace mtp::model
