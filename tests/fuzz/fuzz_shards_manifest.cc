// Shards folder: manifest.json (read_manifest) and, with the same bytes, a
// shard file (read_shard: names, dtypes, shapes), whose rows are then read.
#include "drafter/shards.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mtp::fuzz::write_input("manifest.json", data, size);
  mtp::fuzz::expect_typed([&] { (void)mtp::drafter::read_manifest(mtp::fuzz::work_dir()); });
  const std::string p = mtp::fuzz::write_input("shard-00000.safetensors", data, size);
  mtp::fuzz::expect_typed([&] {
    mtp::drafter::Shard s = mtp::drafter::read_shard(p);
    std::vector<float> row(size_t(s.d_model));
    volatile int32_t sink = 0;
    for (int i = 0; i < s.sequences; ++i) {
      sink ^= s.length[i];
      for (int t = 0; t < s.seq_len; ++t) {
        sink ^= s.tokens[size_t(i) * s.seq_len + t] ^ s.loss_mask[size_t(i) * s.seq_len + t];
        s.hidden_row(i, t, row.data());
      }
    }
  });
  return 0;
}
