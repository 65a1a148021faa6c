#include "et_text.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "json_scan.h"
#include "reader_internal.h"

namespace reprise::detail {

namespace {

namespace od = simdjson::ondemand;

// A byte buffer that grows without zero-filling (a 32 MB std::vector resize costs as much as parsing 5 MB).
class RawBuffer {
 public:
  char* data() { return data_.get(); }
  const char* data() const { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }
  char& operator[](size_t i) { return data_[i]; }
  // Resizes to n bytes with room for `slack` more; keeps the content.
  void resize(size_t n, size_t slack = simdjson::SIMDJSON_PADDING) {
    if (n + slack > cap_) {
      size_t cap = std::max(n + slack, cap_ * 2);
      std::unique_ptr<char[]> fresh(new char[cap]);
      if (size_) std::memcpy(fresh.get(), data_.get(), std::min(size_, n));
      data_ = std::move(fresh);
      cap_ = cap;
    }
    size_ = n;
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0, cap_ = 0;
};

constexpr size_t kWholeLimit = 16u << 20;

class EtText {
 public:
  EtText(ByteSource& src, Trace& trace, const ReadOptions& options, ErrorContext& errors, NodeReader& nodes)
      : src_(src), t_(trace), opt_(options), errors_(errors), nodes_(nodes) {}

  void run(bool whole_document) {
    buf_.resize(0, 1u << 20);
    if (whole_document) {
      // Traces up to kWholeLimit are parsed as one document: no structural pre-scan, no copy.
      while (end_ < kWholeLimit && fill()) {
      }
      if (eof_ && has_content()) {
        parse_whole();
        return;
      }
    }
    stream();
  }

 private:
  // ---- the one-document path ----
  bool has_content() const {
    for (size_t i = 0; i < end_; ++i)
      if (!is_json_space(buf_.data()[i])) return true;
    return false;
  }

  void parse_whole() {
    errors_.piece_data = buf_.data();
    errors_.piece_size = end_;
    errors_.piece_base = 0;
    bool saw_nodes = false;
    try {
      od::document doc = parser_.iterate(buf_.data(), end_, buf_.capacity());
      for (auto field : doc.get_object()) {
        std::string_view key = field.unescaped_key();
        od::value v = field.value();
        if (key == "nodes") {
          saw_nodes = true;
          parse_node_array(v.get_array());
        } else if (key == "schema") {
          t_.schema = std::string(v.get_string().value());
        } else {
          std::string_view raw = raw_text(v);
          // simdjson checks only what it reads; the streaming path says what is wrong, and where
          if (!metadata_problem(raw).empty()) throw RetryStreaming{std::string(buf_.data(), end_)};
          t_.metadata.emplace_back(std::string(key), std::string(raw));
        }
      }
      const char* rest = nullptr;  // anything after the top-level object
      if (doc.current_location().get(rest) == simdjson::SUCCESS && rest && rest < buf_.data() + end_)
        throw RetryStreaming{std::string(buf_.data(), end_)};
    } catch (const simdjson::simdjson_error&) {
      throw RetryStreaming{std::string(buf_.data(), end_)};
    }
    if (!saw_nodes) throw UserError(errors_.file + ": no \"nodes\" array: not a PyTorch execution trace");
  }

  static std::string_view raw_text(od::value v) {
    switch (v.type()) {
      case od::json_type::object:
        return v.get_object().value().raw_json().value();
      case od::json_type::array:
        return v.get_array().value().raw_json().value();
      default: {
        std::string_view tok = v.raw_json_token();
        while (!tok.empty() && is_json_space(tok.back())) tok.remove_suffix(1);
        return tok;
      }
    }
  }

  // ---- the streaming path: the top-level object ----
  void stream() {
    skip_ws();
    if (pos_ >= end_ && !fill()) errors_.fail_at(0, "empty file");
    if (buf_[pos_] == '\xEF') pos_ += 3;  // UTF-8 byte-order mark
    skip_ws();
    expect('{', "a JSON object at the top level");
    bool saw_nodes = false;
    for (;;) {
      skip_ws();
      char c = peek("'}' or a key");
      if (c == '}') {
        ++pos_;
        break;
      }
      if (c == ',') {
        ++pos_;
        continue;
      }
      saw_nodes |= read_top_key();
    }
    skip_ws();
    if (pos_ < end_ || fill()) {
      skip_ws();
      if (pos_ < end_) errors_.fail_at(offset(), "unexpected data after the top-level object");
    }
    if (!saw_nodes) throw UserError(errors_.file + ": no \"nodes\" array: not a PyTorch execution trace");
  }

