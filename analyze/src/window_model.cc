// The learned window classifier at inference: a small MLP read from JSON, run in plain C++ (no LibTorch).
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <type_traits>

#include "reprise/analyze/analyze.h"
#include "reprise/analyze/evaluate.h"
#include "reprise/common/error.h"
#include "reprise/common/files.h"

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
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(name + ": not JSON (" + e.what() + ")");
  }
  if (!j.is_object() || j.value("format", "") != "reprise-window-model/1")
    throw UserError(name + ": not a reprise-window-model/1 file");
  // Each member read as its type, or one line naming it.
  auto read = [&](const char* key, auto& into) {
    try {
      into = j.at(key).get<std::remove_reference_t<decltype(into)>>();
    } catch (const nlohmann::json::exception& e) {
      throw UserError(name + ": " + key + ": " + e.what());
    }
  };
  read("features", m.features);
  read("classes", m.classes);
  read("mean", m.mean);
  read("scale", m.scale);
  if (j.contains("trained_on")) read("trained_on", m.trained_on);
  if (!j.contains("layers") || !j["layers"].is_array()) throw UserError(name + ": layers: expected a list");
  for (size_t l = 0; l < j["layers"].size(); ++l) {
    try {
      const nlohmann::json& layer = j["layers"][l];
      m.layers.push_back(
          {layer.at("weight").get<std::vector<std::vector<double>>>(), layer.at("bias").get<std::vector<double>>()});
    } catch (const nlohmann::json::exception& e) {
      throw UserError(name + ": layers[" + std::to_string(l) + "]: " + e.what());
    }
  }
  // Classes are detectors; features are named once each (a feature this Reprise no longer computes reads as 0).
  auto named_before = [](const std::vector<std::string>& v, size_t i) {
    return std::find(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v[i]) !=
           v.begin() + static_cast<std::ptrdiff_t>(i);
  };
  for (size_t c = 0; c < m.classes.size(); ++c) {
    const auto& table = detectors();
    if (std::none_of(table.begin(), table.end(), [&](const DetectorInfo& d) { return d.id == m.classes[c]; }))
      throw UserError(name + ": classes: '" + m.classes[c] + "' is not a detector (reprise analyze --list)");
    if (named_before(m.classes, c)) throw UserError(name + ": classes: '" + m.classes[c] + "' is named twice");
  }
  for (size_t f = 0; f < m.features.size(); ++f)
    if (named_before(m.features, f)) throw UserError(name + ": features: '" + m.features[f] + "' is named twice");
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

WindowModel read_window_model(const std::string& path) { return parse_window_model(read_text_file(path), path); }

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
