// One descriptor per transform: its YAML keys, its validation (run on the whole config before any work) and the
// step that applies it. transforms.cc lists them; adding a transform is one file and one line there.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <vector>

#include "workspace.h"
#include "yaml_check.h"

namespace reprise::gen {

// What a transform may read from the config besides its own parameters.
struct ConfigContext {
  const YamlFile& file;
  std::string dir;  // the config's folder: relative paths are resolved against it
};

using TransformStep = std::function<void(Workspace&)>;

struct TransformDescriptor {
  const char* name;
  const char* summary;  // one line, for generate --help
  std::vector<const char*> keys;
  // Checks `params` (the value under the transform's name) and returns the step. Mistakes throw UserError at
  // their YAML place; mistakes only the traces can reveal (a regex that matches nothing) throw from the step,
  // naming the same place.
  TransformStep (*parse)(const YAML::Node& params, const ConfigContext& cx);
};

const std::vector<const TransformDescriptor*>& transform_table();
const TransformDescriptor* find_transform(const std::string& name);

extern const TransformDescriptor kSelect;
extern const TransformDescriptor kScale;
extern const TransformDescriptor kPerturb;
extern const TransformDescriptor kSplice;

}  // namespace reprise::gen
