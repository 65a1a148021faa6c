#include "yaml_check.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "reprise/common/device_name.h"
#include "reprise/common/error.h"
#include "reprise/common/files.h"
#include "reprise/common/utf8.h"

namespace reprise::gen {
namespace {

std::string quoted_list(std::initializer_list<const char*> items) {
  std::string s;
  for (const char* k : items) s += (s.empty() ? "" : ", ") + std::string(k);
  return s;
}

bool parse_int(const std::string& s, int64_t& v) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return false;
  v = x;
  return true;
}

// "FILE:LINE:COL" of byte `offset` of `text` (1-based; columns count bytes and lines end at '\n', as yaml-cpp's marks).
std::string place(const std::string& path, std::string_view text, size_t offset) {
  const size_t line = static_cast<size_t>(std::count(text.begin(), text.begin() + offset, '\n'));
  const size_t nl = offset == 0 ? std::string_view::npos : text.rfind('\n', offset - 1);
  const size_t column = nl == std::string_view::npos ? offset : offset - nl - 1;
  return path + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1);
}

// FILE:LINE:COL of a yaml-cpp mark (0-based line and column); FILE alone when the mark is null.
std::string mark_place(const std::string& path, const YAML::Mark& m) {
  if (m.is_null()) return path;
  return path + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
}

std::string hex_byte(unsigned char c) {
  const char* digits = "0123456789ABCDEF";
  return std::string("0x") + digits[c >> 4] + digits[c & 15];
}

// yaml-cpp 0.7 reads the escapes \N and \_ of a double-quoted scalar as the single bytes 0x85 and 0xA0, not as
// U+0085 and U+00A0 in UTF-8; its emitter then writes such a byte as U+FFFD, so a name would not read back as
// written. Offset of the first of them in the double-quoted scalar opening at `open`, or npos.
size_t byte_escape(std::string_view text, size_t open) {
  if (open >= text.size() || text[open] != '"') return std::string_view::npos;
  for (size_t i = open + 1; i + 1 < text.size() && text[i] != '"'; ++i) {
    if (text[i] != '\\') continue;
    if (text[i + 1] == 'N' || text[i + 1] == '_') return i;
    ++i;  // the escaped character, which may be a quote
  }
  return std::string_view::npos;
}

// From the parser's events, each node once where it is written (walking the loaded nodes would follow aliases):
// the mark of the first scalar that is not UTF-8, and the first key a map is given twice (yaml-cpp keeps both and
// finds the first, so a repeated key's later value would be dropped without a word).
class DocumentChecks : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> non_utf8;
  struct Repeat {
    YAML::Mark at, first;
    std::string key;
  };
  std::optional<Repeat> repeat;

  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string& value) override {
    node(m, &value);
    if (!non_utf8 && first_invalid_utf8(value.data(), value.size()) < value.size()) non_utf8 = m;
  }
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { node(m, nullptr); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { node(m, nullptr); }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(m, nullptr);
    open(false);
  }
  void OnSequenceEnd() override { open_.pop_back(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    node(m, nullptr);
    open(true);
  }
  void OnMapEnd() override { open_.pop_back(); }

 private:
  struct Collection {
    bool map = false;
    bool key_next = true;  // a map's next node is a key (else its value)
    std::map<std::string, YAML::Mark> keys;
  };
  void open(bool map) {
    open_.emplace_back();
    open_.back().map = map;
  }
  // A node starts inside the innermost open collection: in a map, keys and values take turns.
  void node(const YAML::Mark& m, const std::string* scalar) {
    if (open_.empty() || !open_.back().map) return;
    Collection& c = open_.back();
    if (c.key_next && scalar && !repeat) {
      const auto [it, fresh] = c.keys.emplace(*scalar, m);
      if (!fresh) repeat = Repeat{m, it->second, *scalar};
    }
    c.key_next = !c.key_next;
  }
  std::vector<Collection> open_;
};

