// Training the learned window classifier (LibTorch; library reprise_analyze_torch): a small MLP over a corpus's
// window features, one sigmoid output per injected class, on its training split only.
#pragma once

#include <cstdint>
#include <functional>

#include "reprise/analyze/evaluate.h"

namespace reprise::analyze {

struct TrainOptions {
  int epochs = 800;
  int hidden = 32;  // two hidden layers of this width
  double learning_rate = 0.01;
  double weight_decay = 1e-4;
  uint64_t seed = 1;
  std::function<void(int epoch, double loss)> progress;  // every 100 epochs
};

// Windows of the training split; a window is a positive of the class injected into it and of the classes its clean
// step already showed. Classes without a positive window are left out of the model.
WindowModel train_window_model(const CorpusData& data, const TrainOptions& options = {});

}  // namespace reprise::analyze
