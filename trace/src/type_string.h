// Parses ET argument type strings: "Tensor(float)", "GenericList[Tensor(float),Int]", "Tuple[String,String]".
#pragma once

#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "reprise/trace/strings.h"

namespace reprise::detail {

struct TypeNode {
  enum Kind : uint8_t { Tensor, List, Tuple, Int, Double, Bool, String, Device, None, Other } kind = Other;
  StrId dtype = 0;                // Tensor: the element type
  uint32_t first = 0, count = 0;  // List/Tuple: element types in TypeCache::nodes
};

class TypeCache {
 public:
  // Root node index of the parsed type `type` (interned in `strings`).
  uint32_t get(StrId type, StringTable& strings);
  const TypeNode& node(uint32_t i) const { return nodes_[i]; }

 private:
  uint32_t parse(std::string_view s, size_t& pos, StringTable& strings, int depth);
  std::vector<TypeNode> nodes_;
  std::unordered_map<StrId, uint32_t> cache_;
};

}  // namespace reprise::detail
