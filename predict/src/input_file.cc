#include "input_file.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "reprise/common/error.h"
#include "reprise/common/files.h"

namespace reprise::predict::detail {

std::string read_input(const std::string& path) { return read_text_file(path); }

nlohmann::json parse_json(const std::string& text, const std::string& path) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(path + ": not JSON (" + std::string(e.what()) + ")");
  }
}

namespace {

std::string shown(const nlohmann::json& v) {
  std::string s = v.dump();
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

std::string range(double lo, double hi) {
  auto num = [](double x) {
    std::ostringstream s;
    s << x;
    return s.str();
  };
  if (hi >= std::numeric_limits<double>::max()) return "a number of at least " + num(lo);
  return "a number from " + num(lo) + " to " + num(hi);
}

// Member `key`; nullptr when it is absent and may be (`optional`), an error when it must be there.
const nlohmann::json* member(const nlohmann::json& j, const char* key, const std::string& where, bool optional) {
  if (!j.is_object()) throw UserError(where + ": expected an object, got " + shown(j));
  const auto it = j.find(key);
  if (it != j.end()) return &*it;
  if (!optional) throw UserError(where + ": " + key + ": missing");
  return nullptr;
}

}  // namespace

double json_value_number(const nlohmann::json& v, const std::string& where, double lo, double hi) {
  if (!v.is_number()) throw UserError(where + ": expected " + range(lo, hi) + ", got " + shown(v));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    throw UserError(where + ": expected " + range(lo, hi) + ", got " + shown(v));
  return x;
}

double json_number(const nlohmann::json& j, const char* key, const std::string& where, double lo, double hi,
                   std::optional<double> fallback) {
  const nlohmann::json* v = member(j, key, where, fallback.has_value());
  if (!v) return *fallback;
  return json_value_number(*v, where + ": " + key, lo, hi);
}

int64_t json_integer(const nlohmann::json& j, const char* key, const std::string& where, int64_t lo, int64_t hi,
                     std::optional<int64_t> fallback) {
  const nlohmann::json* v = member(j, key, where, fallback.has_value());
  if (!v) return *fallback;
  if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi ||
      (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)))
    throw UserError(where + ": " + key + ": expected an integer from " + std::to_string(lo) + " to " +
                    std::to_string(hi) + ", got " + shown(*v));
  return v->get<int64_t>();
}

std::string json_string(const nlohmann::json& j, const char* key, const std::string& where,
                        std::optional<std::string> fallback) {
  const nlohmann::json* v = member(j, key, where, fallback.has_value());
  if (!v) return *fallback;
  if (!v->is_string()) throw UserError(where + ": " + key + ": expected a string, got " + shown(*v));
  return v->get<std::string>();
}

}  // namespace reprise::predict::detail
