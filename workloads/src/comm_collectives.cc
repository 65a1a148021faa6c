// The workloads' collectives over Reprise's communicator (MPI on CPUs, NCCL on GPUs), recorded in the capture
// Session as record_param_comms nodes, as PyTorch 2.x's ProcessGroupNCCL records its own: per group a collective
// seq and a separate p2p seq (seqCollective_, seqP2P_), the group-local rank (for send/recv the peer's), and a
// batch of sends and receives as its members, then "coalesced", then "wait" once it completed.
#include <ATen/ATen.h>

#ifdef REPRISE_TORCH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <numeric>

#include "reprise/capture/session.h"
#include "reprise/common/clock.h"
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

void require_contiguous(const char* op, const at::Tensor& t) {
  if (!t.is_contiguous()) throw std::invalid_argument(std::string(op) + ": the tensor must be contiguous");
}

// An input and an output: both contiguous, of one dtype (the collective runs in the input's).
void require_pair(const char* op, const at::Tensor& out, const at::Tensor& in) {
  require_contiguous(op, in);
  require_contiguous(op, out);
  if (in.scalar_type() != out.scalar_type())
    throw std::invalid_argument(std::string(op) + ": input " + c10::toString(in.scalar_type()) + " and output " +
                                c10::toString(out.scalar_type()) + " must be of one dtype");
}

// What record_param_comms writes of one operation; the group's fields are added by record().
struct Record {
  const char* name;      // as the trace model normalizes it
  const char* raw_name;  // as PyTorch records it
  std::string dtype;     // "Float", "Long", ...
  std::vector<at::Tensor> in, out;
  int64_t in_elems = 0, out_elems = 0;
  int64_t seq = 0;
  int rank = 0;  // the group-local rank written: this rank's, or for send/recv the peer's
  bool p2p = false;
};

class CommCollectives : public Collectives {
 public:
  // The world.
  CommCollectives(comms::Communicator& world, at::Device device) : device_(device), root_(this) {
    if (device.is_cuda()) owned_ = comms::make_nccl(world, device.index());
    comm_ = owned_ ? owned_.get() : &world;
    info_ = {"0", "default_pg", std::vector<int>(static_cast<size_t>(world.size()))};
    std::iota(info_.ranks.begin(), info_.ranks.end(), 0);
  }
  // A group of the world `root`.
  CommCollectives(CommCollectives& root, std::unique_ptr<comms::Communicator> comm, GroupInfo info)
      : device_(root.device_), root_(&root), owned_(std::move(comm)), comm_(owned_.get()), info_(std::move(info)) {}

  int rank() const override { return comm_->rank(); }
  int world_size() const override { return comm_->size(); }

  void all_reduce(at::Tensor& t) override {
    require_contiguous("all_reduce", t);
    run_recorded(args(comms::Kind::AllReduce, t, t, t.numel()),
                 {"all_reduce", "allreduce", dtype(t), {t}, {t}, t.numel(), t.numel(), seq_++, rank()});
  }

  void all_to_all(at::Tensor& out, const at::Tensor& in) override {
    require_pair("all_to_all", out, in);
    if (!in.is_contiguous() || !out.is_contiguous() || in.numel() != out.numel() || in.numel() % world_size() != 0)
      throw std::invalid_argument("all_to_all: contiguous tensors of equal size, divisible by the group size");
    run_recorded(args(comms::Kind::AllToAll, in, out, in.numel() / world_size()),
                 {"all_to_all", "all_to_all", dtype(in), {in}, {out}, in.numel(), out.numel(), seq_++, rank()});
  }

