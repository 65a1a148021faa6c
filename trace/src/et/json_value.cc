#include "json_value.h"

namespace reprise::detail {

namespace od = simdjson::ondemand;

int32_t JsonTree::read(od::value v, int depth) {
  if (depth > 64) errors_.node_fail("values nested more than 64 deep");
  JsonValue n;
  switch (v.type()) {
    case od::json_type::array: {
      // Elements are gathered per depth, then appended together, so an array's elements stay contiguous even
      // though each element's own children were appended while reading it.
      if (levels_.size() <= static_cast<size_t>(depth)) levels_.resize(depth + 1);
      size_t mark = levels_[depth].size();
      for (auto e : v.get_array()) {
        int32_t c = read(e.value(), depth + 1);
        JsonValue kid = pool_[c];
        levels_[depth].push_back(kid);
        pool_.pop_back();  // the child was appended last; its own children stay in the pool
      }
      n.t = JsonValue::Arr;
      n.ref = static_cast<uint32_t>(pool_.size());
      n.count = static_cast<uint32_t>(levels_[depth].size() - mark);
      pool_.insert(pool_.end(), levels_[depth].begin() + static_cast<std::ptrdiff_t>(mark), levels_[depth].end());
      levels_[depth].resize(mark);
      break;
    }
    case od::json_type::object: {
      std::string_view raw = v.get_object().value().raw_json().value();
      n.t = JsonValue::Obj;
      n.ref = strings_.intern(raw);
      break;
    }
    case od::json_type::number: {
      od::number num = v.get_number();
      if (num.is_int64()) {
        n.t = JsonValue::Int;
        n.i = num.get_int64();
      } else if (num.is_uint64()) {
        n.t = JsonValue::UInt;
        n.u = num.get_uint64();
      } else {
        n.t = JsonValue::Double;
        n.d = num.get_double();
      }
      break;
    }
    case od::json_type::string:
      n.t = JsonValue::Str;
      n.ref = strings_.intern(v.get_string().value());
      break;
    case od::json_type::boolean:
      n.t = JsonValue::Bool;
      n.b = v.get_bool();
      break;
    case od::json_type::null:
      v.is_null();
      n.t = JsonValue::Null;
      break;
  }
  pool_.push_back(n);
  return static_cast<int32_t>(pool_.size() - 1);
}

}  // namespace reprise::detail
