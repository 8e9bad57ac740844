#include "train/dist.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstdlib>

#include "core/error.h"

namespace mtp::train {

namespace {
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}
int env_int(const char* name, int fallback) {
  const char* v = env(name);
  if (!v) return fallback;
  try {
    return std::stoi(v);
  } catch (const std::exception&) {
    fail<InputError>("environment variable {}='{}' is not an integer", name, v);
  }
}
// Waits for a collective. A rank that died (killed, crashed, out of memory)
// surfaces here: Gloo reports the closed connection at once (an exception
// that is no c10::Error), a rank that hangs at the collective timeout.
void wait_collective(const c10::intrusive_ptr<c10d::Work>& work, int rank, const char* what) {
  try {
    work->wait();
  } catch (const c10::Error& e) {
    fail<IoError>("{} failed on rank {} (another rank stopped, or the timeout passed): {}", what,
                  rank, e.what_without_backtrace());
  } catch (const std::exception& e) {
    fail<IoError>("{} failed on rank {} (another rank stopped, or the timeout passed): {}", what,
                  rank, e.what());
  }
}
}  // namespace

DistOptions resolve_dist(DistOptions o) {
  if (o.world_size <= 0) o.world_size = env_int("WORLD_SIZE", 1);
  if (o.rank < 0) o.rank = env_int("RANK", 0);
  if (o.master_addr.empty()) o.master_addr = env("MASTER_ADDR") ? env("MASTER_ADDR") : "127.0.0.1";
  if (o.master_port <= 0) o.master_port = env_int("MASTER_PORT", 29500);
  if (o.world_size < 1) fail<InputError>("world size {} (must be >= 1)", o.world_size);
  if (o.rank < 0 || o.rank >= o.world_size) {
    fail<InputError>("rank {} is outside [0, {}) (world size {})", o.rank, o.world_size,
                     o.world_size);
  }
  if (o.master_port > 65535) fail<InputError>("master port {} > 65535", o.master_port);
  return o;
}

struct DistGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
};

DistGroup::DistGroup(const DistOptions& o) : rank_(o.rank), world_(o.world_size) {
  if (world_ == 1) return;
  impl_ = std::make_unique<Impl>();
  const std::chrono::milliseconds timeout(int64_t(o.timeout_s) * 1000);
  try {
    if (!o.file.empty()) {
      impl_->store = c10::make_intrusive<c10d::FileStore>(o.file, world_);
    } else {
      c10d::TCPStoreOptions so;
      so.port = uint16_t(o.master_port);
      so.isServer = rank_ == 0;
      so.numWorkers = size_t(world_);
      so.waitWorkers = true;
      so.timeout = timeout;
      impl_->store = c10::make_intrusive<c10d::TCPStore>(o.master_addr, so);
    }
    impl_->store->setTimeout(timeout);
    auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
    if (const char* ifname = env("GLOO_SOCKET_IFNAME")) {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else {
      opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    opts->threads = 1;
    impl_->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, rank_, world_, opts);
  } catch (const c10::Error& e) {
    fail<IoError>("data-parallel rendezvous failed (rank {} of {}, {}): {}", rank_, world_,
                  o.file.empty() ? fmt::format("tcp {}:{}", o.master_addr, o.master_port)
                                 : "file " + o.file,
                  e.what_without_backtrace());
  }
}

DistGroup::~DistGroup() = default;

torch::Tensor DistGroup::sum_in_rank_order(const torch::Tensor& x) {
  if (world_ == 1) return x.clone();
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32 && x.device().is_cpu(),
              "sum_in_rank_order: contiguous fp32 CPU tensor expected");
  std::vector<at::Tensor> in = {x};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < world_; ++r) out[0].push_back(torch::empty_like(x));
  wait_collective(impl_->pg->allgather(out, in), rank_, "the gradient allgather");
  torch::Tensor sum = out[0][0].clone();
  for (int r = 1; r < world_; ++r) sum.add_(out[0][size_t(r)]);
  return sum;
}

void DistGroup::check_same(uint64_t value, const std::string& what) {
  if (world_ == 1) return;
  auto t = torch::tensor({int64_t(value)}, torch::kInt64);
  std::vector<at::Tensor> in = {t};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < world_; ++r) out[0].push_back(torch::empty_like(t));
  wait_collective(impl_->pg->allgather(out, in), rank_, "a consistency check");
  for (int r = 0; r < world_; ++r) {
    if (out[0][size_t(r)].item<int64_t>() != int64_t(value)) {
      fail<InputError>("rank {} has a different {} than rank {}: every rank must run the same "
                       "command on the same data", r, what, rank_);
    }
  }
}

void DistGroup::barrier() {
  if (world_ > 1) wait_collective(impl_->pg->barrier(), rank_, "a barrier");
}

}  // namespace mtp::train