  // PyTorch's all_to_all_single with split sizes records itself as alltoall_base, the splits in rows of dim 0.
  void all_to_all_v(at::Tensor& out, const at::Tensor& in, const std::vector<int64_t>& out_splits,
                    const std::vector<int64_t>& in_splits) override {
    require_pair("all_to_all_v", out, in);
    const size_t n = static_cast<size_t>(world_size());
    auto check = [&](const char* which, const at::Tensor& t, const std::vector<int64_t>& splits) {
      int64_t rows = 0;
      bool negative = false;
      for (int64_t x : splits) rows += x, negative |= x < 0;
      if (t.dim() < 1 || splits.size() != n || negative || rows != t.size(0))
        throw std::invalid_argument(std::string("all_to_all_v: ") + which + ": " + std::to_string(splits.size()) +
                                    " splits for " + std::to_string(n) + " ranks, none negative, must add up to its " +
                                    (t.dim() < 1 ? "dim 0 (it has none)" : std::to_string(t.size(0)) + " rows"));
    };
    check("in", in, in_splits);
    check("out", out, out_splits);
    if (in.size(0) > 0 && out.size(0) > 0 && in.numel() / in.size(0) != out.numel() / out.size(0))
      throw std::invalid_argument("all_to_all_v: rows of " + std::to_string(in.numel() / in.size(0)) + " and " +
                                  std::to_string(out.numel() / out.size(0)) + " elements: they must be the same");
    // Counts and displacements per peer as replay sizes a trace's all_to_allv.
    comms::Args a = args(comms::Kind::AllToAllV, in, out, 0);
    size_t in_elems = 0, out_elems = 0;
    comms::size_from_trace(comms::Kind::AllToAllV, {in.numel(), out.numel(), in_splits, out_splits}, world_size(), a,
                           in_elems, out_elems);
    run_recorded(std::move(a),
                 {"all_to_allv", "alltoall_base", dtype(in), {in}, {out}, in.numel(), out.numel(), seq_++, rank()},
                 in_splits, out_splits);
  }

  // PyTorch's reduce_scatter_tensor and all_gather_into_tensor (what Megatron's distributed optimizer and ZeRO
  // call) record themselves as _reduce_scatter_base and _allgather_base.
  void reduce_scatter(at::Tensor& out, const at::Tensor& in) override {
    require_pair("reduce_scatter", out, in);
    if (!in.is_contiguous() || !out.is_contiguous() || in.numel() != out.numel() * world_size())
      throw std::invalid_argument("reduce_scatter: contiguous tensors, the input group size times the output");
    run_recorded(
        args(comms::Kind::ReduceScatter, in, out, out.numel()),
        {"reduce_scatter", "_reduce_scatter_base", dtype(in), {in}, {out}, in.numel(), out.numel(), seq_++, rank()});
  }

  void all_gather(at::Tensor& out, const at::Tensor& in) override {
    require_pair("all_gather", out, in);
    if (!in.is_contiguous() || !out.is_contiguous() || out.numel() != in.numel() * world_size())
      throw std::invalid_argument("all_gather: contiguous tensors, the output group size times the input");
    run_recorded(args(comms::Kind::AllGather, in, out, in.numel()),
                 {"all_gather", "_allgather_base", dtype(in), {in}, {out}, in.numel(), out.numel(), seq_++, rank()});
  }

  void send(const at::Tensor& t, int peer) override {
    require_contiguous("send", t);
    run_recorded(p2p_args({true, t, peer}),
                 {"send", "send", dtype(t), {t}, {t}, t.numel(), t.numel(), p2p_seq_++, peer, true});
  }

  void recv(at::Tensor& t, int peer) override {
    require_contiguous("recv", t);
    run_recorded(p2p_args({false, t, peer}),
                 {"recv", "recv", dtype(t), {t}, {t}, t.numel(), t.numel(), p2p_seq_++, peer, true});
  }

  void batch_p2p(const std::vector<P2P>& ops) override {
    if (ops.empty()) return;
    const int64_t seq = p2p_seq_++;
    std::vector<comms::Args> all;
    for (const P2P& p : ops) {
      require_contiguous(p.send ? "send" : "recv", p.tensor);
      const char* name = p.send ? "send" : "recv";
      record(
          {name, name, dtype(p.tensor), {p.tensor}, {p.tensor}, p.tensor.numel(), p.tensor.numel(), seq, p.peer, true},
          -1);
      all.push_back(p2p_args(p));
    }
    record({"coalesced", "coalesced", "Byte", {}, {}, 0, 0, seq, rank(), true}, -1);
    set_stream(all.front());
    const int64_t began = now_ns();  // the batch's time is its wait's, as PyTorch's batch_isend_irecv spends it
    comm_->start_group(all)->wait_on(all.front().stream);
    record({"wait", "wait", "Byte", {}, {}, 0, 0, seq, rank(), true}, began);
  }

