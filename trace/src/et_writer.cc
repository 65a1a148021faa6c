#include <algorithm>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>

#include "et/schema_layout.h"
#include "output_file.h"
#include "reprise/trace/write.h"

namespace reprise {

void append_json_string(std::string& o, std::string_view s) {
  o += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\r':
        o += "\\r";
        break;
      case '\t':
        o += "\\t";
        break;
      case '\b':
        o += "\\b";
        break;
      case '\f':
        o += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += ch;
        }
    }
  }
  o += '"';
}

void append_json_int(std::string& o, int64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  o.append(buf, r.ptr);
}

void append_json_double(std::string& o, double d) {
  if (std::isnan(d)) {
    o += "\"nan\"";
  } else if (std::isinf(d)) {
    o += d > 0 ? "\"inf\"" : "\"-inf\"";
  } else {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, d);  // the shortest text that reads back as the same double
    o.append(buf, r.ptr);
    // keep it a JSON float so it reads back as a double
    if (std::find_if(buf, r.ptr, [](char c) { return c == '.' || c == 'e' || c == 'E'; }) == r.ptr) o += ".0";
  }
}

namespace {

void put_escaped(std::string& o, std::string_view s) { append_json_string(o, s); }
void put_int(std::string& o, int64_t v) { append_json_int(o, v); }
void put_double(std::string& o, double d) { append_json_double(o, d); }

class Writer {
 public:
  explicit Writer(const Trace& t) : t_(t) {}

  void write(std::string& o, const std::function<void(std::string&)>& flush) {
    o += "{\n  \"schema\": ";
    put_escaped(o, kCurrentSchema);
    std::string_view finish;
    for (auto& [k, v] : t_.metadata) {
      if (k == "finish_ts") {
        finish = v;
        continue;
      }
      o += ", ";
      put_escaped(o, k);
      o += ": ";
      o += v;
    }
    o += ",\n  \"nodes\": [";
    bool first = true;
    // PyTorch writes a node when it ends: children before parents.
    std::vector<std::pair<uint32_t, uint32_t>> stack;
    for (uint32_t r = 0; r < t_.nodes.size(); ++r) {
      if (t_.nodes[r].parent != kNone32) continue;
      stack.push_back({r, 0});
      while (!stack.empty()) {
        auto& [n, next] = stack.back();
        const Node& node = t_.nodes[n];
        if (next < node.num_children) {
          uint32_t c = t_.child_index[node.children + next++];
          stack.push_back({c, 0});
          continue;
        }
        o += first ? "\n    " : ",\n    ";
        first = false;
        write_node(o, node);
        stack.pop_back();
        if (o.size() > (1u << 20)) flush(o);
      }
    }
    o += "\n  ]";
    if (!finish.empty()) {
      o += ",\n  \"finish_ts\": ";
      o += finish;
    }
    o += "\n}\n";
    flush(o);
  }

 private:
  void write_node(std::string& o, const Node& n) {
    o += "{\"id\": ";
    put_int(o, n.id);
    o += ", \"name\": ";
    put_escaped(o, t_.name(n));
    o += ", \"ctrl_deps\": ";
    put_int(o, n.parent_id);
    o += ",\n      \"inputs\": ";
    write_args(o, t_.inputs(n), t_.input_types(n));
    o += ",\n      \"outputs\": ";
    write_args(o, t_.outputs(n), t_.output_types(n));
    o += ",\n      \"attrs\": [";
    bool first = true;
    auto attr_head = [&](std::string_view name, std::string_view type) {
      if (!first) o += ", ";
      first = false;
      o += "{\"name\": \"";
      o += name;
      o += "\", \"type\": \"";
      o += type;
      o += "\", \"value\": ";
    };
    for (const detail::NodeFieldRule& f : detail::node_fields()) {
      if (!(n.fields & f.bit)) continue;
      attr_head(f.name, f.et_type);
      if (f.get_int)
        put_int(o, f.get_int(n));
      else
        put_escaped(o, t_.str(f.get_str(n)));
      o += "}";
    }
    for (const Attr& a : t_.node_attrs(n)) {
      if (!first) o += ", ";
      first = false;
      o += "{\"name\": ";
      put_escaped(o, t_.str(a.name));
      o += ", \"type\": ";
      const Value& v = t_.values[a.value];
      std::string_view type = t_.str(a.type);
      if (type.empty())
        type = v.kind == ValueKind::Int      ? "int64"
               : v.kind == ValueKind::Double ? "double"
               : v.kind == ValueKind::Bool   ? "bool"
               : v.kind == ValueKind::String ? "string"
                                             : "json";
      put_escaped(o, type);
      o += ", \"value\": ";
      write_value(o, v);
      o += "}";
    }
    o += "]}";
  }

