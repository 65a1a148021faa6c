// Checked access to a YAML config: every mistake becomes UserError("FILE:LINE:COL: what was expected"), with the
// place yaml-cpp's marks give, before any work is done.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace reprise::gen {

class YamlFile {
 public:
  // Parses `path`; a syntax error is reported at its place.
  explicit YamlFile(std::string path);
  YamlFile(std::string name, const std::string& text);  // tests

  const std::string& path() const { return path_; }
  const YAML::Node& root() const { return root_; }

  // "FILE:LINE:COL" of a node (1-based), or "FILE" when the node has no mark.
  std::string where(const YAML::Node& n) const;
  [[noreturn]] void fail(const YAML::Node& n, const std::string& what) const;

  // A map whose keys must be among `known`; `what` names it in messages ("select").
  void expect_map(const YAML::Node& n, const std::string& what, std::initializer_list<const char*> known) const;
  std::string string(const YAML::Node& n, const std::string& key) const;
  // A replay device: cpu, cuda, cuda:N or meta.
  std::string device(const YAML::Node& n, const std::string& key) const;
  int64_t integer(const YAML::Node& n, const std::string& key, int64_t min, int64_t max) const;
  double number(const YAML::Node& n, const std::string& key, double min, double max) const;
  bool boolean(const YAML::Node& n, const std::string& key) const;
  // One of `choices`.
  std::string choice(const YAML::Node& n, const std::string& key, std::initializer_list<const char*> choices) const;
  // A scalar or a sequence of scalars, as strings.
  std::vector<std::string> strings(const YAML::Node& n, const std::string& key) const;
  // A file or folder: ${NAME} and ${NAME:-default} take the environment's value (an unset NAME without a default is
  // a mistake at the node's place), and a relative path is taken from the config's folder. Existence is checked.
  std::string path(const YAML::Node& n, const std::string& key) const;
  // Integers and ranges: 6, "2-4", [1, 3, "5-7"]; each within [min, max].
  std::vector<int64_t> int_ranges(const YAML::Node& n, const std::string& key, int64_t min, int64_t max) const;

 private:
  std::string path_;
  YAML::Node root_;
};

// A node as one line of YAML flow text ({a: 1, b: [x, y]}), as the bundle records transform parameters.
std::string flow_text(const YAML::Node& n);

}  // namespace reprise::gen
