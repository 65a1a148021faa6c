// The libFuzzer entry point every target defines, and standalone_main.cc drives without libFuzzer.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
