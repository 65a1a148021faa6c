// DLRM-style recommendation model: a bottom MLP on dense features, EmbeddingBag tables sharded over ranks (model
// parallel, exchanged by all_to_all), pairwise dot interaction, a top MLP, BCE loss; the MLPs are data parallel
// (gradient all_reduce). With one rank it is the same model without the collectives. Tables may differ in rows and
// pooling, and a sharding plan may place them unevenly (exchanged by all_to_allv then): what sharding plans change.
#include <algorithm>
#include <map>

#include "workload.h"

namespace reprise::workloads::detail {
namespace {

// Table t's rows and lookups per sample: its own entry, else --rows / --lookups, else the defaults.
int64_t table_rows(const WorkloadOptions& o, int64_t t) {
  return o.table_rows.empty() ? or_default(o.rows, 50000) : o.table_rows[static_cast<size_t>(t)];
}
int64_t table_lookups(const WorkloadOptions& o, int64_t t) {
  return o.table_lookups.empty() ? or_default(o.lookups, 20) : o.table_lookups[static_cast<size_t>(t)];
}

class Dlrm : public Workload {
 public:
  Dlrm(const WorkloadOptions& o, at::Device d) : o_(o) {
    W_ = o.comm ? o.comm->world_size() : 1;
    rank_ = o.comm ? o.comm->rank() : 0;
    B_ = or_default(o.batch, 128);
    T_ = dlrm_tables(o);
    D_ = or_default(o.dim, 64);
    H_ = or_default(o.hidden, 256);
    // Which tables each rank holds: the plan, else rank r the r-th block (check_dlrm: T_ divides over the ranks).
    held_.assign(static_cast<size_t>(W_), 0);
    for (int64_t t = 0; t < T_; ++t) {
      const int64_t owner = o.shards.empty() ? t / (T_ / W_) : o.shards[static_cast<size_t>(t)];
      ++held_[static_cast<size_t>(owner)];
      if (owner == rank_) mine_.push_back(t);
    }
    even_ = std::count(held_.begin(), held_.end(), held_.front()) == W_;
    Tl_ = static_cast<int64_t>(mine_.size());
    for (int64_t t : mine_) tables_.push_back(parameter({rows(t), D_}, 0.01, d));
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
    for (int64_t t : mine_) {
      const int64_t k = lookups(t);
      indices_.push_back(at::randint(rows(t), {B_ * W_ * k}, l));
      auto& off = offsets_[k];  // tables of one pooling factor share their offsets
      if (!off.defined()) off = at::arange(0, B_ * W_ * k, k, l);
    }
    at::Tensor tri = at::tril_indices(n, n, -1, l);
    pair_index_ = tri[0] * n + tri[1];
  }
  std::string describe() const override {
    std::string s = "dlrm: batch " + std::to_string(B_) + " per rank, tables " + std::to_string(T_) + " x " +
                    range(table_rows) + " x " + std::to_string(D_) + ", " + range(table_lookups) + " lookups, mlp " +
                    std::to_string(H_) + ", world " + std::to_string(W_);
    if (!o_.shards.empty()) {
      s += ", shards";
      for (size_t t = 0; t < o_.shards.size(); ++t) s += (t ? "," : " ") + std::to_string(o_.shards[t]);
    }
    return s;
  }
  void step() override {
    // Embeddings of my tables for the whole global batch, then each rank gets its batch's rows of every table.
    std::vector<at::Tensor> bags;
    for (size_t i = 0; i < mine_.size(); ++i)
      bags.push_back(std::get<0>(at::embedding_bag(tables_[i], indices_[i], offsets_.at(lookups(mine_[i])), false,
                                                   /*mode=sum*/ 0)));
    // What each rank gets, in rank order: its batch's rows of every table this rank holds.
    at::Tensor send = Tl_ > 0 ? at::stack(bags, 0).view({Tl_, W_, B_, D_}).permute({1, 0, 2, 3}).contiguous()
                              : at::empty({W_, 0, B_, D_}, dense_.options());
    at::Tensor recv_leaf;
    std::vector<int64_t> in_splits, out_splits;  // uneven plans: rows of [rank-major tables x batch, dim]
    for (int64_t r = 0; r < W_; ++r) in_splits.push_back(Tl_ * B_), out_splits.push_back(held_[r] * B_);
    if (W_ > 1 && even_) {
      at::Tensor recv = at::empty_like(send);
      o_.comm->all_to_all(recv, send.detach());
      recv_leaf = recv.requires_grad_(true);
    } else if (W_ > 1) {
      at::Tensor recv = at::empty({T_ * B_, D_}, send.options());
      o_.comm->all_to_all_v(recv, send.detach().view({W_ * Tl_ * B_, D_}), out_splits, in_splits);
      recv_leaf = recv.requires_grad_(true);
    } else {
      recv_leaf = send;
    }
    // Tables in the order of the ranks holding them (the interaction takes every pair, whatever the order).
    at::Tensor emb =
        even_ ? recv_leaf.permute({2, 0, 1, 3}).reshape({B_, T_, D_}) : recv_leaf.view({T_, B_, D_}).permute({1, 0, 2});

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
      if (even_) {
        o_.comm->all_to_all(back, recv_leaf.grad());
      } else {
        at::Tensor flat = back.view({W_ * Tl_ * B_, D_});
        o_.comm->all_to_all_v(flat, recv_leaf.grad(), in_splits, out_splits);
      }
      if (Tl_ > 0) send.backward(back);
    }
    std::vector<at::Tensor> mlp(bottom_);
    mlp.insert(mlp.end(), top_.begin(), top_.end());
    all_reduce_grads(mlp, o_.comm);
    sgd(mlp, 0.01);
    sgd(tables_, 0.01);
  }

