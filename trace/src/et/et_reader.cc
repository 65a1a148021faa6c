// PyTorch ET reader: every schema from the flat 1.0.1 layout to 1.1.1-chakra.0.0.4, streamed.
//
//   et_text       text -> node objects (one document, or pieces cut at node boundaries)
//   node_reader   a node object -> Node, following the layout rules of schema_layout
//   json_value    a node's values, read before their types are known
//   value_binder  values + type strings + shapes/strides -> Values and Tensors in the model's pools
#include "et_text.h"
#include "node_reader.h"
#include "reader_internal.h"
#include "reprise/trace/read.h"
#include "schema_layout.h"

namespace reprise {
namespace detail {

namespace {

void read_et_into(ByteSource& src, Trace& t, const ReadOptions& options, bool whole_document) {
  t.source = src.name();
  ErrorContext errors;
  errors.file = src.name();
  NodeReader nodes(t, errors);
  read_et_nodes(src, t, options, errors, nodes, whole_document);
  check_schema_version(t.schema, errors.file, options);
}

}  // namespace

Trace read_et_source(ByteSource& src, const ReadOptions& options) {
  Trace t;
  try {
    read_et_into(src, t, options, true);
  } catch (RetryStreaming& retry) {
    MemorySource again(retry.text, src.name());
    t = Trace();
    read_et_into(again, t, options, false);
  }
  finalize_trace(t, options);
  return t;
}

}  // namespace detail

Trace read_et(const std::string& path, const ReadOptions& options) {
  auto src = detail::open_file(path);
  return detail::read_et_source(*src, options);
}

Trace read_et_text(std::string_view text, const std::string& name, const ReadOptions& options) {
  detail::MemorySource src(text, name);
  return detail::read_et_source(src, options);
}

}  // namespace reprise
