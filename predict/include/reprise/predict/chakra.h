// Export to MLCommons Chakra execution traces (ASTRA-sim's input), and a decoder for them.
//
//   ChakraOptions o;  // the first complete ProfilerStep of each rank
//   std::vector<ChakraFile> files = convert_to_chakra("dlrm-8/", "et/", "dlrm", o);  // et/dlrm.0.et ... dlrm.7.et
//   ChakraTrace back = read_chakra("et/dlrm.3.et");
//   for (const ChakraNode& n : back.nodes) ... n.type, n.data_deps, n.attr("comm_size")
//   print_chakra(std::cout, back);  // reprise inspect FILE.et
//
// Nodes are the ops a replay issues: compute as COMP_NODE (num_ops = FLOPs, tensor_size = bytes, from op_work),
// collectives as COMM_COLL_NODE, p2p as COMM_SEND_NODE / COMM_RECV_NODE. Waits become dependencies, not nodes.
// data_deps hold tensor producer -> consumer edges and sync edges (wait, host sync); ctrl_deps hold host-thread and
// same-stream order. docs/chakra.md describes each field.
#pragma once

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "reprise/trace/read.h"
#include "reprise/trace/trace.h"

namespace reprise::predict {

// Chakra's NodeType and CollectiveCommType numbers.
enum class ChakraNodeType : int {
  Invalid = 0,
  Metadata = 1,
  MemLoad = 2,
  MemStore = 3,
  Comp = 4,
  CommSend = 5,
  CommRecv = 6,
  CommColl = 7,
};
const char* chakra_node_type_name(ChakraNodeType t);  // "COMP_NODE", ...

enum class ChakraCommType : int {
  AllReduce = 0,
  Reduce = 1,
  AllGather = 2,
  Gather = 3,
  Scatter = 4,
  Broadcast = 5,
  AllToAll = 6,
  ReduceScatter = 7,
  ReduceScatterBlock = 8,
  Barrier = 9,
};

// An attribute value; the alternative says which field of Chakra's AttributeProto holds it (ASTRA-sim reads
// num_ops and comm_size as int64, tensor_size as uint64, comm_src/dst/tag as int32). Lists are not kept.
using ChakraValue = std::variant<int32_t, int64_t, uint64_t, double, bool, std::string>;

struct ChakraNode {
  uint64_t id = 0;
  std::string name;
  ChakraNodeType type = ChakraNodeType::Invalid;
  std::vector<uint64_t> data_deps, ctrl_deps;  // ascending, each id at most once over both
  uint64_t duration_micros = 0;                // measured (a linked Kineto trace), else 0
  std::map<std::string, ChakraValue> attrs;

  const ChakraValue* attr(const std::string& name) const;
  // An integer attribute of any integer alternative (bool included); `fallback` when absent or not an integer.
  int64_t int_attr(const std::string& name, int64_t fallback = -1) const;
};

struct ChakraTrace {
  std::string version;                          // GlobalMetadata.version
  std::map<std::string, ChakraValue> metadata;  // GlobalMetadata.attr
  std::vector<ChakraNode> nodes;                // in file order
};

struct ChakraOptions {
  std::vector<int64_t> steps;  // ProfilerStep numbers; empty: the first complete step
  bool all_steps = false;
  // Write ctrl_deps into data_deps too: ASTRA-sim's feeder resolves only data_deps unless told otherwise.
  bool ctrl_as_data = false;
};

// What one written file holds.
struct ChakraFile {
  std::string path;
  int64_t rank = 0;
  size_t nodes = 0, comp = 0, comm = 0;  // comm: collective, send and recv nodes
  size_t data_deps = 0, ctrl_deps = 0;
  size_t skipped = 0;  // communication ops with no Chakra type (coalesced, unknown names)
};

// Rank `rank`'s graph from its trace: nodes in execution order, ids the trace's node ids.
ChakraTrace build_chakra(const Trace& t, int64_t rank, const ChakraOptions& o = {});
// Counts of a graph (path and rank left empty).
ChakraFile count_chakra(const ChakraTrace& g);

// A graph as the bytes of a Chakra protobuf file, and back; `source` names the bytes in errors. Both throw UserError
// when Reprise was built without protobuf, and decode_chakra for bytes that are not a Chakra trace.
std::string encode_chakra(const ChakraTrace& g);
ChakraTrace decode_chakra(std::string_view bytes, const std::string& source);

// Writes a graph as a Chakra protobuf file. Throws UserError naming the path when it cannot be written, or when
// Reprise was built without protobuf.
void write_chakra_file(const ChakraTrace& g, const std::string& path);
// build_chakra + write_chakra_file.
ChakraFile write_chakra(const Trace& t, int64_t rank, const std::string& path, const ChakraOptions& o = {});
// Reads a Chakra protobuf file (any producer's). Throws UserError naming the path for a file that is not one.
ChakraTrace read_chakra(const std::string& path);

// Every rank of a trace set into OUT_DIR/PREFIX.N.et (ASTRA-sim's naming), N the trace's rank (its position when
// unknown), and OUT_DIR/PREFIX.json (process group name -> world ranks) when the traces name groups.
std::vector<ChakraFile> convert_to_chakra(const TraceSet& set, const std::string& out_dir, const std::string& prefix,
                                          const ChakraOptions& o = {});
// The same from a bundle folder (every world rank, its role's trace with that rank's ids) or anything load_traces
// reads.
std::vector<ChakraFile> convert_to_chakra(const std::string& in, const std::string& out_dir, const std::string& prefix,
                                          const ChakraOptions& o = {}, const ReadOptions& ro = {});

// A summary for people: the version and metadata, nodes by type, dependencies by list, collectives by comm_type
// (count and bytes), and the longest dependency chain.
void print_chakra(std::ostream& out, const ChakraTrace& g);
// The same as a JSON object (format reprise-chakra-summary/1; docs/chakra.md), `path` naming the file.
std::string chakra_summary_json(const ChakraTrace& g, const std::string& path);

// Whether this build writes and reads Chakra files (it was built with protobuf).
bool chakra_available();

}  // namespace reprise::predict
