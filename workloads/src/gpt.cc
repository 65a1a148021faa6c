// GPT-style decoder: token and position embeddings, pre-LayerNorm blocks (causal self-attention, GELU MLP),
// cross-entropy over the vocabulary, AdamW; Megatron-style tensor, pipeline and data parallel (parallel.h), with
// ZeRO as an option. Each block's forward, its gradient collectives and its optimizer updates run under a user
// scope "## block.N ##" (N counts the whole model's blocks), so a generator can select or repeat one block (its
// backward follows it through the sequence numbers).
#include <ATen/record_function.h>

#include <cmath>

#include "parallel.h"
#include "workload.h"

namespace reprise::workloads::detail {
namespace {

// The model's sizes and parallelism, checked against the launch's world.
struct GptShape {
  int64_t B, S, H, NH, L, V;  // batch, sequence, hidden, heads, layers, vocabulary
  int64_t tp, pp, dp, M;      // parallel sizes, micro-batches per step
};

GptShape gpt_shape(const WorkloadOptions& o, int world) {
  GptShape g;
  g.B = or_default(o.batch, 4);
  g.S = or_default(o.seq, 128);
  g.H = or_default(o.hidden, 256);
  g.NH = or_default(o.heads, 4);
  g.L = or_default(o.layers, 2);
  g.V = or_default(o.vocab, 2048);
  if (g.H % g.NH != 0) throw std::invalid_argument("gpt: --hidden must be a multiple of --heads");
  if (o.tp < 1 || o.pp < 1 || o.dp < 0 || o.micro_batches < 0)
    throw std::invalid_argument(
        "gpt: tensor and pipeline parallel sizes must be >= 1, data parallel and "
        "micro-batches >= 0 (0: the default)");
  g.tp = o.tp;
  g.pp = o.pp;
  const std::string launch = ", but the launch has " + std::to_string(world) + " rank(s)";
  if (o.dp == 0 && world % (g.tp * g.pp) != 0)
    throw std::invalid_argument("gpt: tensor x pipeline parallel = " + std::to_string(g.tp) + " x " +
                                std::to_string(g.pp) + " = " + std::to_string(g.tp * g.pp) +
                                " ranks do not divide the launch's " + std::to_string(world));
  g.dp = o.dp > 0 ? o.dp : world / (g.tp * g.pp);
  if (g.tp * g.pp * g.dp != world)
    throw std::invalid_argument("gpt: tensor x pipeline x data parallel = " + std::to_string(g.tp) + " x " +
                                std::to_string(g.pp) + " x " + std::to_string(g.dp) + " = " +
                                std::to_string(g.tp * g.pp * g.dp) + " ranks" + launch);
  if (g.NH % g.tp != 0)
    throw std::invalid_argument("gpt: " + std::to_string(g.NH) + " attention heads do not split over tensor parallel " +
                                std::to_string(g.tp) + " (heads must be a multiple of it)");
  if (g.L % g.pp != 0)
    throw std::invalid_argument("gpt: " + std::to_string(g.L) + " layers do not split over " + std::to_string(g.pp) +
                                " pipeline stages (layers must be a multiple of them)");
  g.M = o.micro_batches > 0 ? o.micro_batches : (g.pp == 1 ? 1 : 2 * g.pp);
  if (g.B % g.M != 0)
    throw std::invalid_argument("gpt: " + std::to_string(g.M) + " micro-batches do not divide the batch of " +
                                std::to_string(g.B));
  if (o.zero && g.dp < 2)
    throw std::invalid_argument("gpt: ZeRO shards the optimizer over data parallel ranks, and there is " +
                                std::to_string(g.dp));
  return g;
}

// AdamW (decoupled weight decay) on one tensor, as torch.optim.AdamW(foreach=False) updates each parameter.
struct AdamW {
  double lr = 3e-4, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  void update(at::Tensor& p, const at::Tensor& g, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, int64_t t) const {
    const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
    p.mul_(1 - lr * wd);
    exp_avg.mul_(b1).add_(g, 1 - b1);
    exp_avg_sq.mul_(b2).addcmul_(g, g, 1 - b2);
    at::Tensor denom = (exp_avg_sq.sqrt() / std::sqrt(bc2)).add_(eps);
    p.addcdiv_(exp_avg, denom, -lr / bc1);
  }
};

class Gpt : public Workload {
 public:
  Gpt(const WorkloadOptions& o, at::Device d)
      : o_(o), g_(gpt_shape(o, o.comm ? o.comm->world_size() : 1)), options_(at::TensorOptions().device(d)) {
    par_ = make_parallel_groups(o.comm, g_.tp, g_.pp, g_.dp);
    first_stage_ = par_.pp_rank == 0;
    last_stage_ = par_.pp_rank == g_.pp - 1;
    build_parameters();
    build_data();
    if (o.zero)
      build_zero_buffers();
    else
      for (const at::Tensor& p : params_) {
        exp_avg_.push_back(at::zeros_like(p));
        exp_avg_sq_.push_back(at::zeros_like(p));
      }
  }

