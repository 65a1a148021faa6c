// The learned window classifier at inference: a small MLP read from JSON, run in plain C++ (no LibTorch).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reprise/analyze/analyze.h"
#include "reprise/analyze/evaluate.h"
#include "reprise/common/error.h"

namespace reprise::analyze {

namespace detail {
extern const char* const kDefaultWindowModel;  // window_model_data.cc, generated from analyze/models/
}

double model_transform(double x) { return std::copysign(std::log1p(std::fabs(x)), x); }

std::vector<double> WindowModel::predict(const std::vector<double>& window_features) const {
  // The model's features by name, from the window's (parallel to feature_names()).
  const auto& names = feature_names();
  std::vector<double> x(features.size(), 0.0);
  for (size_t i = 0; i < features.size(); ++i) {
    const size_t at = static_cast<size_t>(std::find(names.begin(), names.end(), features[i]) - names.begin());
    const double v = at < window_features.size() ? model_transform(window_features[at]) : 0;
    x[i] = scale[i] > 0 ? (v - mean[i]) / scale[i] : 0;
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& layer = layers[l];
    std::vector<double> y(layer.bias);
    for (size_t o = 0; o < y.size(); ++o)
      for (size_t i = 0; i < x.size() && i < layer.weight[o].size(); ++i) y[o] += layer.weight[o][i] * x[i];
    for (double& v : y) v = l + 1 < layers.size() ? std::max(0.0, v) : 1 / (1 + std::exp(-v));
    x = std::move(y);
  }
  return x;
}

WindowModel parse_window_model(const std::string& text, const std::string& name) {
  WindowModel m;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (j.value("format", "") != "reprise-window-model/1")
      throw UserError(name + ": not a reprise-window-model/1 file");
    m.features = j.at("features").get<std::vector<std::string>>();
    m.classes = j.at("classes").get<std::vector<std::string>>();
    m.mean = j.at("mean").get<std::vector<double>>();
    m.scale = j.at("scale").get<std::vector<double>>();
    m.trained_on = j.value("trained_on", "");
    for (const auto& l : j.at("layers"))
      m.layers.push_back(
          {l.at("weight").get<std::vector<std::vector<double>>>(), l.at("bias").get<std::vector<double>>()});
  } catch (const nlohmann::json::exception& e) {
    throw UserError(name + ": " + e.what());
  }
  // Shapes: features -> ... -> classes, each layer's rows as wide as the one before it.
  size_t width = m.features.size();
  if (m.mean.size() != width || m.scale.size() != width || m.layers.empty())
    throw UserError(name + ": the feature statistics and layers do not fit the features");
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const auto& layer = m.layers[l];
    if (layer.weight.size() != layer.bias.size() || layer.weight.empty())
      throw UserError(name + ": layer " + std::to_string(l) + ": weight rows and biases differ");
    for (const auto& row : layer.weight)
      if (row.size() != width) throw UserError(name + ": layer " + std::to_string(l) + ": a row of the wrong width");
    width = layer.bias.size();
  }
  if (width != m.classes.size()) throw UserError(name + ": the last layer does not give one output per class");
  return m;
}

WindowModel read_window_model(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError(path + ": cannot open");
  std::stringstream text;
  text << in.rdbuf();
  return parse_window_model(text.str(), path);
}

std::string window_model_json(const WindowModel& m) {
  nlohmann::json j{{"format", "reprise-window-model/1"},
                   {"trained_on", m.trained_on},
                   {"features", m.features},
                   {"classes", m.classes},
                   {"mean", m.mean},
                   {"scale", m.scale},
                   {"layers", nlohmann::json::array()}};
  for (const auto& l : m.layers) j["layers"].push_back({{"weight", l.weight}, {"bias", l.bias}});
  return j.dump() + "\n";
}

const WindowModel& default_window_model() {
  static const WindowModel m = parse_window_model(detail::kDefaultWindowModel, "the shipped window model");
  return m;
}

}  // namespace reprise::analyze
