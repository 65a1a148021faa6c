// String interning for the trace model: every name, schema, dtype and device string is stored once.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace reprise {

using StrId = uint32_t;

class StringTable {
 public:
  StringTable() { intern(""); }
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;
  StringTable(StringTable&&) = default;
  StringTable& operator=(StringTable&&) = default;

  // Id 0 is always the empty string.
  StrId intern(std::string_view s);
  std::string_view str(StrId id) const { return views_[id]; }
  // Returns the id of `s` if interned, else UINT32_MAX; never adds.
  StrId find(std::string_view s) const;
  size_t size() const { return views_.size(); }
  size_t bytes() const;

 private:
  static constexpr size_t kBlock = 1 << 16;
  std::vector<std::unique_ptr<char[]>> blocks_;
  char* cur_ = nullptr;  // block being filled
  size_t cur_used_ = kBlock;
  std::vector<std::string_view> views_;
  std::unordered_map<std::string_view, StrId> index_;
};

}  // namespace reprise