  // Reads one key and its value; true for "nodes".
  bool read_top_key() {
    std::string key = read_raw_value();
    if (key.size() < 2 || key.front() != '"') errors_.fail_at(offset() - key.size(), "expected a key string");
    key = key.substr(1, key.size() - 2);
    skip_ws();
    expect(':', "':' after a key");
    skip_ws();
    if (key == "nodes") {
      parse_nodes();
      return true;
    }
    const uint64_t at = offset();
    std::string raw = read_raw_value();
    if (key == "schema") {
      if (raw.size() < 2 || raw.front() != '"') errors_.fail_at(offset(), "\"schema\" is not a string");
      t_.schema = raw.substr(1, raw.size() - 2);
    } else {
      if (std::string why = metadata_problem(raw); !why.empty()) {
        size_t bad = first_invalid_utf8(raw.data(), raw.size());
        errors_.fail_at(at + (bad < raw.size() ? bad : 0), "\"" + key + "\": " + why);
      }
      t_.metadata.emplace_back(key, raw);
    }
    return false;
  }

  // Why a top-level value, kept as raw text and written back as it is, is not JSON; empty when it is. Text such
  // as NaN or Infinity reads as a number to a lenient parser, but no JSON reader takes it back.
  static std::string metadata_problem(std::string_view raw) {
    if (first_invalid_utf8(raw.data(), raw.size()) < raw.size()) return "a byte that is not UTF-8";
    if (nlohmann::json::accept(raw)) return {};
    std::string_view head = raw.substr(0, 40);
    bool non_finite = head.find("NaN") != std::string_view::npos || head.find("nan") != std::string_view::npos ||
                      head.find("Inf") != std::string_view::npos || head.find("inf") != std::string_view::npos;
    std::string shown(head);
    std::replace_if(
        shown.begin(), shown.end(), [](char ch) { return ch >= 0 && ch < ' '; }, ' ');  // one line
    if (raw.size() > head.size()) shown += "...";
    return "'" + shown + "' is not a JSON value" + (non_finite ? " (JSON has no NaN or infinite numbers)" : "");
  }

  // ---- buffered text ----
  uint64_t offset() const { return base_ + pos_; }

  // Reads more text, keeping buf_[mark_, end_). Returns false at the end of the source.
  bool fill() {
    if (eof_) return false;
    if (mark_ > 0) {
      std::memmove(buf_.data(), buf_.data() + mark_, end_ - mark_);
      end_ -= mark_;
      pos_ -= mark_;
      base_ += mark_;
      mark_ = 0;
    }
    // grow when full: a piece larger than the buffer, or a whole document being gathered
    if (end_ == buf_.size()) buf_.resize(std::max<size_t>(buf_.size() * 2, 1u << 20));
    size_t got = src_.read(buf_.data() + end_, buf_.size() - end_);
    if (got == 0) {
      eof_ = true;
      return false;
    }
    end_ += got;
    return true;
  }

  // Skips whitespace; keeps buf_[mark_, ...) when it must read more.
  void skip_ws() {
    for (;;) {
      while (pos_ < end_ && is_json_space(buf_[pos_])) ++pos_;
      if (pos_ < end_ || !fill()) return;
    }
  }

  char peek(const char* what) {
    if (pos_ >= end_ && !fill()) errors_.fail_at(offset(), std::string("unexpected end of file, expected ") + what);
    return buf_[pos_];
  }

  void expect(char c, const char* what) {
    if (peek(what) != c) errors_.fail_at(offset(), std::string("expected ") + what);
    ++pos_;
  }

  // Reads one complete value at pos_ and returns its raw text (small values only: top-level metadata).
  std::string read_raw_value() {
    mark_ = pos_;
    char c = peek("a value");
    uint64_t start = offset();
    size_t i = pos_;
    if (c == '{' || c == '[' || c == '"') {
      ValueScan scan;
      if (c == '"') {
        scan.in_string = true;
        ++i;
      }
      i = scan_to_end(scan, i, start, "value");
    } else {
      i = scan_scalar_end(i);
      if (i == pos_) errors_.fail_at(offset(), "expected a value");
    }
    std::string raw(buf_.data() + pos_, i - pos_);
    pos_ = i;
    mark_ = pos_;
    return raw;
  }

  // Index just past a number, true, false or null starting at i, reading more text as needed.
  size_t scan_scalar_end(size_t i) {
    for (;;) {
      while (i < end_ && !is_json_space(buf_[i]) && buf_[i] != ',' && buf_[i] != '}' && buf_[i] != ']') ++i;
      if (i < end_) return i;
      uint64_t done = base_ + i;
      const bool more = fill();  // moves the buffer even when it finds the end: `i` follows it either way
      i = static_cast<size_t>(done - base_);
      if (!more) return i;
    }
  }

