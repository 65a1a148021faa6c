#include "schema_layout.h"

#include <iterator>

namespace reprise::detail {

namespace {

// 1.0.1, and the untagged execution graphs before it: "parent" names the parent; each side's values, shapes and
// types (strides, from exporters that add them) are parallel lists under keys of their own; every attribute is
// a key of its own ("rf_id", "op_schema", ...). Tensors are 5-tuples without a device; None is "<None>".
const std::string_view kFlatVersions[] = {"1.0.1"};
const KeyRule kFlatKeys[] = {
    {"id", KeyRole::Id},
    {"name", KeyRole::Name},
    {"parent", KeyRole::Parent},
    {"inputs", KeyRole::Args},
    {"outputs", KeyRole::Args, true},
    {"input_shapes", KeyRole::ArgList, false, &ArgTrees::shapes},
    {"input_types", KeyRole::ArgList, false, &ArgTrees::types},
    {"input_strides", KeyRole::ArgList, false, &ArgTrees::strides},
    {"output_shapes", KeyRole::ArgList, true, &ArgTrees::shapes},
    {"output_types", KeyRole::ArgList, true, &ArgTrees::types},
    {"output_strides", KeyRole::ArgList, true, &ArgTrees::strides},
};

// 1.0.2 to 1.1.1, with or without a "-chakra.x" suffix: "ctrl_deps" names the parent; "inputs"/"outputs" are
// objects {"values", "shapes", "types", and from 1.1.1 "strides"}; attributes are a list of {name, type, value}.
// Tensors are 6-tuples ending in the device. Collectives' attrs (1.1.0+) are decoded by finalize.
const std::string_view kNestedVersions[] = {"1.0.2", "1.0.3", "1.0.4", "1.1.0", "1.1.1"};
const KeyRule kNestedKeys[] = {
    {"id", KeyRole::Id},       {"name", KeyRole::Name},          {"ctrl_deps", KeyRole::Parent},
    {"inputs", KeyRole::Args}, {"outputs", KeyRole::Args, true}, {"attrs", KeyRole::AttrList},
};

const EtLayout kLayouts[] = {
    {"1.0.2+ (nested)", {kNestedVersions, std::size(kNestedVersions)}, {kNestedKeys, std::size(kNestedKeys)}},
    {"1.0.1 (flat)", {kFlatVersions, std::size(kFlatVersions)}, {kFlatKeys, std::size(kFlatKeys)}},
};

// One row per field: setter and getter, as Node's fields differ in type.
const NodeFieldRule kNodeFields[] = {
    {"rf_id", "uint64", kHasRfId, [](Node& n, int64_t v) { n.rf_id = v; }, [](const Node& n) { return n.rf_id; }},
    {"fw_parent", "uint64", kHasFwParent, [](Node& n, int64_t v) { n.fw_parent = v; },
     [](const Node& n) { return n.fw_parent; }},
    {"seq_id", "int64", kHasSeqId, [](Node& n, int64_t v) { n.seq_id = v; }, [](const Node& n) { return n.seq_id; }},
    {"scope", "uint64", kHasScope, [](Node& n, int64_t v) { n.scope = static_cast<int32_t>(v); },
     [](const Node& n) { return int64_t{n.scope}; }},
    {"tid", "uint64", kHasTid, [](Node& n, int64_t v) { n.tid = v; }, [](const Node& n) { return n.tid; }},
    {"fw_tid", "uint64", kHasFwTid, [](Node& n, int64_t v) { n.fw_tid = v; }, [](const Node& n) { return n.fw_tid; }},
    {"op_schema", "string", kHasOpSchema, nullptr, nullptr, [](Node& n, StrId v) { n.op_schema = v; },
     [](const Node& n) { return n.op_schema; }},
    {"kernel_backend", "string", kHasKernelBackend, nullptr, nullptr, [](Node& n, StrId v) { n.kernel_backend = v; },
     [](const Node& n) { return n.kernel_backend; }},
    {"kernel_file", "string", kHasKernelFile, nullptr, nullptr, [](Node& n, StrId v) { n.kernel_file = v; },
     [](const Node& n) { return n.kernel_file; }},
    {"tensor_range", "string", kHasTensorRange, nullptr, nullptr, [](Node& n, StrId v) { n.tensor_range = v; },
     [](const Node& n) { return n.tensor_range; }},
};

// Called for every key of every node: the size and first byte rule out nearly all rules without a memcmp call.
bool same_key(std::string_view a, std::string_view b) {
  return a.size() == b.size() && !a.empty() && a[0] == b[0] && a == b;
}

}  // namespace

const KeyRule* find_key_rule(std::string_view key) {
  for (const EtLayout& layout : kLayouts)
    for (const KeyRule& r : layout.keys)
      if (same_key(key, r.key)) return &r;
  return nullptr;
}

int32_t ArgTrees::*arg_list_of(std::string_view key) {
  if (key == "values") return &ArgTrees::values;
  if (key == "shapes") return &ArgTrees::shapes;
  if (key == "types") return &ArgTrees::types;
  if (key == "strides") return &ArgTrees::strides;
  return nullptr;
}

Span<NodeFieldRule> node_fields() { return {kNodeFields, std::size(kNodeFields)}; }

const NodeFieldRule* find_node_field(std::string_view name) {
  for (const NodeFieldRule& f : kNodeFields)
    if (same_key(name, f.name)) return &f;
  return nullptr;
}

void check_schema_version(const std::string& schema, const std::string& file, const ReadOptions& options) {
  if (schema.empty()) return;  // execution graphs before schemas were tagged
  std::string base = schema.substr(0, schema.find('-'));
  for (const EtLayout& layout : kLayouts)
    for (std::string_view v : layout.versions)
      if (base == v) return;
  if (options.warn) options.warn(file + ": unknown ET schema \"" + schema + "\"; its layout was recognised and read");
}

}  // namespace reprise::detail
