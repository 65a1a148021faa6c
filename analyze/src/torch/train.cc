// The window classifier's training: full-batch Adam on a masked, class-balanced binary cross-entropy, through ATen
// tensors and autograd (no torch::nn: the model is three weight matrices).
#include "reprise/analyze/train.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>

#include "reprise/analyze/analyze.h"
#include "reprise/common/error.h"

namespace reprise::analyze {

WindowModel train_window_model(const CorpusData& data, const TrainOptions& o) {
  if (o.epochs < 1 || o.hidden < 1 || !(o.learning_rate > 0))
    throw UserError("analyze: --train needs positive epochs, width and learning rate");
  const auto& names = feature_names();
  const int64_t F = static_cast<int64_t>(names.size());
  std::vector<const CorpusWindow*> train;
  for (const CorpusWindow& w : data.windows)
    if (!w.test && w.gpu) train.push_back(&w);  // the classifier judges GPU steps (analyze.cc)
  if (train.empty()) throw UserError(data.dir + ": the corpus has no training window to learn from");
  const int64_t N = static_cast<int64_t>(train.size());
  // A window is a positive of a class when the class was injected into it, or its clean step already showed it (by
  // the class's rule): the classifier learns the patterns as traces have them, not only as injected. Classes with
  // no positive window are left out (nothing to learn them from).
  std::vector<std::string> classes;
  for (const std::string& c : data.classes)
    if (std::any_of(train.begin(), train.end(), [&](const CorpusWindow* w) { return w->injected == c || w->has(c); }))
      classes.push_back(c);
  const int64_t C = static_cast<int64_t>(classes.size());
  if (C == 0) throw UserError(data.dir + ": no class has a positive training window");
  at::manual_seed(o.seed);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  at::Tensor X = at::zeros({N, F}, opts), Y = at::zeros({N, C}, opts);
  auto x = X.accessor<double, 2>(), y = Y.accessor<double, 2>();
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t f = 0; f < F; ++f) x[i][f] = model_transform(train[i]->features[f]);
    for (int64_t c = 0; c < C; ++c) y[i][c] = train[i]->injected == classes[c] || train[i]->has(classes[c]);
  }
  // A feature that never varied in training is read as its mean (scale 1), not blown up by a tiny scale.
  const at::Tensor mean = X.mean(0), spread = X.std(0, /*unbiased=*/false);
  const at::Tensor scale = at::where(spread > 1e-6, spread, at::ones_like(spread));
  const at::Tensor Z = (X - mean) / scale;
  // Each class's positives weigh as much as its negatives.
  const at::Tensor positives = Y.sum(0), negatives = (1 - Y).sum(0);
  const at::Tensor pos_weight = (negatives / positives.clamp_min(1)).clamp(1, 1000);

  auto layer = [&](int64_t out, int64_t in) {
    const double bound = 1 / std::sqrt(double(in));
    return std::make_pair((at::rand({out, in}, opts) * 2 - 1).mul_(bound).requires_grad_(),
                          (at::rand({out}, opts) * 2 - 1).mul_(bound).requires_grad_());
  };
  std::vector<std::pair<at::Tensor, at::Tensor>> layers{layer(o.hidden, F), layer(o.hidden, o.hidden),
                                                        layer(C, o.hidden)};
  std::vector<at::Tensor> params, m1, m2;
  for (auto& [w, b] : layers)
    for (at::Tensor* p : {&w, &b}) {
      params.push_back(*p);
      m1.push_back(at::zeros_like(*p));
      m2.push_back(at::zeros_like(*p));
    }
  const double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    at::Tensor h = Z;
    for (size_t l = 0; l < layers.size(); ++l) {
      h = at::addmm(layers[l].second, h, layers[l].first.t());
      if (l + 1 < layers.size()) h = at::relu(h);
    }
    const at::Tensor per = at::binary_cross_entropy_with_logits(h, Y, {}, pos_weight, at::Reduction::None);
    at::Tensor loss = per.mean();
    for (at::Tensor& p : params)
      if (p.grad().defined()) p.mutable_grad().zero_();
    loss.backward();
    {
      c10::NoGradGuard no_grad;
      const double c1 = 1 - std::pow(beta1, epoch), c2 = 1 - std::pow(beta2, epoch);
      for (size_t k = 0; k < params.size(); ++k) {
        at::Tensor g = params[k].grad() + o.weight_decay * params[k];
        m1[k].mul_(beta1).add_(g, 1 - beta1);
        m2[k].mul_(beta2).addcmul_(g, g, 1 - beta2);
        params[k].sub_(o.learning_rate * (m1[k] / c1) / ((m2[k] / c2).sqrt() + eps));
      }
    }
    if (o.progress && (epoch % 100 == 0 || epoch == o.epochs)) o.progress(epoch, loss.item<double>());
  }

  WindowModel model;
  model.features = names;
  model.classes = classes;
  model.trained_on = data.dir;
  auto vec = [](const at::Tensor& t) {
    at::Tensor c = t.detach().contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  };
  model.mean = vec(mean);
  model.scale = vec(scale);
  for (auto& [w, b] : layers) {
    WindowModel::Layer l;
    const std::vector<double> flat = vec(w);
    const size_t rows = static_cast<size_t>(w.size(0)), cols = static_cast<size_t>(w.size(1));
    for (size_t r = 0; r < rows; ++r) l.weight.emplace_back(flat.begin() + r * cols, flat.begin() + (r + 1) * cols);
    l.bias = vec(b);
    model.layers.push_back(std::move(l));
  }
  return model;
}

}  // namespace reprise::analyze
