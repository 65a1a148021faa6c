// The window classifier's training (LibTorch): on a corpus built in code, it learns to tell each injected class.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "kineto_builder.h"
#include "reprise/analyze/evaluate.h"
#include "reprise/analyze/train.h"
#include "test_util.h"

namespace reprise {
namespace {

TEST(AnalyzeTrain, LearnsEveryInjectedClassOfItsTrainingWindows) {
  std::vector<TraceSet> clean(1);  // one job of one rank
  clean[0].ranks.push_back(test::read_back(test::clean_steps(8).text(), "clean8.json"));
  const std::string dir = test::temp_dir() + "/corpus";
  analyze::CorpusOptions o;
  o.copies = 8;
  analyze::make_corpus(clean, dir, o);
  const analyze::CorpusData data = analyze::read_corpus(dir);
  analyze::TrainOptions t;
  t.epochs = 300;
  const analyze::WindowModel model = analyze::train_window_model(data, t);
  ASSERT_FALSE(model.classes.empty());
  // On the windows it was trained on, each class's injected windows score above the rest.
  for (size_t c = 0; c < model.classes.size(); ++c) {
    std::vector<bool> truth;
    std::vector<double> score;
    for (const analyze::CorpusWindow& w : data.windows) {
      if (w.test) continue;
      truth.push_back(w.injected == model.classes[c] || w.has(model.classes[c]));
      score.push_back(model.predict(w.features)[c]);
    }
    const double auc = analyze::auc_roc(truth, score);
    if (!std::isnan(auc)) {
      EXPECT_GT(auc, 0.95) << model.classes[c];
    }
  }
  // Bad options are one line.
  t.epochs = 0;
  EXPECT_THROW(analyze::train_window_model(data, t), UserError);
}

}  // namespace
}  // namespace reprise
