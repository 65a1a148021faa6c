// The PyTorch ET schema layouts: which node keys each writes and what they hold. A schema quirk lives here; the
// node reader only follows these rules, and reads every layout the same way (a trace's layout shows in its keys,
// so untagged and mislabelled traces read too).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "reprise/trace/read.h"
#include "reprise/trace/trace.h"

namespace reprise::detail {

// One side's (inputs' or outputs') lists, as indices in the node's JsonTree; -1 when the node has none.
struct ArgTrees {
  int32_t values = -1, shapes = -1, types = -1, strides = -1;
  void reset() { values = shapes = types = strides = -1; }
};

enum class KeyRole : uint8_t {
  Id,
  Name,
  Parent,
  Args,      // "inputs"/"outputs": an object of lists (1.0.2+, keys in arg_list_of) or the values list (1.0.1)
  ArgList,   // one of a side's lists under a key of its own (1.0.1's "input_shapes", ...)
  AttrList,  // [{"name", "type", "value"}, ...] (1.0.2+)
};

struct KeyRule {
  std::string_view key;
  KeyRole role;
  bool outputs = false;               // Args, ArgList: the outputs' side
  int32_t ArgTrees::*list = nullptr;  // ArgList: which list
};

// One layout: the schema versions written in it and the node keys it uses. A node key no rule names is an
// attribute under its own name (1.0.1 writes every attribute that way), kept for round trips.
struct EtLayout {
  const char* name;
  Span<std::string_view> versions;
  Span<KeyRule> keys;
};

// The rule for a node key in any layout, or nullptr (an attribute).
const KeyRule* find_key_rule(std::string_view key);
// Which list of a side an "inputs"/"outputs" object's key holds, or nullptr for a key to ignore.
int32_t ArgTrees::*arg_list_of(std::string_view key);

// Attributes every layout writes for every node (flat keys in 1.0.1, attrs entries later) that Node holds in
// fields; the writer writes them in this order.
struct NodeFieldRule {
  std::string_view name;
  std::string_view et_type;  // the attr type the writer gives it: "uint64", "int64", "string"
  uint16_t bit = 0;          // NodeField
  // Integer attributes have set_int/get_int, string ones set_str/get_str.
  void (*set_int)(Node&, int64_t) = nullptr;
  int64_t (*get_int)(const Node&) = nullptr;
  void (*set_str)(Node&, StrId) = nullptr;
  StrId (*get_str)(const Node&) = nullptr;
};
Span<NodeFieldRule> node_fields();
const NodeFieldRule* find_node_field(std::string_view name);

// Warns (through options.warn) when the schema tag names no version of a known layout.
void check_schema_version(const std::string& schema, const std::string& file, const ReadOptions& options);

}  // namespace reprise::detail