  // Index just past the end of the value `scan` is in, reading more text as needed; `start` is the value's file
  // offset, for errors.
  size_t scan_to_end(ValueScan& scan, size_t i, uint64_t start, const char* what) {
    for (;;) {
      size_t r = scan.run(buf_.data(), i, end_);
      if (r == ValueScan::kUnbalanced) errors_.fail_at(start, std::string("unbalanced brackets in ") + what);
      if (r != ValueScan::kMore) return r;
      uint64_t done = base_ + end_;
      if (!fill())
        errors_.fail_at(start,
                        std::string("unexpected end of file inside the ") + what + " starting here (truncated trace?)");
      i = static_cast<size_t>(done - base_);
    }
  }

  // ---- the nodes array, cut into pieces ----
  void parse_nodes() {
    expect('[', "'[' to start the nodes array");
    constexpr uint64_t kClosed = UINT64_MAX;
    uint64_t chunk = kClosed, chunk_end = 0;  // file offsets of the open piece
    for (;;) {
      mark_ = chunk == kClosed ? pos_ : static_cast<size_t>(chunk - base_);
      skip_ws();
      char c = peek("a node or ']'");
      if (c == ']') {
        if (chunk != kClosed) flush(chunk, chunk_end);
        ++pos_;
        mark_ = pos_;
        return;
      }
      if (c == ',') {
        ++pos_;
        continue;
      }
      if (c != '{') errors_.fail_at(offset(), "expected a node object in \"nodes\"");
      uint64_t node = offset();
      if (chunk == kClosed) {
        chunk = node;
        mark_ = pos_;
      }
      ValueScan scan;
      pos_ = scan_to_end(scan, pos_, node, "node");
      chunk_end = offset();
      if (chunk_end - chunk >= opt_.chunk_bytes) {
        flush(chunk, chunk_end);
        chunk = kClosed;
      }
    }
  }

  // Parses the nodes at file offsets [from_off, to_off) as one array.
  void flush(uint64_t from_off, uint64_t to_off) {
    size_t from = static_cast<size_t>(from_off - base_);
    size_t len = static_cast<size_t>(to_off - from_off);
    piece_.resize(len + 2);
    errors_.piece_data = piece_.data();
    errors_.piece_size = len + 2;
    piece_[0] = '[';
    std::memcpy(piece_.data() + 1, buf_.data() + from, len);
    piece_[len + 1] = ']';
    errors_.piece_base = from_off - 1;
    parse_piece(len + 2);
  }

  void parse_piece(size_t len) {
    errors_.node_start = nullptr;
    try {
      od::document doc = parser_.iterate(piece_.data(), len, piece_.capacity());
      parse_node_array(doc.get_array());
    } catch (const simdjson::simdjson_error& e) {
      const ErrorContext& c = errors_;
      if (e.error() == simdjson::UTF8_ERROR) {
        size_t bad = first_invalid_utf8(piece_.data(), len);
        if (bad < len) c.fail_at(c.piece_base + bad, "a byte that is not UTF-8 (JSON text is UTF-8)");
      }
      if (e.error() == simdjson::STRING_ERROR && c.node_start) c.string_fail("a string");
      // simdjson cannot always say where it failed; the start of the node being read is the place we know, and
      // before any node is read (a structural error) a streaming parse of the piece finds the byte.
      if (!c.node_start) {
        std::string why;
        if (const size_t at = first_json_error(std::string_view(piece_.data(), len), why); at != std::string_view::npos)
          c.fail_at(c.piece_base + at, "invalid JSON: " + why);
      }
      uint64_t off = c.piece_base + (c.node_start ? static_cast<uint64_t>(c.node_start - c.piece_data) : 1);
      std::string where = c.last_id_set ? " (in the node after node " + std::to_string(c.last_id) + ")" : "";
      c.fail_at(off, std::string("invalid JSON: ") + simdjson::error_message(e.error()) + where);
    }
  }

  // Reads every node of an array, remembering where each starts for error messages.
  void parse_node_array(od::array nodes) {
    for (auto elem : nodes) {
      od::value v = elem.value();
      const char* loc = nullptr;
      if (v.current_location().get(loc) == simdjson::SUCCESS) errors_.node_start = loc;
      nodes_.read(v.get_object());
    }
  }

  ByteSource& src_;
  Trace& t_;
  const ReadOptions& opt_;
  ErrorContext& errors_;
  NodeReader& nodes_;

  RawBuffer buf_;
  size_t pos_ = 0, end_ = 0, mark_ = 0;  // in buf_: next byte, end of the text read, first byte to keep
  uint64_t base_ = 0;                    // file offset of buf_[0]
  bool eof_ = false;

  RawBuffer piece_;
  od::parser parser_;
};

}  // namespace

void read_et_nodes(ByteSource& src, Trace& trace, const ReadOptions& options, ErrorContext& errors, NodeReader& nodes,
                   bool whole_document) {
  EtText(src, trace, options, errors, nodes).run(whole_document);
}

}  // namespace reprise::detail