// Parses `text`, which must be UTF-8 and must stay UTF-8 once read: yaml-cpp keeps a byte that is not UTF-8 as it
// is and its emitter writes it as U+FFFD, so a file with one would not read back as written (fuzz_cluster found
// both). Every problem is UserError("FILE:LINE:COL: ...").
YAML::Node load_utf8(const std::string& path, const std::string& text) {
  std::string_view body = text;  // yaml-cpp's marks start after a byte-order mark
  if (body.substr(0, 3) == "\xEF\xBB\xBF") body.remove_prefix(3);
  if (const size_t nul = body.find('\0'); nul != std::string_view::npos)  // yaml-cpp reads it as a bad escape
    throw UserError(place(path, body, nul) + ": the byte 0x00 (NUL) has no place in a YAML file");
  if (const size_t bad = first_invalid_utf8(body.data(), body.size()); bad < body.size())
    throw UserError(place(path, body, bad) + ": the byte " + hex_byte(static_cast<unsigned char>(body[bad])) +
                    " is not UTF-8 (YAML files are read as UTF-8)");
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentChecks check;
    parser.HandleNextDocument(check);  // the document YAML::Load reads
    if (check.non_utf8) {
      const size_t escape = byte_escape(body, static_cast<size_t>(check.non_utf8->pos));
      if (escape == std::string_view::npos)
        throw UserError(place(path, body, static_cast<size_t>(check.non_utf8->pos)) + ": a string that is not UTF-8");
      const bool nel = body[escape + 1] == 'N';
      throw UserError(place(path, body, escape) + ": the escape \\" + body[escape + 1] + " is read as the byte " +
                      (nel ? "0x85" : "0xA0") + ", which is not UTF-8; write " + (nel ? "\\u0085" : "\\u00A0") +
                      " instead");
    }
    if (check.repeat)
      throw UserError(place(path, body, static_cast<size_t>(check.repeat->at.pos)) + ": " + check.repeat->key +
                      ": given twice in one map (first at line " + std::to_string(check.repeat->first.line + 1) + ")");
    return YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {  // its message is yaml-cpp's "bad file"
    throw UserError(mark_place(path, e.mark) + ": nested " + std::to_string(e.depth()) +
                    " levels deep, more than the YAML reader takes");
  } catch (const YAML::Exception& e) {
    throw UserError(mark_place(path, e.mark) + ": " + e.msg);
  }
}

}  // namespace

YamlFile::YamlFile(std::string path) : path_(std::move(path)) { root_ = load_utf8(path_, read_text_file(path_)); }

YamlFile::YamlFile(std::string name, const std::string& text) : path_(std::move(name)) {
  root_ = load_utf8(path_, text);
}

std::string YamlFile::where(const YAML::Node& n) const { return mark_place(path_, n.Mark()); }

void YamlFile::fail(const YAML::Node& n, const std::string& what) const { throw UserError(where(n) + ": " + what); }

void YamlFile::expect_map(const YAML::Node& n, const std::string& what,
                          std::initializer_list<const char*> known) const {
  if (!n.IsMap()) fail(n, what + ": expected a map with keys " + quoted_list(known));
  for (const auto& kv : n) {
    const std::string key = kv.first.Scalar();
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; }))
      fail(kv.first, what + ": unknown key '" + key + "' (expected one of " + quoted_list(known) + ")");
  }
}

std::string YamlFile::string(const YAML::Node& n, const std::string& key) const {
  if (!n.IsScalar()) fail(n, key + ": expected a string");
  return n.Scalar();
}

std::string YamlFile::device(const YAML::Node& n, const std::string& key) const {
  const std::string d = string(n, key);
  if (!is_device_name(d, true)) fail(n, key + ": expected cpu, cuda, cuda:N or meta, not " + d);
  return d;
}

int64_t YamlFile::integer(const YAML::Node& n, const std::string& key, int64_t min, int64_t max) const {
  int64_t v = 0;
  if (!n.IsScalar() || !parse_int(n.Scalar(), v)) fail(n, key + ": expected an integer");
  if (v < min || v > max)
    fail(n, key + ": expected an integer from " + std::to_string(min) + " to " + std::to_string(max) + ", not " +
                n.Scalar());
  return v;
}