  std::string describe() const override {
    std::string s = "gpt: batch " + std::to_string(g_.B) + ", seq " + std::to_string(g_.S) + ", hidden " +
                    std::to_string(g_.H) + ", heads " + std::to_string(g_.NH) + ", layers " + std::to_string(g_.L) +
                    ", vocab " + std::to_string(g_.V);
    if (g_.tp * g_.pp * g_.dp > 1 || g_.M > 1 || o_.zero)
      s += "; tp " + std::to_string(g_.tp) + ", pp " + std::to_string(g_.pp) + ", dp " + std::to_string(g_.dp) +
           ", micro-batches " + std::to_string(g_.M) + (o_.zero ? ", ZeRO" : "");
    return s;
  }

  // The micro-batches' losses (each already scaled by 1/M) summed: the batch's mean loss.
  double loss() const override {
    if (!last_stage_) return std::nan("");
    double sum = 0;
    for (const at::Tensor& l : losses_) sum += l.item<double>();
    return sum;
  }

  void step() override {
    losses_.assign(static_cast<size_t>(g_.M), at::Tensor());
    std::vector<at::Tensor> inputs(static_cast<size_t>(g_.M)), outputs(static_cast<size_t>(g_.M));
    PipelineStage stage;
    stage.forward = [&](int m, const at::Tensor& received) {
      at::Tensor x = received;
      if (x.defined()) x.requires_grad_(true);  // a leaf: its gradient goes back to the previous stage
      inputs[static_cast<size_t>(m)] = x;
      outputs[static_cast<size_t>(m)] = forward(m, x);
      if (last_stage_) losses_[static_cast<size_t>(m)] = outputs[static_cast<size_t>(m)];
      return outputs[static_cast<size_t>(m)];
    };
    stage.backward = [&](int m, const at::Tensor& output_grad) {
      at::Tensor out = std::move(outputs[static_cast<size_t>(m)]), in = std::move(inputs[static_cast<size_t>(m)]);
      if (last_stage_)
        out.backward();
      else
        out.backward(output_grad);
      return first_stage_ ? at::Tensor() : in.grad();
    };
    if (par_.pp) {
      run_1f1b(*par_.pp, static_cast<int>(g_.M), {g_.B / g_.M, g_.S, g_.H}, options_, stage);
    } else {
      for (int m = 0; m < g_.M; ++m) {
        stage.forward(m, at::Tensor());
        stage.backward(m, at::Tensor());
      }
    }
    if (o_.zero) {
      zero_step();
    } else {
      for_each_group([&](size_t first, size_t last) {
        std::vector<at::Tensor> group(params_.begin() + first, params_.begin() + last);
        all_reduce_grads(group, par_.dp);
      });
      adamw();
    }
  }

 private:
  struct Block {
    at::Tensor ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, out_w, out_b;
  };

  enum class Init { Uniform, Ones, Zeros };
  using Shard = std::function<at::Tensor(const at::Tensor&)>;

