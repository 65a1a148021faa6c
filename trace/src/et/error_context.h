// Where the ET reader is, for its error messages: "FILE: byte N: node ID: what is wrong".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "reprise/common/error.h"

namespace reprise::detail {

struct ErrorContext {
  std::string file;
  // The text being parsed: the file offset of its first byte, and the buffer node_start points into.
  uint64_t piece_base = 0;
  const char* piece_data = nullptr;
  size_t piece_size = 0;
  const char* node_start = nullptr;  // the node being read, when known
  int64_t id = 0, last_id = 0;       // the node being read, and the last one read whole
  bool id_set = false, last_id_set = false;

  [[noreturn]] void fail_at(uint64_t offset, const std::string& msg) const {
    throw UserError(file + ": byte " + std::to_string(offset) + ": " + msg);
  }

  // "node 12", or "node" before its id is read.
  std::string node_name() const { return id_set ? "node " + std::to_string(id) : std::string("node"); }

  // Names the node being read and where it starts.
  [[noreturn]] void node_fail(const std::string& msg) const {
    uint64_t off = piece_base + (node_start ? static_cast<uint64_t>(node_start - piece_data) : 0);
    fail_at(off, node_name() + ": " + msg);
  }

  // A string of the node that simdjson could not unescape (a bad escape, a lone surrogate): the byte where a
  // streaming parse of the node stops, else the node's start.
  [[noreturn]] void string_fail(const std::string& what) const;
};

}  // namespace reprise::detail
