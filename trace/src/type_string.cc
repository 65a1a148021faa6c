#include "type_string.h"

namespace reprise::detail {

uint32_t TypeCache::get(StrId type, StringTable& strings) {
  auto it = cache_.find(type);
  if (it != cache_.end()) return it->second;
  size_t pos = 0;
  std::string_view s = strings.str(type);
  uint32_t root = parse(s, pos, strings, 0);
  cache_.emplace(type, root);
  return root;
}

uint32_t TypeCache::parse(std::string_view s, size_t& pos, StringTable& strings, int depth) {
  size_t start = pos;
  while (pos < s.size() && s[pos] != '(' && s[pos] != '[' && s[pos] != ',' && s[pos] != ']') ++pos;
  std::string_view head = s.substr(start, pos - start);
  TypeNode n;
  if (pos < s.size() && s[pos] == '(') {
    // Tensor(<dtype>), where the dtype may itself hold parentheses: "nullptr (uninitialized)"
    size_t open = ++pos;
    int level = 1;
    while (pos < s.size() && level > 0) {
      if (s[pos] == '(') ++level;
      if (s[pos] == ')') --level;
      ++pos;
    }
    std::string_view inner = s.substr(open, (level == 0 ? pos - 1 : pos) - open);
    if (head == "Tensor") {
      n.kind = TypeNode::Tensor;
      n.dtype = strings.intern(inner);
    }
  } else if (pos < s.size() && s[pos] == '[') {
    ++pos;
    std::vector<uint32_t> kids;
    if (depth < 64) {
      while (pos < s.size() && s[pos] != ']') {
        kids.push_back(parse(s, pos, strings, depth + 1));
        if (pos < s.size() && s[pos] == ',')
          ++pos;
        else
          break;
      }
    }
    while (pos < s.size() && s[pos] != ']') ++pos;  // tolerate what we could not parse
    if (pos < s.size()) ++pos;
    if (head == "GenericList" || head == "List" || head == "Optional")
      n.kind = TypeNode::List;
    else if (head == "Tuple")
      n.kind = TypeNode::Tuple;
    n.first = static_cast<uint32_t>(nodes_.size());
    n.count = static_cast<uint32_t>(kids.size());
    for (uint32_t k : kids) nodes_.push_back(nodes_[k]);  // copy children to be contiguous
  } else if (head == "Int" || head == "ScalarType" || head == "Layout" || head == "MemoryFormat" || head == "SymInt") {
    n.kind = TypeNode::Int;
  } else if (head == "Double" || head == "Float" || head == "SymFloat") {
    n.kind = TypeNode::Double;
  } else if (head == "Bool" || head == "SymBool") {
    n.kind = TypeNode::Bool;
  } else if (head == "String") {
    n.kind = TypeNode::String;
  } else if (head == "Device") {
    n.kind = TypeNode::Device;
  } else if (head == "None") {
    n.kind = TypeNode::None;
  }
  nodes_.push_back(n);
  return static_cast<uint32_t>(nodes_.size() - 1);
}

}  // namespace reprise::detail
