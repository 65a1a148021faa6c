// The libFuzzer entry point every target defines, and standalone_main.cc drives without libFuzzer; FuzzBytes reads
// the input as a program (the targets that build traces from it).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// The input's bytes one at a time, zeros past the end.
class FuzzBytes {
 public:
  FuzzBytes(const uint8_t* d, size_t n) : d_(d), n_(n) {}
  uint8_t next() { return i_ < n_ ? d_[i_++] : 0; }
  bool more() const { return i_ < n_; }
  template <typename T, size_t N>
  const T& pick(const T (&table)[N]) {
    return table[next() % N];
  }

 private:
  const uint8_t* d_;
  size_t n_, i_ = 0;
};
