// Where text stops being UTF-8: the trace readers (JSON) and the YAML readers report a bad byte at its own place.
#pragma once

#include <cstddef>

namespace reprise {

// Index of the first byte of p[0, n) that does not start well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or
// code points past U+10FFFF, as simdjson validates), or n. simdjson only says a document has one; this says where.
inline size_t first_invalid_utf8(const char* p, size_t n) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  size_t i = 0;
  while (i < n) {
    unsigned c = u[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (len == 0) return i;
    // the second byte's range excludes overlong forms (E0, F0), surrogates (ED) and code points past U+10FFFF (F4)
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
    unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    for (size_t k = 1; k < len; ++k) {  // a malformed sequence is reported at its first byte
      if (i + k >= n) return i;
      unsigned b = u[i + k];
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return i;
    }
    i += len;
  }
  return n;
}

}  // namespace reprise
