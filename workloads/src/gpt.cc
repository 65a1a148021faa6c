// GPT-style decoder: token and position embeddings, pre-LayerNorm blocks (causal self-attention, GELU MLP),
// cross-entropy over the vocabulary, AdamW; data parallel (gradient all_reduce) over ranks. Each block's forward, its
// gradient all_reduces and its optimizer updates run under a user scope "## block.N ##", so a generator can select or
// repeat one block (its backward follows it through the sequence numbers).
#include <ATen/record_function.h>

#include <cmath>

#include "workload.h"

namespace reprise::workloads::detail {
namespace {

class Gpt : public Workload {
 public:
  Gpt(const WorkloadOptions& o, at::Device d) : o_(o) {
    B_ = or_default(o.batch, 4);
    T_ = or_default(o.seq, 128);
    H_ = or_default(o.hidden, 256);
    NH_ = or_default(o.heads, 4);
    L_ = or_default(o.layers, 2);
    V_ = or_default(o.vocab, 2048);
    if (H_ % NH_ != 0) throw std::invalid_argument("gpt: --hidden must be a multiple of --heads");
    double s = 0.02;
    wte_ = add(parameter({V_, H_}, s, d));
    wpe_ = add(parameter({T_, H_}, s, d));
    for (int64_t l = 0; l < L_; ++l) {
      block_start_.push_back(params_.size());
      scope_names_.push_back("## block." + std::to_string(l) + " ##");
      Block b;
      b.ln1_w = add(ones({H_}, d));
      b.ln1_b = add(zeros({H_}, d));
      b.qkv_w = add(parameter({3 * H_, H_}, s, d));
      b.qkv_b = add(zeros({3 * H_}, d));
      b.proj_w = add(parameter({H_, H_}, s, d));
      b.proj_b = add(zeros({H_}, d));
      b.ln2_w = add(ones({H_}, d));
      b.ln2_b = add(zeros({H_}, d));
      b.fc_w = add(parameter({4 * H_, H_}, s, d));
      b.fc_b = add(zeros({4 * H_}, d));
      b.out_w = add(parameter({H_, 4 * H_}, s, d));
      b.out_b = add(zeros({H_}, d));
      blocks_.push_back(b);
    }
    block_start_.push_back(params_.size());
    lnf_w_ = add(ones({H_}, d));
    lnf_b_ = add(zeros({H_}, d));
    head_ = add(parameter({V_, H_}, s, d));
    auto lopt = at::TensorOptions().dtype(at::kLong).device(d);
    idx_ = at::randint(V_, {B_, T_}, lopt);
    targets_ = at::randint(V_, {B_, T_}, lopt);
    pos_ = at::arange(T_, lopt);
    mask_ = at::ones({T_, T_}, at::TensorOptions().dtype(at::kBool).device(d)).triu(1);
    for (const at::Tensor& p : params_) {
      exp_avg_.push_back(at::zeros_like(p));
      exp_avg_sq_.push_back(at::zeros_like(p));
    }
  }
  std::string describe() const override {
    return "gpt: batch " + std::to_string(B_) + ", seq " + std::to_string(T_) + ", hidden " + std::to_string(H_) +
           ", heads " + std::to_string(NH_) + ", layers " + std::to_string(L_) + ", vocab " + std::to_string(V_);
  }
  void step() override {
    const int64_t hd = H_ / NH_;
    at::Tensor x = at::embedding(wte_, idx_) + at::embedding(wpe_, pos_);
    for (size_t l = 0; l < blocks_.size(); ++l) {
      const Block& b = blocks_[l];
      RECORD_USER_SCOPE(scope_names_[l].c_str());
      at::Tensor h = at::layer_norm(x, {H_}, b.ln1_w, b.ln1_b);
      at::Tensor qkv = at::linear(h, b.qkv_w, b.qkv_b);
      auto parts = qkv.chunk(3, -1);
      auto heads = [&](const at::Tensor& t) { return t.view({B_, T_, NH_, hd}).transpose(1, 2); };
      at::Tensor q = heads(parts[0]), k = heads(parts[1]), v = heads(parts[2]);
      at::Tensor att = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd)));
      att = att.masked_fill(mask_, -INFINITY);
      att = at::softmax(att, -1);
      at::Tensor y = at::matmul(att, v).transpose(1, 2).contiguous().view({B_, T_, H_});
      x = x + at::linear(y, b.proj_w, b.proj_b);
      h = at::layer_norm(x, {H_}, b.ln2_w, b.ln2_b);
      h = at::gelu(at::linear(h, b.fc_w, b.fc_b));
      x = x + at::linear(h, b.out_w, b.out_b);
    }
    x = at::layer_norm(x, {H_}, lnf_w_, lnf_b_);
    at::Tensor logits = at::linear(x, head_);
    at::Tensor loss = at::cross_entropy_loss(logits.view({B_ * T_, V_}), targets_.view({B_ * T_}));
    loss.backward();
    for_each_group([&](size_t first, size_t last) {
      std::vector<at::Tensor> group(params_.begin() + first, params_.begin() + last);
      all_reduce_grads(group, o_.comm);
    });
    adamw();
  }

 private:
  struct Block {
    at::Tensor ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, out_w, out_b;
  };
  at::Tensor add(at::Tensor p) {
    params_.push_back(p);
    return p;
  }
  static at::Tensor ones(at::IntArrayRef s, at::Device d) {
    return at::ones(s, at::TensorOptions().device(d)).set_requires_grad(true);
  }
  static at::Tensor zeros(at::IntArrayRef s, at::Device d) {
    return at::zeros(s, at::TensorOptions().device(d)).set_requires_grad(true);
  }
  // f(first, last) over the parameters in order: the embeddings, each block (under its scope), the head.
  template <typename F>
  void for_each_group(F f) {
    f(0, block_start_.front());
    for (size_t l = 0; l < blocks_.size(); ++l) {
      RECORD_USER_SCOPE(scope_names_[l].c_str());
      f(block_start_[l], block_start_[l + 1]);
    }
    f(block_start_.back(), params_.size());
  }
  // AdamW (decoupled weight decay), one parameter at a time as torch.optim.AdamW(foreach=False) does.
  void adamw() {
    at::NoGradGuard no_grad;
    ++t_;
    for_each_group([&](size_t first, size_t last) { adamw(first, last); });
  }
  void adamw(size_t first, size_t last) {
    const double lr = 3e-4, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    const double bc1 = 1 - std::pow(b1, t_), bc2 = 1 - std::pow(b2, t_);
    for (size_t i = first; i < last; ++i) {
      at::Tensor& p = params_[i];
      at::Tensor g = p.grad();
      if (!g.defined()) continue;
      p.mul_(1 - lr * wd);
      exp_avg_[i].mul_(b1).add_(g, 1 - b1);
      exp_avg_sq_[i].mul_(b2).addcmul_(g, g, 1 - b2);
      at::Tensor denom = (exp_avg_sq_[i].sqrt() / std::sqrt(bc2)).add_(eps);
      p.addcdiv_(exp_avg_[i], denom, -lr / bc1);
      g.zero_();
    }
  }

  WorkloadOptions o_;
  int64_t B_, T_, H_, NH_, L_, V_;
  int64_t t_ = 0;
  std::vector<at::Tensor> params_, exp_avg_, exp_avg_sq_;
  at::Tensor wte_, wpe_, lnf_w_, lnf_b_, head_;
  std::vector<Block> blocks_;
  std::vector<size_t> block_start_;  // per block, then the head: its first parameter's index in params_
  std::vector<std::string> scope_names_;
  at::Tensor idx_, targets_, pos_, mask_;
};

}  // namespace

std::unique_ptr<Workload> make_gpt(const WorkloadOptions& o, at::Device d) { return std::make_unique<Gpt>(o, d); }

}  // namespace reprise::workloads::detail
