// Embedding lookups timed by a fit per swept table, not by a rate in bytes a second: for each (op, dtype, width,
// table) the sweep timed over bag counts and pooling, busy = c0 + c1 x lookups + c2 x bags (c0: what a call costs
// whatever its lookups, a dense backward's zeroing of the table-sized gradient among it; c1: a lookup's random row;
// c2: a bag's output row). An op between the swept widths and tables takes the coefficients interpolated in log
// width and log table size. A rate over the call's bytes mixes the zeroing (streamed) with the lookups (random), so
// that shapes of one table with other bag counts read it wrongly (docs/predict.md, "Embedding lookups").
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "reprise/predict/calibration.h"

namespace reprise::predict::detail {

class EmbeddingFit {
 public:
  // From a calibration's embedding samples, their overheads taken out; tables with fewer than 4 samples over at
  // least 2 lookup counts (a replay's shapes, not a sweep's grid) fit nothing.
  void build(const std::vector<OpSample>& samples, const std::vector<double>& overhead_of);
  // The busy seconds of an op with this key (lookups, width, table bytes, bags); false when its op and dtype have
  // no fitted table (the rate index times it then).
  bool estimate(const std::string& op, const std::string& dtype, const std::array<double, 4>& key, double& busy) const;

  using Coefficients = std::array<double, 3>;  // c0 a byte of table, c1 a lookup, c2 a bag

 private:
  // "op|dtype" -> by log2 width, its tables' (log2 table bytes, coefficients), sorted by table.
  std::map<std::string, std::map<double, std::vector<std::pair<double, Coefficients>>>> fits_;
};

}  // namespace reprise::predict::detail