  // Parameter `index` of the whole model, when this rank holds it: drawn whole from a seed of its own, then cut to
  // this rank's shard, so that the initial weights do not depend on the layout (a tensor or pipeline parallel run
  // starts from the weights of one rank's).
  at::Tensor parameter(int64_t index, bool here, at::IntArrayRef shape, Init init, const Shard& shard = {}) {
    if (!here) return at::Tensor();
    at::manual_seed(o_.seed * 1000003 + static_cast<uint64_t>(index));
    at::Tensor full = init == Init::Ones    ? at::ones(shape, options_)
                      : init == Init::Zeros ? at::zeros(shape, options_)
                                            : at::empty(shape, options_).uniform_(-0.02, 0.02);
    at::Tensor p = (shard ? shard(full) : full).contiguous().clone().set_requires_grad(true);
    params_.push_back(p);
    return p;
  }

  // The embeddings on the first stage, this stage's blocks, the final LayerNorm and head on the last. Column-parallel
  // weights keep this rank's output rows (for qkv: its heads' rows of each of q, k and v), row-parallel ones its
  // input columns; the row-parallel biases are whole, added once after the all_reduce.
  void build_parameters() {
    const int64_t H = g_.H, T = g_.tp, r = par_.tp_rank, per_stage = g_.L / g_.pp;
    auto rows = [&](int64_t n) -> Shard { return [=](const at::Tensor& t) { return t.narrow(0, r * n / T, n / T); }; };
    auto cols = [&](int64_t n) -> Shard { return [=](const at::Tensor& t) { return t.narrow(1, r * n / T, n / T); }; };
    const Shard qkv = [=](const at::Tensor& t) {  // [3H, ...] as [q; k; v]
      std::vector<int64_t> shape = t.sizes().vec();
      shape[0] = 3 * H / T;
      return t.view({3, H, t.numel() / (3 * H)}).narrow(1, r * H / T, H / T).reshape(shape);
    };
    int64_t k = 0;  // the parameter's index in the whole model
    wte_ = parameter(k++, first_stage_, {g_.V, H}, Init::Uniform);
    wpe_ = parameter(k++, first_stage_, {g_.S, H}, Init::Uniform);
    for (int64_t l = 0; l < g_.L; ++l) {
      const bool here = l / per_stage == par_.pp_rank;
      if (here) {
        block_start_.push_back(params_.size());
        scope_names_.push_back("## block." + std::to_string(l) + " ##");
      }
      Block b;
      b.ln1_w = parameter(k++, here, {H}, Init::Ones);
      b.ln1_b = parameter(k++, here, {H}, Init::Zeros);
      b.qkv_w = parameter(k++, here, {3 * H, H}, Init::Uniform, qkv);
      b.qkv_b = parameter(k++, here, {3 * H}, Init::Zeros, qkv);
      b.proj_w = parameter(k++, here, {H, H}, Init::Uniform, cols(H));
      b.proj_b = parameter(k++, here, {H}, Init::Zeros);
      b.ln2_w = parameter(k++, here, {H}, Init::Ones);
      b.ln2_b = parameter(k++, here, {H}, Init::Zeros);
      b.fc_w = parameter(k++, here, {4 * H, H}, Init::Uniform, rows(4 * H));
      b.fc_b = parameter(k++, here, {4 * H}, Init::Zeros, rows(4 * H));
      b.out_w = parameter(k++, here, {H, 4 * H}, Init::Uniform, cols(4 * H));
      b.out_b = parameter(k++, here, {H}, Init::Zeros);
      if (here) blocks_.push_back(b);
    }
    block_start_.push_back(params_.size());
    lnf_w_ = parameter(k++, last_stage_, {H}, Init::Ones);
    lnf_b_ = parameter(k++, last_stage_, {H}, Init::Zeros);
    head_ = parameter(k++, last_stage_, {g_.V, H}, Init::Uniform);
  }

