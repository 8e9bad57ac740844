// safetensors header + tensors: SafetensorsFile and TensorSet::open_file. Every
// tensor that opens is looked up and its bytes read (so a view past the map
// would be an ASan report).
#include "fuzz_util.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string p = mtp::fuzz::write_input("x.safetensors", data, size);
  mtp::fuzz::expect_typed([&] {
    mtp::io::TensorSet ts = mtp::io::TensorSet::open_file(p);
    volatile uint8_t sink = 0;
    for (const auto& name : ts.names()) {
      mtp::fuzz::expect_typed([&] {
        const mtp::io::TensorView& v = ts.get(name);
        if (v.nbytes != v.numel() * mtp::dtype_size(v.dtype)) std::abort();
        const auto* b = static_cast<const uint8_t*>(v.data);
        for (size_t i = 0; i < v.nbytes; ++i) sink ^= b[i];
      });
    }
    (void)ts.metadata();
  });
  return 0;
}
