// The workloads' collectives over Reprise's communicator (MPI on CPUs, NCCL on GPUs), recorded in the capture
// Session as record_param_comms nodes, as PyTorch's process groups record theirs.
#include <ATen/ATen.h>

#ifdef REPRISE_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include "reprise/capture/session.h"
#include "reprise/comms/communicator.h"
#include "reprise/workloads/workloads.h"

namespace reprise::workloads {
namespace {

comms::DType comm_dtype(at::ScalarType t) {
  comms::DType out;
  if (!comms::dtype_of_scalar_type(static_cast<int>(t), out))
    throw std::invalid_argument("collectives: dtype " + std::string(c10::toString(t)) + " not supported");
  return out;
}

class CommCollectives : public Collectives {
 public:
  CommCollectives(comms::Communicator& world, at::Device device) : world_(world), device_(device) {
    if (device.is_cuda()) nccl_ = comms::make_nccl(world, device.index());
  }
  int rank() const override { return world_.rank(); }
  int world_size() const override { return world_.size(); }

  void all_reduce(at::Tensor& t) override {
    if (!t.is_contiguous()) throw std::invalid_argument("all_reduce: the tensor must be contiguous");
    record("all_reduce", "allreduce", t, {t}, {t}, t.numel(), t.numel());
    comms::Args a;
    a.kind = comms::Kind::AllReduce;
    a.dtype = comm_dtype(t.scalar_type());
    a.in = a.out = t.data_ptr();
    a.count = static_cast<size_t>(t.numel());
    run(a);
  }

  void all_to_all(at::Tensor& out, const at::Tensor& in) override {
    if (!in.is_contiguous() || !out.is_contiguous() || in.numel() != out.numel() || in.numel() % world_size() != 0)
      throw std::invalid_argument("all_to_all: contiguous tensors of equal size, divisible by the world size");
    record("all_to_all", "all_to_all", in, {in}, {out}, in.numel(), out.numel());
    comms::Args a;
    a.kind = comms::Kind::AllToAll;
    a.dtype = comm_dtype(in.scalar_type());
    a.in = in.data_ptr();
    a.out = out.data_ptr();
    a.count = static_cast<size_t>(in.numel() / world_size());
    run(a);
  }

 private:
  void run(comms::Args& a) {
    comms::Communicator& c = nccl_ ? *nccl_ : world_;
#ifdef REPRISE_TORCH_CUDA
    if (nccl_) a.stream = c10::cuda::getCurrentCUDAStream(device_.index()).stream();  // ordered with compute
#endif
    c.start(a)->wait_on(a.stream);
  }
  // `name` as the trace model normalizes it, `raw_name` as PyTorch's process groups record it.
  void record(const char* name, const char* raw_name, const at::Tensor& t, const std::vector<at::Tensor>& in,
              const std::vector<at::Tensor>& out, int64_t in_elems, int64_t out_elems) {
    capture::Session* s = capture::Session::active();
    if (!s) return;
    Collective c;
    c.name = name;
    c.raw_name = raw_name;
    c.dtype = c10::toString(t.scalar_type());  // "Float", "Long", ...
    c.in_elems = in_elems;
    c.out_elems = out_elems;
    c.pg_size = world_size();
    c.rank = rank();
    c.seq = seq_++;
    s->record_collective(c, in, out);
  }

  comms::Communicator& world_;
  at::Device device_;
  std::unique_ptr<comms::Communicator> nccl_;
  int64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<Collectives> make_collectives(comms::Communicator& world, at::Device device) {
  return std::make_unique<CommCollectives>(world, device);
}

}  // namespace reprise::workloads
