// The communicator's element types are a subset of the common dtype table (reprise/common/dtype.h): names, sizes
// and spellings come from there; only which c10::ScalarType each DType stands for is written here.
#include "reprise/common/dtype.h"

#include <iterator>

#include "reprise/comms/collective.h"

namespace reprise::comms {
namespace {

// c10::ScalarType value of each DType, in DType order (Float, Double, Half, BFloat16, Char, Byte, Int, Long, Bool).
constexpr int kScalarTypes[] = {6, 7, 5, 15, 1, 0, 3, 4, 11};

const reprise::Dtype& row(DType t) { return *reprise::dtype_of_scalar_type(kScalarTypes[static_cast<int>(t)]); }

}  // namespace

size_t dtype_size(DType t) { return static_cast<size_t>(row(t).itemsize); }

// comm_name is written as a string literal in the table, so its data() is NUL-terminated.
const char* dtype_name(DType t) { return row(t).comm_name.data(); }

bool dtype_of_scalar_type(int scalar_type, DType& out) {
  for (int i = 0; i < static_cast<int>(std::size(kScalarTypes)); ++i)
    if (kScalarTypes[i] == scalar_type) {
      out = static_cast<DType>(i);
      return true;
    }
  return false;
}

bool parse_dtype(std::string_view name, DType& out) {
  const reprise::Dtype* d = reprise::find_dtype_ignoring_case(name);
  return d && dtype_of_scalar_type(d->scalar_type, out);
}

}  // namespace reprise::comms
