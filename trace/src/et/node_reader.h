// Reads one ET node object, in any schema layout (schema_layout.h): its keys, and its values into a JsonTree,
// which ValueBinder then turns into the node's arguments and attributes.
#pragma once

#include <simdjson.h>

#include <string_view>
#include <vector>

#include "error_context.h"
#include "json_value.h"
#include "reprise/trace/trace.h"
#include "schema_layout.h"
#include "value_binder.h"

namespace reprise::detail {

// An attribute without a Node field, bound after the arguments.
struct PendingAttr {
  std::string_view name, type;
  int32_t tree;
};

class NodeReader {
 public:
  NodeReader(Trace& trace, ErrorContext& errors) : t_(trace), errors_(errors), binder_(trace, tree_, errors) {}

  void read(simdjson::ondemand::object node);

 private:
  Trace& t_;
  ErrorContext& errors_;
  JsonTree tree_;
  std::vector<std::vector<JsonValue>> levels_;  // per depth: elements of the arrays being read
  ValueBinder binder_;
  ArgTrees in_, out_;
  std::vector<PendingAttr> attrs_;
};

}  // namespace reprise::detail
