// Data-parallel training across processes: torch c10d. The backend follows
// the training device: NCCL for CUDA tensors when this libtorch build has it
// (compiled with USE_C10D_NCCL: CMakeLists.txt defines it for a CUDA
// libtorch), Gloo otherwise (CPU tensors; CUDA gradients are copied to the
// host and back).
//
// Rendezvous through a FileStore (--dist-file PATH, a fresh path on a file
// system every rank sees) or a TCPStore (--master-addr/--master-port; rank 0
// serves). World size, rank and local rank come from flags or torchrun's
// WORLD_SIZE / RANK / LOCAL_RANK / MASTER_ADDR / MASTER_PORT. The Gloo device
// binds to GLOO_SOCKET_IFNAME when set, else to this host's resolved address
// (loopback if it does not resolve).
//
// Determinism: gradients are combined with sum_in_rank_order — an allgather,
// then x_0 + x_1 + ... + x_{W-1} summed left to right on every rank — so every
// rank gets identical bits, equal to one process summing the same micro-batch
// gradients in the same order, whatever the backend. (A ring all-reduce would
// sum in a rank-dependent order.)
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>

namespace mtp::train {

struct DistOptions {
  int world_size = 0;        // 0 = WORLD_SIZE from the environment, else 1
  int rank = -1;             // -1 = RANK from the environment, else 0
  int local_rank = -1;       // -1 = LOCAL_RANK from the environment, else rank
  std::string file;          // FileStore path ("" = TCP store)
  std::string master_addr;   // "" = MASTER_ADDR, else 127.0.0.1
  int master_port = 0;       // 0 = MASTER_PORT, else 29500
  int timeout_s = 1800;      // rendezvous and collective timeout
};

// Fills unset fields from the environment and defaults; InputError when the
// result is inconsistent (rank outside [0, world), no store for world > 1).
DistOptions resolve_dist(DistOptions o);

class DistGroup {
 public:
  // world 1: no process group. `dev`: the training device (its type picks
  // the backend, above).
  DistGroup(const DistOptions& resolved, torch::Device dev);
  ~DistGroup();
  DistGroup(const DistGroup&) = delete;
  DistGroup& operator=(const DistGroup&) = delete;

  int rank() const { return rank_; }
  int world() const { return world_; }
  const char* backend() const;  // "none" (world 1), "gloo" or "nccl"

  // Σ_r x_r over ranks, summed left to right in rank order (see above). x: an
  // fp32 tensor on the training device, the same shape on every rank; the
  // sum is on x's device.
  torch::Tensor sum_in_rank_order(const torch::Tensor& x);
  // Fails (InputError) unless every rank passes the same value; `what` names it.
  void check_same(uint64_t value, const std::string& what);
  void barrier();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0, world_ = 1;
};

}  // namespace mtp::train
