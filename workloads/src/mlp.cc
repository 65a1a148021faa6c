// MLP: Linear+ReLU layers, MSE loss, SGD; data parallel (gradient all_reduce) when there are several ranks. With an
// anti-pattern built in (WorkloadOptions::anti_pattern), the same model with a sync or dtype churn in each step,
// (unfused) with a tanh GELU between its layers written out as eight elementwise ops instead of the one fused op,
// (loop) with its SGD step one parameter at a time inside an optimizer scope instead of as foreach ops, or
// (unaligned) with a hidden size that is not a multiple of 8 instead of that size padded to one, or (loader) with each
// step's batch made sample by sample inside a DataLoader scope instead of made beforehand.
#include <ATen/record_function.h>

#include "reprise/common/clock.h"
#include "workload.h"

namespace reprise::workloads::detail {
namespace {

class Mlp : public Workload {
 public:
  Mlp(const WorkloadOptions& o, at::Device d) : o_(o) {
    B_ = or_default(o.batch, 64);
    H_ = or_default(o.hidden, 1024);
    L_ = or_default(o.layers, 4);
    // unaligned: the model with the anti-pattern has hidden size U (--hidden less one, unless it is already off a
    // multiple of 8), the one without it U padded to a multiple of 8 (--hidden itself for a multiple of 8).
    if (o.anti_pattern == "unaligned") {
      const int64_t u = H_ % 8 == 0 ? H_ - 1 : H_;
      models_.push_back(Model(B_, u, L_, d));
      H_ = (u + 7) / 8 * 8;
    }
    models_.push_back(Model(B_, H_, L_, d));
  }
  std::string describe() const override {
    return "mlp: batch " + std::to_string(B_) + ", hidden " +
           (models_.size() > 1
                ? std::to_string(models_[0].hidden) + " (without the anti-pattern " + std::to_string(H_) + ")"
                : std::to_string(H_)) +
           ", layers " + std::to_string(L_) + (o_.anti_pattern.empty() ? "" : ", anti-pattern " + o_.anti_pattern);
  }
  void set_anti_pattern(bool on) override { on_ = on; }
  void step() override {
    Model& m = on_ ? models_.front() : models_.back();
    std::vector<at::Tensor>& params = m.params;
    at::Tensor h = on_ && o_.anti_pattern == "loader" ? load_batch(m.x) : m.x;
    for (int64_t l = 0; l < L_; ++l) {
      h = at::linear(h, params[2 * l], params[2 * l + 1]);
      if (l + 1 < L_ && o_.anti_pattern == "unfused")
        h = on_ ? unfused_gelu(h) : at::gelu(h, "tanh");
      else if (l + 1 < L_)
        h = at::relu(h);
      if (l + 1 < L_ && on_ && o_.anti_pattern == "casts") h = h.to(at::kBFloat16).to(at::kFloat);
    }
    at::Tensor loss = at::mse_loss(h, m.target);
    if (on_ && o_.anti_pattern == "sync") last_loss_ = loss.item<double>();
    loss.backward();
    all_reduce_grads(params, o_.comm);
    if (o_.anti_pattern == "loop")
      sgd_step(params, on_);
    else
      sgd(params, 1e-3);
  }

 private:
  // A batch like `like`, made one sample at a time under the scope torch's DataLoader records (no workers): what a
  // step waits for when its loader decodes or augments on the step's own thread. Its ops are the loader's, which
  // replay leaves out. Its host time adds to data_loader_seconds_.
  at::Tensor load_batch(const at::Tensor& like) {
    const double start = now_seconds();
    at::Tensor batch;
    {
      RECORD_USER_SCOPE("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
      std::vector<at::Tensor> samples;
      for (int64_t i = 0; i < like.size(0); ++i)
        samples.push_back(at::tanh(at::randn({like.size(1)}, like.options())) * 0.5);  // "decode and augment"
      batch = at::stack(samples);
    }
    data_loader_seconds_ += now_seconds() - start;
    return batch;
  }

  struct Model {
    int64_t hidden;
    std::vector<at::Tensor> params;
    at::Tensor x, target;
    Model(int64_t batch, int64_t h, int64_t layers, at::Device d) : hidden(h) {
      for (int64_t l = 0; l < layers; ++l) {
        params.push_back(parameter({h, h}, 1.0 / std::sqrt(double(h)), d));
        params.push_back(parameter({h}, 1.0 / std::sqrt(double(h)), d));
      }
      auto opt = at::TensorOptions().device(d);
      x = at::randn({batch, h}, opt);
      target = at::randn({batch, h}, opt);
    }
  };

  // SGD under the scope torch.optim records: one add_ and one zero_ per parameter, or one _foreach_add_ and one
  // _foreach_zero_ over them all.
  static void sgd_step(std::vector<at::Tensor>& params, bool single_tensor) {
    RECORD_USER_SCOPE("Optimizer.step#SGD.step");
    if (single_tensor) return sgd(params, 1e-3);
    c10::NoGradGuard no_grad;
    std::vector<at::Tensor> grads;
    for (at::Tensor& p : params) grads.push_back(p.grad());
    at::_foreach_add_(params, grads, -1e-3);
    at::_foreach_zero_(grads);
  }

  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), one op at a time, as at::gelu(x, "tanh") computes it at once.
  static at::Tensor unfused_gelu(const at::Tensor& x) {
    const at::Tensor inner = (x + x.pow(3) * 0.044715) * std::sqrt(2.0 / M_PI);
    return x * 0.5 * (inner.tanh() + 1);
  }

  WorkloadOptions o_;
  int64_t B_, H_, L_;
  std::vector<Model> models_;  // the one model, or (unaligned) the model with the anti-pattern, then without
  double last_loss_ = 0;
  bool on_ = true;  // the anti-pattern, when one is built in
};

}  // namespace

std::unique_ptr<Workload> make_mlp(const WorkloadOptions& o, at::Device d) { return std::make_unique<Mlp>(o, d); }

}  // namespace reprise::workloads::detail
