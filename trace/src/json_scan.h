// Finds JSON structure in raw text without parsing it: used to cut a huge ET into pieces at node
// boundaries, so each piece is parsed on its own (simdjson's per-document limit is 4 GiB, and memory
// stays proportional to the model rather than to the text).
#pragma once

#include <cstddef>
#include <cstdint>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "reprise/common/utf8.h"

namespace reprise::detail {

using reprise::first_invalid_utf8;

// Index of the first of '"', '{', '}', '[', ']' in p[i, n), or n.
inline size_t find_structural(const char* p, size_t i, size_t n) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i open = _mm_set1_epi8('{');   // '{' | 0x20 and '[' | 0x20 are both '{'
  const __m128i close = _mm_set1_epi8('}');  // likewise ']' and '}'
  const __m128i lower = _mm_set1_epi8(0x20);
  for (; i + 16 <= n; i += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    __m128i f = _mm_or_si128(v, lower);
    __m128i m = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_or_si128(_mm_cmpeq_epi8(f, open), _mm_cmpeq_epi8(f, close)));
    int mask = _mm_movemask_epi8(m);
    if (mask) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#endif
  for (; i < n; ++i) {
    char c = p[i];
    if (c == '"' || c == '{' || c == '}' || c == '[' || c == ']') return i;
  }
  return n;
}

// Index of the first '"' or '\\' in p[i, n), or n.
inline size_t find_string_end(const char* p, size_t i, size_t n) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i bslash = _mm_set1_epi8('\\');
  for (; i + 16 <= n; i += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    int mask = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)));
    if (mask) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#endif
  for (; i < n; ++i)
    if (p[i] == '"' || p[i] == '\\') return i;
  return n;
}

// Resumable scan for the end of one JSON value that starts with '{', '[' or '"'.
struct ValueScan {
  int64_t depth = 0;
  bool in_string = false;
  bool skip_next = false;  // an escape's backslash was the last byte seen

  static constexpr size_t kMore = SIZE_MAX;            // the value continues past n
  static constexpr size_t kUnbalanced = SIZE_MAX - 1;  // a closing bracket with nothing open

  // Scans p[i, n). Returns the index just past the value's end, kMore or kUnbalanced.
  size_t run(const char* p, size_t i, size_t n) {
    if (skip_next && i < n) {
      skip_next = false;
      ++i;
    }
    while (i < n) {
      if (in_string) {
        i = find_string_end(p, i, n);
        if (i == n) return kMore;
        if (p[i] == '\\') {
          if (i + 1 >= n) {
            skip_next = true;
            return kMore;
          }
          i += 2;
          continue;
        }
        in_string = false;
        ++i;
        if (depth == 0) return i;  // the value was a string
        continue;
      }
      i = find_structural(p, i, n);
      if (i == n) return kMore;
      char c = p[i++];
      if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else {
        if (depth == 0) return kUnbalanced;
        if (--depth == 0) return i;
      }
    }
    return kMore;
  }
};

inline bool is_json_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace reprise::detail
