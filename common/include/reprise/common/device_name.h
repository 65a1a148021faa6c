// The device names Reprise takes on its command lines and in its files, as PyTorch spells them: cpu, cuda, cuda:N
// and (where shapes alone will do) meta. One check for every place that reads one.
#pragma once

#include <string_view>

namespace reprise {

// Whether `d` is cpu, cuda or cuda:N (N decimal digits), or meta when `meta` is allowed.
inline bool is_device_name(std::string_view d, bool meta) {
  if (d == "cpu" || d == "cuda" || (meta && d == "meta")) return true;
  return d.size() > 5 && d.substr(0, 5) == "cuda:" && d.find_first_not_of("0123456789", 5) == std::string_view::npos;
}

}  // namespace reprise
