// PyTorch ET reader: every schema from the flat 1.0.1 layout to 1.1.1-chakra.0.0.4, streamed.
//
// The text is cut at node boundaries by a structural scan (json_scan.h) into pieces of ~32 MB, each parsed
// by simdjson's on-demand parser as an array of nodes. Values are first read into a small per-node tree,
// then bound with their type string and shapes/strides into the model's pools.
#include <simdjson.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "byte_source.h"
#include "json_scan.h"
#include "reader_internal.h"
#include "reprise/trace/read.h"
#include "type_string.h"

namespace reprise {
namespace detail {
namespace {

namespace od = simdjson::ondemand;

// A JSON value read from the trace before its type is known.
struct TNode {
  enum Type : uint8_t { Null, Int, UInt, Double, Bool, Str, Arr, Obj } t = Null;
  uint32_t count = 0;
  union {
    int64_t i;
    uint64_t u;
    double d;
    uint32_t ref;  // Str/Obj: StrId; Arr: first child in pool
    bool b;
  };
  TNode() : i(0) {}
};

struct ArgTrees {
  int32_t values = -1, shapes = -1, types = -1, strides = -1;  // indices in the temp pool
  void reset() { values = shapes = types = strides = -1; }
};

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

// Thrown when the whole-document fast path meets malformed JSON: the streaming path then reads the same text and
// says precisely what is wrong and where.
struct RetryStreaming {
  std::string text;
};

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

class EtReader {
 public:
  EtReader(ByteSource& src, Trace& trace, const ReadOptions& options, bool whole_document)
      : src_(src), t_(trace), opt_(options), name_(src.name()), whole_document_(whole_document) {}

  void run() {
    buf_.resize(0, 1u << 20);
    if (whole_document_) {
      // Traces up to kWholeLimit are parsed as one document: no structural pre-scan, no copy.
      while (end_ < kWholeLimit && fill()) {
      }
      if (eof_ && has_content()) {
        parse_whole();
        return;
      }
    }
    skip_ws();
    if (pos_ >= end_ && !fill()) fail_at(0, "empty file");
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
      std::string key = read_raw_value();
      if (key.size() < 2 || key.front() != '"') fail_at(offset() - key.size(), "expected a key string");
      key = key.substr(1, key.size() - 2);
      skip_ws();
      expect(':', "':' after a key");
      skip_ws();
      if (key == "nodes") {
        parse_nodes();
        saw_nodes = true;
      } else {
        std::string raw = read_raw_value();
        if (key == "schema") {
          if (raw.size() < 2 || raw.front() != '"') fail_at(offset(), "\"schema\" is not a string");
          t_.schema = raw.substr(1, raw.size() - 2);
        } else {
          t_.metadata.emplace_back(key, raw);
        }
      }
    }
    skip_ws();
    if (pos_ < end_ || fill()) {
      skip_ws();
      if (pos_ < end_) fail_at(offset(), "unexpected data after the top-level object");
    }
    if (!saw_nodes) throw UserError(name_ + ": no \"nodes\" array: not a PyTorch execution trace");
    check_schema();
  }

 private:
  static constexpr size_t kWholeLimit = 16u << 20;

  bool has_content() const {
    for (size_t i = 0; i < end_; ++i)
      if (!is_json_space(buf_.data()[i])) return true;
    return false;
  }

  std::string_view raw_text(od::value v) {
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

  void parse_whole() {
    piece_data_ = buf_.data();
    piece_base_ = 0;
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
          t_.metadata.emplace_back(std::string(key), std::string(raw_text(v)));
        }
      }
      const char* rest = nullptr;  // anything after the top-level object
      if (doc.current_location().get(rest) == simdjson::SUCCESS && rest && rest < buf_.data() + end_)
        throw RetryStreaming{std::string(buf_.data(), end_)};
    } catch (const simdjson::simdjson_error&) {
      throw RetryStreaming{std::string(buf_.data(), end_)};
    }
    if (!saw_nodes) throw UserError(name_ + ": no \"nodes\" array: not a PyTorch execution trace");
    check_schema();
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
    if (pos_ >= end_ && !fill()) fail_at(offset(), std::string("unexpected end of file, expected ") + what);
    return buf_[pos_];
  }

