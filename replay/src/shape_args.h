// The integer arguments of shape-taking ops (view sizes, expand sizes, factory sizes, split sizes, slice ends) after
// some dimensions of a trace were scaled: pure arithmetic on old and new shapes, for shape_inference.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reprise/generators/generate.h"

namespace reprise::replay::detail {

using Shape = std::vector<int64_t>;

// An outcome: the new values, or why none can be chosen (empty `why`: solved).
struct ArgSolution {
  Shape values;
  std::string why;
};

// view/reshape/_unsafe_view sizes (-1 allowed): the output dims are aligned with the input dims in groups of equal
// product, as reshape aligns them; each group whose product changed takes the change on the one entry that can carry
// it (an entry equal to a `from`, else a multiple of one).
ArgSolution solve_view(const Shape& in_old, const Shape& in_new, const Shape& sizes,
                       const std::vector<gen::DimChange>& changes);
// expand/broadcast_to sizes: entries over non-broadcast input dims follow the input; the others are free.
ArgSolution solve_expand(const Shape& in_old, const Shape& in_new, const Shape& sizes,
                         const std::vector<gen::DimChange>& changes);
// Sizes that no input determines (factories, the free entries of expand): the entry equal to a `from` changes.
ArgSolution solve_free(const Shape& sizes, const std::vector<bool>& free, const std::vector<gen::DimChange>& changes);

}  // namespace reprise::replay::detail
