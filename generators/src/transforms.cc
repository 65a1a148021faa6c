#include "transform.h"

namespace reprise::gen {

const std::vector<const TransformDescriptor*>& transform_table() {
  static const std::vector<const TransformDescriptor*> table = {&kSelect, &kSplice, &kScale, &kPerturb};
  return table;
}

const TransformDescriptor* find_transform(const std::string& name) {
  for (const TransformDescriptor* d : transform_table())
    if (name == d->name) return d;
  return nullptr;
}

}  // namespace reprise::gen
