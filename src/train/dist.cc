#include "train/dist.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

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
  if (o.local_rank < 0) o.local_rank = env_int("LOCAL_RANK", o.rank);
  if (o.master_addr.empty()) o.master_addr = env("MASTER_ADDR") ? env("MASTER_ADDR") : "127.0.0.1";
  if (o.master_port <= 0) o.master_port = env_int("MASTER_PORT", 29500);
  if (o.world_size < 1) fail<InputError>("world size {} (must be >= 1)", o.world_size);
  if (o.rank < 0 || o.rank >= o.world_size) {
    fail<InputError>("rank {} is outside [0, {}) (world size {})", o.rank, o.world_size,
                     o.world_size);
  }
  if (o.local_rank < 0) fail<InputError>("local rank {} (must be >= 0)", o.local_rank);
  if (o.master_port > 65535) fail<InputError>("master port {} > 65535", o.master_port);
  return o;
}

// One of the two process groups; `dev` is where its collectives' tensors live.
struct DistGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#ifdef USE_C10D_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
  torch::Device dev = torch::kCPU;

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& out,
                                           std::vector<at::Tensor>& in) {
#ifdef USE_C10D_NCCL
    if (nccl) return nccl->allgather(out, in);
#endif
    return gloo->allgather(out, in);
  }
  c10::intrusive_ptr<c10d::Work> barrier() {
#ifdef USE_C10D_NCCL
    if (nccl) return nccl->barrier();
#endif
    return gloo->barrier();
  }
};

namespace {
c10::intrusive_ptr<c10d::ProcessGroupGloo> make_gloo(const c10::intrusive_ptr<c10d::Store>& store,
                                                     int rank, int world,
                                                     std::chrono::milliseconds timeout) {
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout);
  if (const char* ifname = env("GLOO_SOCKET_IFNAME")) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  opts->threads = 1;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
}
}  // namespace

DistGroup::DistGroup(const DistOptions& o, torch::Device dev)
    : rank_(o.rank), world_(o.world_size) {
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
#ifdef USE_C10D_NCCL
    if (dev.is_cuda()) {
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      impl_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, rank_, world_, opts);
      impl_->dev = dev;
    }
    if (!impl_->nccl) impl_->gloo = make_gloo(impl_->store, rank_, world_, timeout);
#else
    impl_->gloo = make_gloo(impl_->store, rank_, world_, timeout);
#endif
  } catch (const c10::Error& e) {
    fail<IoError>("data-parallel rendezvous failed (rank {} of {}, {}): {}", rank_, world_,
                  o.file.empty() ? fmt::format("tcp {}:{}", o.master_addr, o.master_port)
                                 : "file " + o.file,
                  e.what_without_backtrace());
  }
}

const char* DistGroup::backend() const {
  if (!impl_) return "none";
  return impl_->gloo ? "gloo" : "nccl";
}

DistGroup::~DistGroup() = default;

torch::Tensor DistGroup::sum_in_rank_order(const torch::Tensor& x) {
  if (world_ == 1) return x.clone();
  TORCH_CHECK(x.scalar_type() == torch::kFloat32, "sum_in_rank_order: an fp32 tensor expected");
  std::vector<at::Tensor> in = {x.to(impl_->dev).contiguous()};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < world_; ++r) out[0].push_back(torch::empty_like(in[0]));
  wait_collective(impl_->allgather(out, in), rank_, "the gradient allgather");
  torch::Tensor sum = out[0][0].clone();
  for (int r = 1; r < world_; ++r) sum.add_(out[0][size_t(r)]);
  return sum.to(x.device());
}

void DistGroup::check_same(uint64_t value, const std::string& what) {
  if (world_ == 1) return;
  auto t = torch::tensor({int64_t(value)}, torch::kInt64).to(impl_->dev);
  std::vector<at::Tensor> in = {t};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < world_; ++r) out[0].push_back(torch::empty_like(t));
  wait_collective(impl_->allgather(out, in), rank_, "a consistency check");
  for (int r = 0; r < world_; ++r) {
    if (out[0][size_t(r)].cpu().item<int64_t>() != int64_t(value)) {
      fail<InputError>("rank {} has a different {} than rank {}: every rank must run the same "
                       "command on the same data", r, what, rank_);
    }
  }
}

void DistGroup::barrier() {
  if (world_ > 1) wait_collective(impl_->barrier(), rank_, "a barrier");
}

}  // namespace mtp::train