 private:
  int64_t rows(int64_t t) const { return table_rows(o_, t); }
  int64_t lookups(int64_t t) const { return table_lookups(o_, t); }
  // "50000", or "1000..100000" for tables of different sizes.
  std::string range(int64_t (*of)(const WorkloadOptions&, int64_t)) const {
    int64_t lo = of(o_, 0), hi = lo;
    for (int64_t t = 1; t < T_; ++t) lo = std::min(lo, of(o_, t)), hi = std::max(hi, of(o_, t));
    return lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
  }

  WorkloadOptions o_;
  int64_t W_, rank_, B_, T_, Tl_, D_, H_;
  std::vector<int64_t> held_, mine_;  // tables per rank; the tables this rank holds
  bool even_ = true;                  // every rank holds as many tables: all_to_all, else all_to_allv
  std::vector<at::Tensor> tables_, bottom_, top_, indices_;
  std::map<int64_t, at::Tensor> offsets_;  // by pooling factor
  at::Tensor dense_, labels_, pair_index_;
};

}  // namespace

int64_t dlrm_tables(const WorkloadOptions& o) {
  if (o.tables > 0) return o.tables;
  for (const std::vector<int64_t>* v : {&o.table_rows, &o.table_lookups, &o.shards})
    if (!v->empty()) return static_cast<int64_t>(v->size());
  return or_default(o.tables, 8);
}

void check_dlrm(const WorkloadOptions& o, int world) {
  const int64_t tables = dlrm_tables(o);
  const std::pair<const char*, const std::vector<int64_t>*> lists[] = {
      {"--table-rows", &o.table_rows}, {"--table-lookups", &o.table_lookups}, {"--shards", &o.shards}};
  for (const auto& [name, v] : lists) {
    if (!v->empty() && static_cast<int64_t>(v->size()) != tables)
      throw std::invalid_argument(std::string("dlrm: ") + name + " has " + std::to_string(v->size()) + " entries for " +
                                  std::to_string(tables) + " tables (one per table)");
    for (size_t t = 0; t < v->size(); ++t) {
      const int64_t x = (*v)[t];
      const bool bad = v == &o.shards ? x < 0 || x >= world : x < 1;
      if (bad)
        throw std::invalid_argument(
            std::string("dlrm: ") + name + ": table " + std::to_string(t) + " has " + std::to_string(x) +
            (v == &o.shards ? ", not a rank of the " + std::to_string(world) + " launched" : ", not a positive count"));
    }
  }
  // Each table's indices for the global batch: batch x ranks x lookups, which must stay a sane tensor size.
  const int64_t batch = or_default(o.batch, 128);
  for (int64_t t = 0; t < tables; ++t) {
    const int64_t k = table_lookups(o, t);
    int64_t n = 0;
    if (__builtin_mul_overflow(batch, int64_t{world}, &n) || __builtin_mul_overflow(n, k, &n) || n > (int64_t{1} << 40))
      throw std::invalid_argument("dlrm: table " + std::to_string(t) + ": batch " + std::to_string(batch) + " x " +
                                  std::to_string(world) + " ranks x " + std::to_string(k) +
                                  " lookups is over 2^40 indices");
  }
  if (o.shards.empty() && tables % world != 0)
    throw std::invalid_argument("dlrm: the table count (" + std::to_string(tables) +
                                ") must be a multiple of the world size (" + std::to_string(world) +
                                "), or --shards must place each table");
}

std::unique_ptr<Workload> make_dlrm(const WorkloadOptions& o, at::Device d) { return std::make_unique<Dlrm>(o, d); }

}  // namespace reprise::workloads::detail
