#include "reprise/trace/strings.h"

#include <cstring>

namespace reprise {

StrId StringTable::intern(std::string_view s) {
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  const char* data = "";
  if (!s.empty()) {
    char* dst;
    if (s.size() > kBlock / 4) {  // large strings get a block of their own
      blocks_.emplace_back(new char[s.size()]);
      dst = blocks_.back().get();
    } else {
      if (s.size() > kBlock - cur_used_) {
        blocks_.emplace_back(new char[kBlock]);
        cur_ = blocks_.back().get();
        cur_used_ = 0;
      }
      dst = cur_ + cur_used_;
      cur_used_ += s.size();
    }
    std::memcpy(dst, s.data(), s.size());
    data = dst;
  }
  StrId id = static_cast<StrId>(views_.size());
  views_.emplace_back(data, s.size());
  index_.emplace(views_.back(), id);
  return id;
}

StrId StringTable::find(std::string_view s) const {
  auto it = index_.find(s);
  return it == index_.end() ? UINT32_MAX : it->second;
}

size_t StringTable::bytes() const {
  size_t total = 0;
  for (auto& v : views_) total += v.size();
  // views, hash nodes and buckets
  return total + views_.size() * (sizeof(std::string_view) + 48);
}

}  // namespace reprise
