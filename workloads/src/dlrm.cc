// DLRM-style recommendation model: a bottom MLP on dense features, EmbeddingBag tables sharded over ranks (model
// parallel, exchanged by all_to_all), pairwise dot interaction, a top MLP, BCE loss; the MLPs are data parallel
// (gradient all_reduce). With one rank it is the same model without the collectives.
#include "workload.h"

namespace reprise::workloads::detail {
namespace {

class Dlrm : public Workload {
 public:
  Dlrm(const WorkloadOptions& o, at::Device d) : o_(o) {
    W_ = o.comm ? o.comm->world_size() : 1;
    rank_ = o.comm ? o.comm->rank() : 0;
    B_ = or_default(o.batch, 128);
    T_ = or_default(o.tables, 8);
    R_ = or_default(o.rows, 50000);
    D_ = or_default(o.dim, 64);
    Lk_ = or_default(o.lookups, 20);
    H_ = or_default(o.hidden, 256);
    if (T_ % W_ != 0)
      throw std::invalid_argument(std::string("dlrm: the table count (") + std::to_string(T_) +
                                  ") must be a multiple of the world size (" + std::to_string(W_) + ")");
    Tl_ = T_ / W_;
    for (int64_t t = 0; t < Tl_; ++t) tables_.push_back(parameter({R_, D_}, 0.01, d));
    int64_t dense = 13;
    bottom_ = {parameter({H_, dense}, 0.1, d), parameter({H_}, 0.1, d), parameter({D_, H_}, 0.05, d),
               parameter({D_}, 0.05, d)};
    int64_t n = T_ + 1, pairs = n * (n - 1) / 2;
    top_ = {parameter({H_, D_ + pairs}, 0.05, d), parameter({H_}, 0.05, d), parameter({1, H_}, 0.05, d),
            parameter({1}, 0.05, d)};
    auto f = at::TensorOptions().device(d);
    auto l = at::TensorOptions().dtype(at::kLong).device(d);
    dense_ = at::rand({B_, dense}, f);
    labels_ = at::randint(2, {B_, 1}, f);
    for (int64_t t = 0; t < Tl_; ++t) indices_.push_back(at::randint(R_, {B_ * W_ * Lk_}, l));
    offsets_ = at::arange(0, B_ * W_ * Lk_, Lk_, l);
    at::Tensor tri = at::tril_indices(n, n, -1, l);
    pair_index_ = tri[0] * n + tri[1];
  }
  std::string describe() const override {
    return "dlrm: batch " + std::to_string(B_) + " per rank, tables " + std::to_string(T_) + " x " +
           std::to_string(R_) + " x " + std::to_string(D_) + ", " + std::to_string(Lk_) + " lookups, mlp " +
           std::to_string(H_) + ", world " + std::to_string(W_);
  }
  void step() override {
    // Embeddings of my tables for the whole global batch, then each rank gets its batch's rows of every table.
    std::vector<at::Tensor> bags;
    for (int64_t t = 0; t < Tl_; ++t)
      bags.push_back(std::get<0>(at::embedding_bag(tables_[t], indices_[t], offsets_, false, /*mode=sum*/ 0)));
    at::Tensor send = at::stack(bags, 0).view({Tl_, W_, B_, D_}).permute({1, 0, 2, 3}).contiguous();
    at::Tensor recv_leaf;
    if (W_ > 1) {
      at::Tensor recv = at::empty_like(send);
      o_.comm->all_to_all(recv, send.detach());
      recv_leaf = recv.requires_grad_(true);
    } else {
      recv_leaf = send;
    }
    at::Tensor emb = recv_leaf.permute({2, 0, 1, 3}).reshape({B_, T_, D_});

    at::Tensor x = at::relu(at::linear(dense_, bottom_[0], bottom_[1]));
    x = at::relu(at::linear(x, bottom_[2], bottom_[3]));
    at::Tensor z = at::cat({x.unsqueeze(1), emb}, 1);
    at::Tensor inter = at::bmm(z, z.transpose(1, 2)).view({B_, (T_ + 1) * (T_ + 1)});
    at::Tensor pairs = at::index_select(inter, 1, pair_index_);
    at::Tensor top = at::relu(at::linear(at::cat({x, pairs}, 1), top_[0], top_[1]));
    at::Tensor logits = at::linear(top, top_[2], top_[3]);
    at::Tensor loss = at::binary_cross_entropy_with_logits(logits, labels_);
    loss.backward();
    if (W_ > 1) {
      // The gradient of the exchanged embeddings goes back the way they came.
      at::Tensor back = at::empty_like(send);
      o_.comm->all_to_all(back, recv_leaf.grad());
      send.backward(back);
    }
    std::vector<at::Tensor> mlp(bottom_);
    mlp.insert(mlp.end(), top_.begin(), top_.end());
    all_reduce_grads(mlp, o_.comm);
    sgd(mlp, 0.01);
    sgd(tables_, 0.01);
  }

 private:
  WorkloadOptions o_;
  int64_t W_, rank_, B_, T_, Tl_, R_, D_, Lk_, H_;
  std::vector<at::Tensor> tables_, bottom_, top_, indices_;
  at::Tensor dense_, labels_, offsets_, pair_index_;
};

}  // namespace

std::unique_ptr<Workload> make_dlrm(const WorkloadOptions& o, at::Device d) { return std::make_unique<Dlrm>(o, d); }

}  // namespace reprise::workloads::detail