  Collectives* new_group(const std::vector<int>& ranks, const std::string& desc) override {
    if (root_ != this) throw std::logic_error("new_group: groups are made from the world's collectives");
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] < 0 || ranks[i] >= world_size() || (i > 0 && ranks[i] <= ranks[i - 1]))
        throw std::invalid_argument("new_group: ranks must be ascending ranks of the world");
    if (ranks.empty()) throw std::invalid_argument("new_group: a group needs ranks");
    GroupInfo info{std::to_string(named_++), desc, ranks};
    std::unique_ptr<comms::Communicator> sub = comm_->split(ranks);
    if (!sub) return nullptr;
    groups_.push_back(std::make_unique<CommCollectives>(*this, std::move(sub), std::move(info)));
    return groups_.back().get();
  }

  std::vector<GroupInfo> groups() const override {
    std::vector<GroupInfo> v{info_};
    for (const auto& g : groups_) v.push_back(g->info_);
    return v;
  }
  int groups_named() const override { return named_; }

 private:
  static std::string dtype(const at::Tensor& t) { return c10::toString(t.scalar_type()); }

  comms::Args args(comms::Kind kind, const at::Tensor& in, const at::Tensor& out, int64_t count) const {
    comms::Args a;
    a.kind = kind;
    a.dtype = comm_dtype(in.scalar_type());
    a.in = in.data_ptr();
    a.out = out.data_ptr();
    a.count = static_cast<size_t>(count);
    return a;
  }
  comms::Args p2p_args(const P2P& p) const {
    comms::Args a = args(p.send ? comms::Kind::Send : comms::Kind::Recv, p.tensor, p.tensor, p.tensor.numel());
    a.peer = p.peer;
    return a;
  }
  void set_stream(comms::Args& a) const {
#ifdef REPRISE_TORCH_CUDA
    if (device_.is_cuda()) a.stream = c10::cuda::getCurrentCUDAStream(device_.index()).stream();  // with compute
#else
    (void)a;
#endif
  }
  void run(comms::Args a) {
    set_stream(a);
    comm_->start(a)->wait_on(a.stream);
  }
  // Runs it, then records it as timed from its start to its return.
  void run_recorded(comms::Args a, const Record& r, const std::vector<int64_t>& in_splits = {},
                    const std::vector<int64_t>& out_splits = {}) {
    const int64_t began = now_ns();
    run(std::move(a));
    record(r, began, in_splits, out_splits);
  }

  // Once the operation returned (`began`: now_ns() before it started, -1 untimed); all_to_allv's splits: rows of
  // dim 0 per rank.
  void record(const Record& r, int64_t began, const std::vector<int64_t>& in_splits = {},
              const std::vector<int64_t>& out_splits = {}) const {
    capture::Session* s = capture::Session::active();
    if (!s) return;
    Collective c;
    c.name = r.name;
    c.raw_name = r.raw_name;
    c.dtype = r.dtype;
    c.in_elems = r.in_elems;
    c.out_elems = r.out_elems;
    c.seq = r.seq;
    c.rank = r.rank;
    c.p2p = r.p2p;
    c.in_splits = in_splits;
    c.out_splits = out_splits;
    c.pg_name = info_.name;
    c.pg_desc = info_.desc;
    c.pg_size = static_cast<int64_t>(info_.ranks.size());
    c.global_rank_start = info_.ranks.front();
    // Every group made here is evenly strided (Megatron's layouts are); a lone rank's stride is 1.
    c.global_rank_stride = info_.ranks.size() > 1 ? info_.ranks[1] - info_.ranks[0] : 1;
    s->record_collective(c, r.in, r.out, began);
  }

  at::Device device_;
  CommCollectives* root_;
  std::unique_ptr<comms::Communicator> owned_;  // the world's NCCL communicator, or a group's
  comms::Communicator* comm_;                   // the one operations run on
  GroupInfo info_;
  int64_t seq_ = 0, p2p_seq_ = 0;
  // The world's: every group named so far (members or not) and those this rank belongs to.
  int named_ = 1;
  std::vector<std::unique_ptr<CommCollectives>> groups_;
};

}  // namespace

std::unique_ptr<Collectives> make_collectives(comms::Communicator& world, at::Device device) {
  return std::make_unique<CommCollectives>(world, device);
}

}  // namespace reprise::workloads