  void write_args(std::string& o, Span<Value> vals, Span<StrId> types) {
    o += "{\"values\": [";
    for (size_t i = 0; i < vals.size(); ++i) {
      if (i) o += ", ";
      write_value(o, vals[i]);
    }
    o += "], \"shapes\": [";
    for (size_t i = 0; i < vals.size(); ++i) {
      if (i) o += ", ";
      write_shape(o, vals[i], false);
    }
    o += "], \"types\": [";
    for (size_t i = 0; i < vals.size(); ++i) {
      if (i) o += ", ";
      put_escaped(o, t_.str(types[i]));
    }
    o += "], \"strides\": [";
    for (size_t i = 0; i < vals.size(); ++i) {
      if (i) o += ", ";
      write_shape(o, vals[i], true);
    }
    o += "]}";
  }

  void write_value(std::string& o, const Value& v) {
    switch (v.kind) {
      case ValueKind::None:
        o += "\"<None>\"";
        break;
      case ValueKind::Int:
        put_int(o, v.i);
        break;
      case ValueKind::Double:
        put_double(o, v.d);
        break;
      case ValueKind::Bool:
        o += v.i ? "true" : "false";
        break;
      case ValueKind::String:
      case ValueKind::Device:
        put_escaped(o, t_.str(v.ref));
        break;
      case ValueKind::Tensor: {
        const Tensor& x = t_.tensors[v.ref];
        o += '[';
        put_int(o, x.id);
        o += ',';
        put_int(o, x.storage_id);
        o += ',';
        put_int(o, x.offset);
        o += ',';
        put_int(o, x.numel);
        o += ',';
        put_int(o, x.itemsize);
        if (x.has_device) {
          o += ',';
          put_escaped(o, t_.str(x.device));
        }
        o += ']';
        break;
      }
      case ValueKind::List:
      case ValueKind::Tuple: {
        o += '[';
        bool first = true;
        for (const Value& e : t_.items(v)) {
          if (!first) o += ',';
          first = false;
          write_value(o, e);
        }
        o += ']';
        break;
      }
    }
  }

  void write_shape(std::string& o, const Value& v, bool strides) {
    if (v.kind == ValueKind::Tensor) {
      const Tensor& x = t_.tensors[v.ref];
      std::vector<int64_t> s;
      if (strides) s = t_.strides(x);
      o += '[';
      for (uint16_t k = 0; k < x.rank; ++k) {
        if (k) o += ',';
        put_int(o, strides ? s[k] : t_.ints[x.dims + k]);
      }
      o += ']';
    } else if (v.kind == ValueKind::List || v.kind == ValueKind::Tuple) {
      o += '[';
      bool first = true;
      for (const Value& e : t_.items(v)) {
        if (!first) o += ',';
        first = false;
        write_shape(o, e, strides);
      }
      o += ']';
    } else {
      o += "[]";
    }
  }

  const Trace& t_;
};

}  // namespace

std::string et_json(const Trace& trace) {
  std::string all, buf;
  Writer(trace).write(buf, [&](std::string& o) {
    all += o;
    o.clear();
  });
  return all;
}

void write_et(const Trace& trace, const std::string& path, int gzip_level) {
  OutputFile file(path, gzip_level);
  // Formatting and writing (gzip, for .gz) overlap: a second thread writes each full buffer while this one formats
  // the next; two buffers take turns.
  std::mutex mu;
  std::condition_variable cv;
  std::string full, buf;
  bool have_full = false, finished = false;
  std::thread writer([&] {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return have_full || finished; });
      if (!have_full) return;
      lock.unlock();
      file.write(full);
      full.clear();
      lock.lock();
      have_full = false;
      cv.notify_all();
    }
  });
  auto hand_over = [&](std::string& o) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !have_full; });
    file.throw_if_failed();  // a full disk ends the formatting too
    std::swap(full, o);
    have_full = true;
    cv.notify_all();
  };
  try {
    buf.reserve(2u << 20);
    full.reserve(2u << 20);
    Writer(trace).write(buf, hand_over);
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = true;
    }
    cv.notify_all();
    writer.join();
    throw;
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return !have_full; });
    finished = true;
  }
  cv.notify_all();
  writer.join();
  file.commit();
}

void write_text_file(const std::string& path, std::string_view text) {
  OutputFile file(path);
  file.write(text);
  file.commit();
}

}  // namespace reprise
