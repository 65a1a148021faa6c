// reprise inspect on a Chakra file.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "reprise/predict/chakra.h"

namespace reprise::predict {
namespace {

const char* comm_type_name(int64_t t) {
  static const char* names[] = {
      "ALL_REDUCE", "REDUCE",         "ALL_GATHER",           "GATHER", "SCATTER", "BROADCAST",
      "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER"};
  return t >= 0 && t < static_cast<int64_t>(std::size(names)) ? names[t] : "UNKNOWN";
}

std::string text(const ChakraValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>)
          return x;
        else if constexpr (std::is_same_v<T, bool>)
          return x ? "true" : "false";
        else
          return std::to_string(x);
      },
      v);
}

// Nodes on the longest path through both dependency lists; deps on ids not in the file are ignored.
size_t longest_chain(const ChakraTrace& g) {
  std::unordered_map<uint64_t, size_t> depth;
  size_t best = 0;
  for (const ChakraNode& n : g.nodes) {
    size_t d = 1;
    for (const std::vector<uint64_t>* list : {&n.data_deps, &n.ctrl_deps})
      for (uint64_t p : *list) {
        auto it = depth.find(p);
        if (it != depth.end()) d = std::max(d, it->second + 1);
      }
    depth[n.id] = d;
    best = std::max(best, d);
  }
  return best;
}

// What both summaries tell: nodes by type, dependencies, collectives and p2p by type (count, bytes).
struct Tally {
  std::map<std::string, size_t> types;
  std::map<std::string, std::pair<size_t, int64_t>> comms;  // comm type -> count, bytes
  size_t data = 0, ctrl = 0;
};

Tally tally(const ChakraTrace& g) {
  Tally t;
  for (const ChakraNode& n : g.nodes) {
    ++t.types[chakra_node_type_name(n.type)];
    t.data += n.data_deps.size();
    t.ctrl += n.ctrl_deps.size();
    const char* comm = n.type == ChakraNodeType::CommColl   ? comm_type_name(n.int_attr("comm_type"))
                       : n.type == ChakraNodeType::CommSend ? "SEND"
                       : n.type == ChakraNodeType::CommRecv ? "RECV"
                                                            : nullptr;
    if (!comm) continue;
    auto& c = t.comms[comm];
    ++c.first;
    c.second += std::max<int64_t>(n.int_attr("comm_size", 0), 0);
  }
  return t;
}

}  // namespace

void print_chakra(std::ostream& out, const ChakraTrace& g) {
  out << "version     " << g.version << "\n";
  for (const auto& [name, v] : g.metadata) out << "  " << name << " = " << text(v) << "\n";
  const Tally t = tally(g);
  out << "nodes       " << g.nodes.size();
  const char* sep = " (";
  for (const auto& [name, count] : t.types) {
    out << sep << name << " " << count;
    sep = ", ";
  }
  out << (t.types.empty() ? "" : ")") << "\n";
  out << "deps        " << t.data << " data, " << t.ctrl << " ctrl; longest chain " << longest_chain(g) << " nodes\n";
  for (const auto& [name, c] : t.comms) out << "  " << name << " x" << c.first << ", " << c.second << " bytes\n";
}

std::string chakra_summary_json(const ChakraTrace& g, const std::string& path) {
  const Tally t = tally(g);
  nlohmann::json j;
  j["format"] = "reprise-chakra-summary/1";
  j["file"] = path;
  j["version"] = g.version;
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [name, v] : g.metadata) std::visit([&, &name = name](const auto& x) { meta[name] = x; }, v);
  j["metadata"] = meta;
  j["nodes"] = g.nodes.size();
  j["nodes_by_type"] = t.types;
  j["data_deps"] = t.data;
  j["ctrl_deps"] = t.ctrl;
  j["longest_chain"] = longest_chain(g);
  nlohmann::json comms = nlohmann::json::object();
  for (const auto& [name, c] : t.comms) comms[name] = {{"count", c.first}, {"bytes", c.second}};
  j["comms"] = comms;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);  // another producer's bytes may not be UTF-8
}

}  // namespace reprise::predict