double YamlFile::number(const YAML::Node& n, const std::string& key, double min, double max) const {
  if (!n.IsScalar()) fail(n, key + ": expected a number");
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(n.Scalar().c_str(), &end);
  if (n.Scalar().empty() || *end != '\0' || errno != 0 || !std::isfinite(v)) fail(n, key + ": expected a number");
  if (v < min || v > max)
    fail(n, key + ": expected a number from " + std::to_string(min) + " to " + std::to_string(max) + ", not " +
                n.Scalar());
  return v;
}

bool YamlFile::boolean(const YAML::Node& n, const std::string& key) const {
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) fail(n, key + ": expected true or false");
  return v;
}

std::string YamlFile::choice(const YAML::Node& n, const std::string& key,
                             std::initializer_list<const char*> choices) const {
  const std::string v = n.IsScalar() ? n.Scalar() : std::string();
  if (!n.IsScalar() || std::none_of(choices.begin(), choices.end(), [&](const char* c) { return v == c; }))
    fail(n, key + ": expected one of " + quoted_list(choices));
  return v;
}

std::vector<std::string> YamlFile::strings(const YAML::Node& n, const std::string& key) const {
  std::vector<std::string> out;
  if (n.IsScalar()) return {n.Scalar()};
  if (!n.IsSequence()) fail(n, key + ": expected a string or a list of strings");
  for (const auto& e : n) out.push_back(string(e, key));
  return out;
}

std::string YamlFile::path(const YAML::Node& n, const std::string& key) const {
  const std::string raw = string(n, key);
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw.compare(i, 2, "${") != 0) {
      out += raw[i];
      continue;
    }
    const size_t close = raw.find('}', i);
    if (close == std::string::npos) fail(n, key + ": unclosed ${ in " + raw);
    std::string name = raw.substr(i + 2, close - i - 2), fallback;
    const size_t dash = name.find(":-");
    const bool has_default = dash != std::string::npos;
    if (has_default) {
      fallback = name.substr(dash + 2);
      name.resize(dash);
    }
    const char* v = std::getenv(name.c_str());
    if (v && *v)
      out += v;
    else if (has_default)
      out += fallback;
    else
      fail(n,
           key + ": the environment variable " + name + " is not set (write ${" + name + ":-DEFAULT} for a default)");
    i = close;
  }
  if (out.empty()) fail(n, key + ": expected a path, not an empty string");
  std::filesystem::path p(out);
  if (p.is_relative()) p = (std::filesystem::path(path_).parent_path() / p).lexically_normal();
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) fail(n, key + ": no such file or folder: " + p.string());
  return p.string();
}

std::vector<int64_t> YamlFile::int_ranges(const YAML::Node& n, const std::string& key, int64_t min, int64_t max) const {
  std::vector<int64_t> out;
  auto one = [&](const YAML::Node& e) {
    if (!e.IsScalar()) fail(e, key + ": expected an integer or a range such as 2-5");
    const std::string s = e.Scalar();
    const size_t dash = s.find('-', 1);
    int64_t a = 0, b = 0;
    if (dash == std::string::npos) {
      if (!parse_int(s, a)) fail(e, key + ": expected an integer or a range such as 2-5");
      b = a;
    } else if (!parse_int(s.substr(0, dash), a) || !parse_int(s.substr(dash + 1), b) || b < a) {
      fail(e, key + ": expected a range FIRST-LAST with FIRST <= LAST, not " + s);
    }
    if (a < min || b > max)
      fail(e, key + ": expected values from " + std::to_string(min) + " to " + std::to_string(max) + ", not " + s);
    if (b - a > (int64_t{1} << 24)) fail(e, key + ": range " + s + " is too long");
    for (int64_t v = a; v <= b; ++v) out.push_back(v);
  };
  if (n.IsSequence()) {
    if (n.size() == 0) fail(n, key + ": expected at least one value");
    for (const auto& e : n) one(e);
  } else {
    one(n);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string flow_text(const YAML::Node& n) {
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

}  // namespace reprise::gen
