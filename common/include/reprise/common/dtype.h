// Element types: one table for every name a dtype goes by in traces, comm attrs and nccl-tests, its size, and
// its c10::ScalarType number, so readers, the replay, capture and the comms layer agree on all of them.
//
//   const reprise::Dtype* d = reprise::find_dtype("c10::Half");  // d->name == "Half", d->itemsize == 2
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

namespace reprise {

struct Dtype {
  std::string_view name;  // c10::ScalarType's name: "Float", "Half", "BFloat16", "Long"
  int itemsize = 0;       // bytes per element
  // c10::ScalarType's value (Byte=0 ... BFloat16=15, Float8_e5m2=23, UInt64=29). PyTorch only appends to that
  // enum, so a value is the same in every version; check it against c10::ScalarType::NumOptions of the LibTorch
  // at hand (1.13 stops at 17) before casting.
  int scalar_type = -1;
  // What PyTorch's ET writes inside "Tensor(...)": the C++ type's name as GCC spells it ("float", "long int",
  // "c10::Half").
  std::string_view et_name;
  // The name reprise-comms and nccl-tests print ("float", "half", "int64"); empty when they have none.
  std::string_view comm_name;
  // Every spelling accepted, case as written: the above plus comm attrs' and nccl-tests' variants.
  std::array<std::string_view, 8> spellings;
};

// Every dtype, one entry each, in c10::ScalarType order.
const std::vector<Dtype>& dtypes();
// The dtype spelled exactly `spelling` ("float", "Float", "c10::Half", "long int", "int64"), or nullptr.
const Dtype* find_dtype(std::string_view spelling);
// Likewise, ignoring ASCII case ("FLOAT", "c10::half"), as option values and nccl-tests names are matched.
const Dtype* find_dtype_ignoring_case(std::string_view spelling);
// The dtype with this c10::ScalarType value, or nullptr.
const Dtype* dtype_of_scalar_type(int scalar_type);

}  // namespace reprise