  // The same data on the ranks of a data parallel replica (its tensor and pipeline parallel ranks), cut into
  // micro-batches up front so that the step slices nothing.
  void build_data() {
    at::manual_seed(o_.seed * 1000003 + 999983 + static_cast<uint64_t>(par_.dp_rank));
    auto lopt = options_.dtype(at::kLong);
    at::Tensor idx = at::randint(g_.V, {g_.B, g_.S}, lopt), targets = at::randint(g_.V, {g_.B, g_.S}, lopt);
    const int64_t mb = g_.B / g_.M;
    for (int64_t m = 0; m < g_.M; ++m) {
      idx_.push_back(g_.M == 1 ? idx : idx.narrow(0, m * mb, mb).clone());
      targets_.push_back(g_.M == 1 ? targets : targets.narrow(0, m * mb, mb).clone());
    }
    pos_ = at::arange(g_.S, lopt);
    mask_ = at::ones({g_.S, g_.S}, options_.dtype(at::kBool)).triu(1);
  }

  // This stage's forward of micro-batch m: from the embeddings or the received activation `x`, to the activation
  // for the next stage or, on the last, the loss (scaled by 1/M, as Megatron's, when there are several).
  at::Tensor forward(int m, at::Tensor x) {
    const int64_t Bm = g_.B / g_.M, S = g_.S, H = g_.H, hd = g_.H / g_.NH, heads = g_.NH / g_.tp;
    if (first_stage_) x = at::embedding(wte_, idx_[static_cast<size_t>(m)]) + at::embedding(wpe_, pos_);
    for (size_t l = 0; l < blocks_.size(); ++l) {
      const Block& b = blocks_[l];
      RECORD_USER_SCOPE(scope_names_[l].c_str());
      at::Tensor h = at::layer_norm(x, {H}, b.ln1_w, b.ln1_b);
      if (par_.tp) h = copy_to_tp(h, *par_.tp);
      at::Tensor qkv = at::linear(h, b.qkv_w, b.qkv_b);
      auto parts = qkv.chunk(3, -1);
      auto split_heads = [&](const at::Tensor& t) { return t.view({Bm, S, heads, hd}).transpose(1, 2); };
      at::Tensor q = split_heads(parts[0]), k = split_heads(parts[1]), v = split_heads(parts[2]);
      at::Tensor att = at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd)));
      att = att.masked_fill(mask_, -INFINITY);
      att = at::softmax(att, -1);
      at::Tensor y = at::matmul(att, v).transpose(1, 2).contiguous().view({Bm, S, heads * hd});
      x = x + row_parallel(y, b.proj_w, b.proj_b);
      h = at::layer_norm(x, {H}, b.ln2_w, b.ln2_b);
      if (par_.tp) h = copy_to_tp(h, *par_.tp);
      h = at::gelu(at::linear(h, b.fc_w, b.fc_b));
      x = x + row_parallel(h, b.out_w, b.out_b);
    }
    if (!last_stage_) return x;
    x = at::layer_norm(x, {H}, lnf_w_, lnf_b_);
    at::Tensor logits = at::linear(x, head_);
    at::Tensor loss =
        at::cross_entropy_loss(logits.view({Bm * S, g_.V}), targets_[static_cast<size_t>(m)].view({Bm * S}));
    return g_.M > 1 ? loss / static_cast<double>(g_.M) : loss;
  }
  // Megatron's RowParallelLinear: the partial products summed over the tensor parallel ranks, then the bias.
  at::Tensor row_parallel(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias) {
    if (!par_.tp) return at::linear(x, w, bias);
    return reduce_from_tp(at::linear(x, w), *par_.tp) + bias;
  }

  // f(first, last) over this stage's parameters in order: the embeddings (first stage), each block (under its
  // scope), the final LayerNorm and head (last stage).
  template <typename F>
  void for_each_group(F f) {
    if (first_stage_) f(0, block_start_.front());
    for (size_t l = 0; l < blocks_.size(); ++l) {
      RECORD_USER_SCOPE(scope_names_[l].c_str());
      f(block_start_[l], block_start_[l + 1]);
    }
    if (last_stage_) f(block_start_.back(), params_.size());
  }

  void adamw() {
    c10::NoGradGuard no_grad;
    ++t_;
    for_each_group([&](size_t first, size_t last) {
      for (size_t i = first; i < last; ++i) {
        at::Tensor g = params_[i].grad();
        if (!g.defined()) continue;
        opt_.update(params_[i], g, exp_avg_[i], exp_avg_sq_[i], t_);
        g.zero_();
      }
    });
  }

  // ZeRO (Megatron's distributed optimizer, DeepSpeed's stages 1 and 2): per group of parameters one flat parameter
  // buffer and one flat gradient buffer that the parameters and their gradients are views of (autograd accumulates
  // into them), padded to a multiple of dp; each rank keeps the optimizer state of its 1/dp shard only.
  struct ZeroGroup {
    at::Tensor params, grads;      // flat, padded
    at::Tensor shard, grad_shard;  // this rank's part: a master copy of the parameters, the reduced gradients
    at::Tensor exp_avg, exp_avg_sq;
  };
  void build_zero_buffers() {
    c10::NoGradGuard no_grad;
    for_each_group([&](size_t first, size_t last) {
      int64_t n = 0;
      for (size_t i = first; i < last; ++i) n += params_[i].numel();
      const int64_t padded = (n + g_.dp - 1) / g_.dp * g_.dp, part = padded / g_.dp;
      ZeroGroup z;
      z.params = at::zeros({padded}, options_);
      z.grads = at::zeros({padded}, options_);
      int64_t off = 0;
      for (size_t i = first; i < last; ++i) {
        at::Tensor& p = params_[i];
        const int64_t numel = p.numel();
        std::vector<int64_t> sizes = p.sizes().vec(), strides = p.strides().vec();
        z.params.narrow(0, off, numel).copy_(p.view(-1));
        p.set_(z.params.storage(), off, sizes, strides);  // the Block's handles see the same tensor
        p.mutable_grad() = z.grads.narrow(0, off, numel).view(sizes);
        off += numel;
      }
      z.shard = z.params.narrow(0, par_.dp_rank * part, part).clone();
      z.grad_shard = at::zeros({part}, options_);
      z.exp_avg = at::zeros({part}, options_);
      z.exp_avg_sq = at::zeros({part}, options_);
      zero_.push_back(std::move(z));
    });
  }
  // reduce_scatter of the gradients, AdamW on this rank's shard, all_gather of the parameters.
  void zero_step() {
    c10::NoGradGuard no_grad;
    ++t_;
    size_t k = 0;
    for_each_group([&](size_t, size_t) {
      ZeroGroup& z = zero_[k++];
      par_.dp->reduce_scatter(z.grad_shard, z.grads);
      z.grad_shard.div_(static_cast<double>(g_.dp));
      opt_.update(z.shard, z.grad_shard, z.exp_avg, z.exp_avg_sq, t_);
      par_.dp->all_gather(z.params, z.shard);
      z.grads.zero_();
    });
  }

  WorkloadOptions o_;
  GptShape g_;
  at::TensorOptions options_;  // the device's, float
  ParallelGroups par_;
  bool first_stage_ = true, last_stage_ = true;
  int64_t t_ = 0;
  AdamW opt_;
  std::vector<at::Tensor> params_, exp_avg_, exp_avg_sq_;
  std::vector<ZeroGroup> zero_;
  at::Tensor wte_, wpe_, lnf_w_, lnf_b_, head_;
  std::vector<Block> blocks_;
  std::vector<size_t> block_start_;  // per block of this stage, then the head: its first parameter's index
  std::vector<std::string> scope_names_;
  std::vector<at::Tensor> idx_, targets_;  // per micro-batch
  std::vector<at::Tensor> losses_;         // the last step's, per micro-batch (last stage)
  at::Tensor pos_, mask_;
};

}  // namespace

void check_gpt(const WorkloadOptions& o, int world) { gpt_shape(o, world); }

std::unique_ptr<Workload> make_gpt(const WorkloadOptions& o, at::Device d) { return std::make_unique<Gpt>(o, d); }

}  // namespace reprise::workloads::detail
