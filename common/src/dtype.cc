#include "reprise/common/dtype.h"

namespace reprise {

namespace {

// Spellings come from the ET type strings PyTorch writes (C++ names as GCC prints them), comm attrs (ScalarType
// names), nccl-tests and numpy-style names, and the short forms reprise-comms accepted.
const std::vector<Dtype> kDtypes = {
    {"Byte", 1, 0, "unsigned char", "uint8", {"Byte", "unsigned char", "uint8", "byte"}},
    {"Char", 1, 1, "signed char", "int8", {"Char", "signed char", "int8", "char"}},
    {"Short", 2, 2, "short int", "", {"Short", "short int", "short", "int16"}},
    {"Int", 4, 3, "int", "int32", {"Int", "int", "int32"}},
    {"Long", 8, 4, "long int", "int64", {"Long", "long int", "long", "long long int", "int64", "int64_t"}},
    {"Half", 2, 5, "c10::Half", "half", {"Half", "c10::Half", "half", "float16", "f16"}},
    {"Float", 4, 6, "float", "float", {"Float", "float", "float32", "f32"}},
    {"Double", 8, 7, "double", "double", {"Double", "double", "float64", "f64"}},
    {"ComplexHalf", 4, 8, "c10::complex<c10::Half>", "", {"ComplexHalf", "c10::complex<c10::Half>"}},
    {"ComplexFloat", 8, 9, "c10::complex<float>", "", {"ComplexFloat", "c10::complex<float>"}},
    {"ComplexDouble", 16, 10, "c10::complex<double>", "", {"ComplexDouble", "c10::complex<double>"}},
    {"Bool", 1, 11, "bool", "bool", {"Bool", "bool"}},
    {"BFloat16", 2, 15, "c10::BFloat16", "bfloat16", {"BFloat16", "c10::BFloat16", "bfloat16", "bf16"}},
    {"Float8_e5m2", 1, 23, "c10::Float8_e5m2", "", {"Float8_e5m2", "c10::Float8_e5m2"}},
    {"Float8_e4m3fn", 1, 24, "c10::Float8_e4m3fn", "", {"Float8_e4m3fn", "c10::Float8_e4m3fn"}},
    {"UInt32", 4, 28, "unsigned int", "", {"UInt32", "unsigned int", "uint32"}},
    {"UInt64", 8, 29, "long unsigned int", "", {"UInt64", "long unsigned int", "unsigned long", "uint64"}},
};

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

}  // namespace

const std::vector<Dtype>& dtypes() { return kDtypes; }

const Dtype* find_dtype(std::string_view spelling) {
  for (const Dtype& d : kDtypes)
    for (std::string_view s : d.spellings)
      if (!s.empty() && s == spelling) return &d;
  return nullptr;
}

const Dtype* find_dtype_ignoring_case(std::string_view spelling) {
  for (const Dtype& d : kDtypes)
    for (std::string_view s : d.spellings)
      if (!s.empty() && equal_ignoring_case(s, spelling)) return &d;
  return nullptr;
}

const Dtype* dtype_of_scalar_type(int scalar_type) {
  for (const Dtype& d : kDtypes)
    if (d.scalar_type == scalar_type) return &d;
  return nullptr;
}

}  // namespace reprise