  void expect(char c, const char* what) {
    if (peek(what) != c) fail_at(offset(), std::string("expected ") + what);
    ++pos_;
  }

  [[noreturn]] void fail_at(uint64_t off, const std::string& msg) {
    throw UserError(name_ + ": byte " + std::to_string(off) + ": " + msg);
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
      for (;;) {
        while (i < end_ && !is_json_space(buf_[i]) && buf_[i] != ',' && buf_[i] != '}' && buf_[i] != ']') ++i;
        if (i < end_) break;
        uint64_t done = base_ + i;
        if (!fill()) break;
        i = static_cast<size_t>(done - base_);
      }
      if (i == pos_) fail_at(offset(), "expected a value");
    }
    std::string raw(buf_.data() + pos_, i - pos_);
    pos_ = i;
    mark_ = pos_;
    return raw;
  }

  // Index just past the end of the value `scan` is in, reading more text as needed; `start` is the value's file
  // offset, for errors.
  size_t scan_to_end(ValueScan& scan, size_t i, uint64_t start, const char* what) {
    for (;;) {
      size_t r = scan.run(buf_.data(), i, end_);
      if (r == ValueScan::kUnbalanced) fail_at(start, std::string("unbalanced brackets in ") + what);
      if (r != ValueScan::kMore) return r;
      uint64_t done = base_ + end_;
      if (!fill())
        fail_at(start, std::string("unexpected end of file inside the ") + what + " starting here (truncated trace?)");
      i = static_cast<size_t>(done - base_);
    }
  }

  // ---- the nodes array ----
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
      if (c != '{') fail_at(offset(), "expected a node object in \"nodes\"");
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

  void flush(uint64_t from_off, uint64_t to_off) {
    size_t from = static_cast<size_t>(from_off - base_);
    size_t len = static_cast<size_t>(to_off - from_off);
    piece_.resize(len + 2);
    piece_data_ = piece_.data();
    piece_[0] = '[';
    std::memcpy(piece_.data() + 1, buf_.data() + from, len);
    piece_[len + 1] = ']';
    piece_base_ = from_off - 1;
    parse_piece(len + 2);
  }

  void parse_piece(size_t len) {
    node_start_ = nullptr;
    try {
      od::document doc = parser_.iterate(piece_.data(), len, piece_.capacity());
      parse_node_array(doc.get_array());
    } catch (const simdjson::simdjson_error& e) {
      // simdjson cannot always say where it failed; the start of the node being read is the place we know
      uint64_t off = piece_base_ + (node_start_ ? static_cast<uint64_t>(node_start_ - piece_data_) : 1);
      std::string where = last_id_set_ ? " (in the node after node " + std::to_string(last_id_) + ")" : "";
      fail_at(off, std::string("invalid JSON: ") + simdjson::error_message(e.error()) + where);
    }
  }

  [[noreturn]] void node_fail(const std::string& msg) {
    uint64_t off = piece_base_ + (node_start_ ? static_cast<uint64_t>(node_start_ - piece_data_) : 0);
    std::string who = cur_id_set_ ? "node " + std::to_string(cur_id_) : "node";
    fail_at(off, who + ": " + msg);
  }

  // Parses every node of an array, remembering where each starts for error messages.
  void parse_node_array(od::array nodes) {
    for (auto elem : nodes) {
      od::value v = elem.value();
      const char* loc = nullptr;
      if (v.current_location().get(loc) == simdjson::SUCCESS) node_start_ = loc;
      parse_node(v.get_object());
    }
  }

  // ---- one node ----
  void parse_node(od::object obj) {
    Node n;
    tpool_.clear();
    in_.reset();
    out_.reset();
    node_attrs_.clear();
    bool has_id = false, has_name = false, has_parent = false;
    cur_id_set_ = false;
    for (auto field : obj) {
      std::string_view key = field.unescaped_key();
      od::value v = field.value();
      if (key == "id") {
        n.id = get_int(v, "id");
        has_id = true;
        cur_id_ = n.id;
        cur_id_set_ = true;
      } else if (key == "name") {
        n.name = t_.strings.intern(get_str(v, "name"));
        has_name = true;
      } else if (key == "ctrl_deps" || key == "parent") {
        n.parent_id = get_int(v, std::string(key).c_str());
        has_parent = true;
      } else if (key == "inputs" || key == "outputs") {
        ArgTrees& a = key == "inputs" ? in_ : out_;
        if (v.type() == od::json_type::object) {
          for (auto f2 : v.get_object()) {
            std::string_view k2 = f2.unescaped_key();
            od::value v2 = f2.value();
            if (k2 == "values")
              a.values = tree(v2, 0);
            else if (k2 == "shapes")
              a.shapes = tree(v2, 0);
            else if (k2 == "types")
              a.types = tree(v2, 0);
            else if (k2 == "strides")
              a.strides = tree(v2, 0);
          }
        } else {
          a.values = tree(v, 0);
        }
      } else if (key == "input_shapes") {
        in_.shapes = tree(v, 0);
      } else if (key == "input_types") {
        in_.types = tree(v, 0);
      } else if (key == "input_strides") {
        in_.strides = tree(v, 0);
      } else if (key == "output_shapes") {
        out_.shapes = tree(v, 0);
      } else if (key == "output_types") {
        out_.types = tree(v, 0);
      } else if (key == "output_strides") {
        out_.strides = tree(v, 0);
      } else if (key == "attrs") {
        if (v.type() != od::json_type::array) node_fail("\"attrs\" is not a list");
        for (auto a : v.get_array()) {
          std::string_view aname, atype;
          int32_t aval = -1;
          for (auto f2 : a.get_object()) {
            std::string_view k2 = f2.unescaped_key();
            od::value v2 = f2.value();
            if (k2 == "name")
              aname = keep(get_str(v2, "attr name"));
            else if (k2 == "type")
              atype = keep(get_str(v2, "attr type"));
            else if (k2 == "value")
              aval = tree(v2, 0);
          }
          if (aname.empty()) node_fail("an attr has no name");
          if (aval < 0) node_fail("attr " + std::string(aname) + " has no value");
          set_attr(n, aname, atype, aval);
        }
      } else {
        // flat attributes of the 1.0.1 layout, and any key we do not know
        std::string_view k = keep(key);
        set_attr(n, k, {}, tree(v, 0));
      }
    }
    if (!has_id) node_fail("missing \"id\"");
    if (!has_name) node_fail("missing \"name\"");
    if (!has_parent) node_fail("missing \"ctrl_deps\"/\"parent\"");
    bind_args(in_, n.inputs, n.num_inputs, "inputs");
    bind_args(out_, n.outputs, n.num_outputs, "outputs");
    n.attrs = static_cast<uint32_t>(t_.attrs.size());
    for (auto& [name, type, tn] : node_attrs_) {
      Attr a;
      a.name = t_.strings.intern(name);
      a.type = t_.strings.intern(type);
      Value v = bind(kNone32, tn, -1, -1);
      a.value = static_cast<uint32_t>(t_.values.size());
      t_.values.push_back(v);
      t_.arg_types.push_back(0);
      t_.attrs.push_back(a);
    }
    n.num_attrs = static_cast<uint32_t>(t_.attrs.size()) - n.attrs;
    t_.nodes.push_back(n);
    last_id_ = n.id;
    last_id_set_ = true;
  }

  // Keeps a string_view valid for the rest of this node (simdjson's string buffer is reused per string).
  std::string_view keep(std::string_view s) { return t_.strings.str(t_.strings.intern(s)); }

  int64_t get_int(od::value v, const char* what) {
    int64_t x;
    if (v.get_int64().get(x) != simdjson::SUCCESS) node_fail(std::string("\"") + what + "\" is not an integer");
    return x;
  }
  std::string_view get_str(od::value v, const char* what) {
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) node_fail(std::string("\"") + what + "\" is not a string");
    return s;
  }

  void set_attr(Node& n, std::string_view name, std::string_view type, int32_t tn) {
    const TNode& v = tpool_[tn];
    auto as_int = [&](int64_t& dst, uint16_t bit) {
      if (v.t == TNode::Int)
        dst = v.i;
      else if (v.t == TNode::UInt)
        dst = static_cast<int64_t>(v.u);
      else
        node_fail("attr " + std::string(name) + " is not an integer");
      n.fields |= bit;
    };
    auto as_str = [&](StrId& dst, uint16_t bit) {
      if (v.t != TNode::Str) node_fail("attr " + std::string(name) + " is not a string");
      dst = v.ref;
      n.fields |= bit;
    };
    if (name == "rf_id")
      as_int(n.rf_id, kHasRfId);
    else if (name == "fw_parent")
      as_int(n.fw_parent, kHasFwParent);
    else if (name == "seq_id")
      as_int(n.seq_id, kHasSeqId);
    else if (name == "tid")
      as_int(n.tid, kHasTid);
    else if (name == "fw_tid")
      as_int(n.fw_tid, kHasFwTid);
    else if (name == "scope") {
      int64_t s = 0;
      as_int(s, kHasScope);
      n.scope = static_cast<int32_t>(s);
    } else if (name == "op_schema")
      as_str(n.op_schema, kHasOpSchema);
    else if (name == "kernel_backend")
      as_str(n.kernel_backend, kHasKernelBackend);
    else if (name == "kernel_file")
      as_str(n.kernel_file, kHasKernelFile);
    else if (name == "tensor_range")
      as_str(n.tensor_range, kHasTensorRange);
    else
      node_attrs_.push_back({name, type, tn});
  }

  // ---- the per-node value tree ----
  int32_t tree(od::value v, int depth) {
    if (depth > 64) node_fail("values nested more than 64 deep");
    TNode n;
    switch (v.type()) {
      case od::json_type::array: {
        if (levels_.size() <= static_cast<size_t>(depth)) levels_.resize(depth + 1);
        size_t mark = levels_[depth].size();
        for (auto e : v.get_array()) {
          int32_t c = tree(e.value(), depth + 1);
          TNode kid = tpool_[c];
          levels_[depth].push_back(kid);
          tpool_.pop_back();  // the child was appended last; its own children stay in the pool
        }
        n.t = TNode::Arr;
        n.ref = static_cast<uint32_t>(tpool_.size());
        n.count = static_cast<uint32_t>(levels_[depth].size() - mark);
        tpool_.insert(tpool_.end(), levels_[depth].begin() + static_cast<std::ptrdiff_t>(mark), levels_[depth].end());
        levels_[depth].resize(mark);
        break;
      }
      case od::json_type::object: {
        std::string_view raw = v.get_object().value().raw_json().value();
        n.t = TNode::Obj;
        n.ref = t_.strings.intern(raw);
        break;
      }
      case od::json_type::number: {
        od::number num = v.get_number();
        if (num.is_int64()) {
          n.t = TNode::Int;
          n.i = num.get_int64();
        } else if (num.is_uint64()) {
          n.t = TNode::UInt;
          n.u = num.get_uint64();
        } else {
          n.t = TNode::Double;
          n.d = num.get_double();
        }
        break;
      }
      case od::json_type::string:
        n.t = TNode::Str;
        n.ref = t_.strings.intern(v.get_string().value());
        break;
      case od::json_type::boolean:
        n.t = TNode::Bool;
        n.b = v.get_bool();
        break;
      case od::json_type::null:
        v.is_null();
        n.t = TNode::Null;
        break;
    }
    tpool_.push_back(n);
    return static_cast<int32_t>(tpool_.size() - 1);
  }

  // ---- binding values to types, shapes and strides ----
  const TNode* child(int32_t arr, uint32_t i) const {
    if (arr < 0) return nullptr;
    const TNode& a = tpool_[arr];
    if (a.t != TNode::Arr || i >= a.count) return nullptr;
    return &tpool_[a.ref + i];
  }
  int32_t child_index(int32_t arr, uint32_t i) const {
    const TNode* c = child(arr, i);
    return c ? static_cast<int32_t>(c - tpool_.data()) : -1;
  }

  void bind_args(const ArgTrees& a, uint32_t& first, uint32_t& count, const char* what) {
    first = static_cast<uint32_t>(t_.values.size());
    count = 0;
    if (a.values < 0) return;
    const TNode& vals = tpool_[a.values];
    if (vals.t != TNode::Arr) node_fail(std::string("\"") + what + "\" values are not a list");
    if (a.types >= 0 && tpool_[a.types].t == TNode::Arr && tpool_[a.types].count != vals.count)
      node_fail(std::string(what) + ": " + std::to_string(vals.count) + " values but " +
                std::to_string(tpool_[a.types].count) + " types");
    size_t mark = args_.size();
    for (uint32_t i = 0; i < vals.count; ++i) {
      StrId type = 0;
      if (const TNode* ty = child(a.types, i)) {
        if (ty->t != TNode::Str) node_fail(std::string(what) + ": type " + std::to_string(i) + " is not a string");
        type = ty->ref;
      }
      uint32_t tnode = type ? types_.get(type, t_.strings) : kNone32;
      args_.push_back(
          {bind(tnode, static_cast<int32_t>(vals.ref + i), child_index(a.shapes, i), child_index(a.strides, i)), type});
    }
    first = static_cast<uint32_t>(t_.values.size());
    for (size_t k = mark; k < args_.size(); ++k) {
      t_.values.push_back(args_[k].first);
      t_.arg_types.resize(t_.values.size());
      t_.arg_types.back() = args_[k].second;
    }
    count = static_cast<uint32_t>(args_.size() - mark);
    args_.resize(mark);
  }

  bool is_int(const TNode* n) const { return n && (n->t == TNode::Int || n->t == TNode::UInt); }

  Value bind(uint32_t ty, int32_t vi, int32_t shape, int32_t stride) {
    const TNode& v = tpool_[vi];
    const TypeNode* tn = ty == kNone32 ? nullptr : &types_.node(ty);
    Value out;
    switch (v.t) {
      case TNode::Null:
        out.kind = ValueKind::None;
        break;
      case TNode::Bool:
        out.kind = ValueKind::Bool;
        out.i = v.b ? 1 : 0;
        break;
      case TNode::Int:
      case TNode::UInt: {
        bool big = v.t == TNode::UInt;
        if ((tn && tn->kind == TypeNode::Double) || big) {
          out.kind = ValueKind::Double;
          out.d = big ? static_cast<double>(v.u) : static_cast<double>(v.i);
        } else if (tn && tn->kind == TypeNode::Bool) {
          out.kind = ValueKind::Bool;
          out.i = v.i != 0;
        } else {
          out.kind = ValueKind::Int;
          out.i = v.i;
        }
        break;
      }
      case TNode::Double:
        out.kind = ValueKind::Double;
        out.d = v.d;
        break;
      case TNode::Str:
      case TNode::Obj: {
        std::string_view s = t_.strings.str(v.ref);
        if (s == "<None>") {
          out.kind = ValueKind::None;
        } else if (tn && tn->kind == TypeNode::Double && (s == "inf" || s == "-inf" || s == "nan" || s == "-nan")) {
          out.kind = ValueKind::Double;
          out.d = s[0] == '-' ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
          if (s.find("nan") != std::string_view::npos) out.d = std::numeric_limits<double>::quiet_NaN();
        } else {
          out.kind = tn && tn->kind == TypeNode::Device ? ValueKind::Device : ValueKind::String;
          out.ref = v.ref;
        }
        break;
      }
      case TNode::Arr: {
        if (tn && tn->kind == TypeNode::Tensor && (v.count == 5 || v.count == 6)) {
          bool ok = true;
          for (uint32_t k = 0; k < 5; ++k) ok = ok && is_int(child(vi, k));
          if (ok && v.count == 6) ok = child(vi, 5)->t == TNode::Str;
          if (ok) {
            out.kind = ValueKind::Tensor;
            out.ref = make_tensor(vi, tn->dtype, shape, stride);
            break;
          }
        }
        out.kind = tn && tn->kind == TypeNode::Tuple ? ValueKind::Tuple : ValueKind::List;
        int depth = bind_depth_++;
        if (depth > 64) node_fail("values nested more than 64 deep");
        if (vals_levels_.size() <= static_cast<size_t>(depth)) vals_levels_.resize(depth + 1);
        size_t mark = vals_levels_[depth].size();
        for (uint32_t k = 0; k < v.count; ++k) {
          uint32_t ct = kNone32;
          if (tn && (tn->kind == TypeNode::List || tn->kind == TypeNode::Tuple) && tn->count > 0)
            ct = tn->first + std::min(k, tn->count - 1);
          Value kid = bind(ct, static_cast<int32_t>(v.ref + k), child_index(shape, k), child_index(stride, k));
          vals_levels_[depth].push_back(kid);
        }
        out.ref = static_cast<uint32_t>(t_.values.size());
        out.count = v.count;
        t_.values.insert(t_.values.end(), vals_levels_[depth].begin() + static_cast<std::ptrdiff_t>(mark),
                         vals_levels_[depth].end());
        t_.arg_types.resize(t_.values.size());
        vals_levels_[depth].resize(mark);
        --bind_depth_;
        break;
      }
    }
    return out;
  }

  uint32_t make_tensor(int32_t vi, StrId dtype, int32_t shape, int32_t stride) {
    auto num = [&](uint32_t k) {
      const TNode* c = child(vi, k);
      return c->t == TNode::Int ? c->i : static_cast<int64_t>(c->u);
    };
    Tensor t;
    t.id = num(0);
    t.storage_id = num(1);
    t.offset = num(2);
    t.numel = num(3);
    t.itemsize = static_cast<int32_t>(num(4));
    if (tpool_[vi].count == 6) {
      t.has_device = true;
      t.device = child(vi, 5)->ref;
    }
    t.dtype = dtype;
    size_t ints_mark = t_.ints.size();
    t.dims = static_cast<uint32_t>(ints_mark);
    if (shape >= 0 && tpool_[shape].t == TNode::Arr) {
      const TNode& s = tpool_[shape];
      for (uint32_t k = 0; k < s.count; ++k) {
        const TNode* d = child(shape, k);
        if (!is_int(d)) node_fail("a tensor shape holds a non-integer");
        t_.ints.push_back(d->i);
      }
      t.rank = static_cast<uint16_t>(s.count);
    }
    if (stride >= 0 && tpool_[stride].t == TNode::Arr && tpool_[stride].count == t.rank) {
      bool ok = true;
      for (uint32_t k = 0; k < t.rank; ++k) ok = ok && is_int(child(stride, k));
      if (ok) {
        t.has_strides = true;
        t.strides = static_cast<uint32_t>(t_.ints.size());
        for (uint32_t k = 0; k < t.rank; ++k) t_.ints.push_back(child(stride, k)->i);
      }
    }
    uint64_t h = 0;
    for (int64_t x : {t.id, t.storage_id, t.offset, t.numel, static_cast<int64_t>(t.itemsize),
                      static_cast<int64_t>(t.device), static_cast<int64_t>(t.dtype),
                      static_cast<int64_t>(t.has_device) * 2 + t.has_strides, static_cast<int64_t>(t.rank)})
      h = mix(h, static_cast<uint64_t>(x));
    for (size_t k = ints_mark; k < t_.ints.size(); ++k) h = mix(h, static_cast<uint64_t>(t_.ints[k]));
    auto it = tensor_index_.find(h);
    if (it != tensor_index_.end()) {
      for (uint32_t c = it->second; c != kNone32; c = tensor_next_[c]) {
        if (same_tensor(t_.tensors[c], t, ints_mark)) {
          t_.ints.resize(ints_mark);
          return c;
        }
      }
    }
    uint32_t idx = static_cast<uint32_t>(t_.tensors.size());
    t_.tensors.push_back(t);
    tensor_next_.push_back(it != tensor_index_.end() ? it->second : kNone32);
    tensor_index_[h] = idx;
    return idx;
  }

  bool same_tensor(const Tensor& a, const Tensor& b, size_t b_ints) const {
    if (a.id != b.id || a.storage_id != b.storage_id || a.offset != b.offset || a.numel != b.numel ||
        a.itemsize != b.itemsize || a.device != b.device || a.dtype != b.dtype || a.has_device != b.has_device ||
        a.has_strides != b.has_strides || a.rank != b.rank)
      return false;
    for (uint16_t k = 0; k < a.rank; ++k)
      if (t_.ints[a.dims + k] != t_.ints[b_ints + k]) return false;
    if (a.has_strides)
      for (uint16_t k = 0; k < a.rank; ++k)
        if (t_.ints[a.strides + k] != t_.ints[b_ints + a.rank + k]) return false;
    return true;
  }

  void check_schema() {
    static const char* known[] = {"1.0.1", "1.0.2", "1.0.3", "1.0.4", "1.1.0", "1.1.1"};
    if (t_.schema.empty()) return;  // execution graphs before schemas were tagged
    std::string base = t_.schema.substr(0, t_.schema.find('-'));
    for (const char* k : known)
      if (base == k) return;
    if (opt_.warn) opt_.warn(name_ + ": unknown ET schema \"" + t_.schema + "\"; its layout was recognised and read");
  }

  ByteSource& src_;
  Trace& t_;
  const ReadOptions& opt_;
  std::string name_;

  bool whole_document_;
  RawBuffer buf_;
  size_t pos_ = 0, end_ = 0, mark_ = 0;
  uint64_t base_ = 0;
  bool eof_ = false;

  RawBuffer piece_;
  const char* piece_data_ = nullptr;  // the text node_start_ points into
  uint64_t piece_base_ = 0;
  od::parser parser_;
  const char* node_start_ = nullptr;
  int64_t cur_id_ = 0, last_id_ = 0;
  bool cur_id_set_ = false, last_id_set_ = false;

  std::vector<TNode> tpool_;
  std::vector<std::vector<TNode>> levels_;
  std::vector<std::vector<Value>> vals_levels_;
  int bind_depth_ = 0;
  std::vector<std::pair<Value, StrId>> args_;
  ArgTrees in_, out_;
  struct PendingAttr {
    std::string_view name, type;
    int32_t tree;
  };
  std::vector<PendingAttr> node_attrs_;
  TypeCache types_;
  std::unordered_map<uint64_t, uint32_t> tensor_index_;
  std::vector<uint32_t> tensor_next_;
};

}  // namespace

Trace read_et_source(ByteSource& src, const ReadOptions& options) {
  Trace t;
  t.source = src.name();
  try {
    EtReader(src, t, options, true).run();
  } catch (RetryStreaming& retry) {
    MemorySource again(retry.text, src.name());
    t = Trace();
    t.source = src.name();
    EtReader(again, t, options, false).run();
  }
  finalize_trace(t, options);
  return t;
}

}  // namespace detail

Trace read_et(const std::string& path, const ReadOptions& options) {
  auto src = detail::open_file(path);
  return detail::read_et_source(*src, options);
}

Trace read_et_text(std::string_view text, const std::string& name, const ReadOptions& options) {
  detail::MemorySource src(text, name);
  return detail::read_et_source(src, options);
}

}  // namespace reprise
