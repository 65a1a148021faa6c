// Chakra files: one GlobalMetadata message, then one Node message per node, each preceded by its length as a varint
// (the framing Chakra's protolib and ASTRA-sim's feeder use).
#include "input_file.h"
#include "reprise/common/error.h"
#include "reprise/predict/chakra.h"
#include "reprise/trace/write.h"

#ifdef REPRISE_HAVE_PROTOBUF
#include <google/protobuf/stubs/common.h>

#include "et_def.pb.h"
#if GOOGLE_PROTOBUF_VERSION < 4022000  // later versions log through Abseil
#include <google/protobuf/stubs/logging.h>
#define REPRISE_PROTOBUF_LOG_HANDLER 1
#endif
#endif

namespace reprise::predict {
namespace {

[[maybe_unused]] constexpr const char* kNoProtobuf =
    ": Reprise was built without protobuf (install libprotobuf-dev and protobuf-compiler, then configure again)";

}  // namespace

#ifdef REPRISE_HAVE_PROTOBUF
namespace {

namespace pb = ::reprise::chakra;

// Protobuf writes why a parse failed (a string field that is not UTF-8) to stderr, beside the one-line error:
// while decoding, its messages are kept instead, and the last one ends the error (`why`).
class ParseLog {
 public:
#ifdef REPRISE_PROTOBUF_LOG_HANDLER
  ParseLog() : prev_(google::protobuf::SetLogHandler(&ParseLog::keep)) { last().clear(); }
  ~ParseLog() { google::protobuf::SetLogHandler(prev_); }
#endif
  ParseLog(const ParseLog&) = delete;
  ParseLog& operator=(const ParseLog&) = delete;
  static std::string why() {
    std::string m = last();
    const size_t cut = m.find(" when parsing");
    if (cut != std::string::npos) m.resize(cut);
    return m.empty() ? "" : " (" + m + ")";
  }

 private:
  static std::string& last() {
    static thread_local std::string m;
    return m;
  }
#ifdef REPRISE_PROTOBUF_LOG_HANDLER
  static void keep(google::protobuf::LogLevel, const char*, int, const std::string& message) { last() = message; }
  google::protobuf::LogHandler* prev_;
#endif
};

void put_attr(pb::AttributeProto* a, const std::string& name, const ChakraValue& v) {
  a->set_name(name);
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int32_t>)
          a->set_int32_val(x);
        else if constexpr (std::is_same_v<T, int64_t>)
          a->set_int64_val(x);
        else if constexpr (std::is_same_v<T, uint64_t>)
          a->set_uint64_val(x);
        else if constexpr (std::is_same_v<T, double>)
          a->set_double_val(x);
        else if constexpr (std::is_same_v<T, bool>)
          a->set_bool_val(x);
        else
          a->set_string_val(x);
      },
      v);
}

// The scalar alternatives; lists and the rarer integer encodings are read into the nearest one, bytes as text.
bool get_attr(const pb::AttributeProto& a, ChakraValue& out) {
  using V = pb::AttributeProto;
  switch (a.value_case()) {
    case V::kInt32Val:
      out = a.int32_val();
      return true;
    case V::kSint32Val:
      out = a.sint32_val();
      return true;
    case V::kSfixed32Val:
      out = a.sfixed32_val();
      return true;
    case V::kInt64Val:
      out = a.int64_val();
      return true;
    case V::kSint64Val:
      out = a.sint64_val();
      return true;
    case V::kSfixed64Val:
      out = a.sfixed64_val();
      return true;
    case V::kUint32Val:
      out = static_cast<uint64_t>(a.uint32_val());
      return true;
    case V::kFixed32Val:
      out = static_cast<uint64_t>(a.fixed32_val());
      return true;
    case V::kUint64Val:
      out = a.uint64_val();
      return true;
    case V::kFixed64Val:
      out = a.fixed64_val();
      return true;
    case V::kDoubleVal:
      out = a.double_val();
      return true;
    case V::kFloatVal:
      out = static_cast<double>(a.float_val());
      return true;
    case V::kBoolVal:
      out = a.bool_val();
      return true;
    case V::kStringVal:
      out = a.string_val();
      return true;
    case V::kBytesVal:
      out = a.bytes_val();
      return true;
    default:
      return false;
  }
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(0x80 | (v & 0x7f)));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_message(std::string& out, const google::protobuf::MessageLite& m) {
  const std::string bytes = m.SerializeAsString();
  put_varint(out, bytes.size());
  out += bytes;
}

// The length prefix at `pos`; false at the end of the data. Throws for a prefix cut short or past the end.
bool get_length(std::string_view data, size_t& pos, size_t& len, const std::string& path) {
  if (pos >= data.size()) return false;
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= data.size()) throw UserError(path + ": truncated length prefix at byte " + std::to_string(pos));
    const auto b = static_cast<uint8_t>(data[pos++]);
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      if (v > data.size() - pos)
        throw UserError(path + ": message of " + std::to_string(v) + " bytes runs past the end of the file");
      len = static_cast<size_t>(v);
      return true;
    }
  }
  throw UserError(path + ": bad length prefix at byte " + std::to_string(pos));
}

}  // namespace

bool chakra_available() { return true; }

std::string encode_chakra(const ChakraTrace& g) {
  std::string out;
  pb::GlobalMetadata meta;
  meta.set_version(g.version);
  for (const auto& [name, v] : g.metadata) put_attr(meta.add_attr(), name, v);
  put_message(out, meta);
  pb::Node node;
  for (const ChakraNode& n : g.nodes) {
    node.Clear();
    node.set_id(n.id);
    node.set_name(n.name);
    node.set_type(static_cast<pb::NodeType>(n.type));
    for (uint64_t d : n.data_deps) node.add_data_deps(d);
    for (uint64_t d : n.ctrl_deps) node.add_ctrl_deps(d);
    node.set_duration_micros(n.duration_micros);
    for (const auto& [name, v] : n.attrs) put_attr(node.add_attr(), name, v);
    put_message(out, node);
  }
  return out;
}

ChakraTrace decode_chakra(std::string_view data, const std::string& source) {
  ChakraTrace g;
  size_t pos = 0, len = 0;
  if (!get_length(data, pos, len, source)) throw UserError(source + ": empty, not a Chakra trace");
  const ParseLog log;
  pb::GlobalMetadata meta;
  if (!meta.ParseFromArray(data.data() + pos, static_cast<int>(len)))
    throw UserError(source + ": no Chakra GlobalMetadata at the start" + ParseLog::why());
  pos += len;
  g.version = meta.version();
  ChakraValue v;
  for (const pb::AttributeProto& a : meta.attr())
    if (get_attr(a, v)) g.metadata[a.name()] = v;
  pb::Node node;
  while (get_length(data, pos, len, source)) {
    if (!node.ParseFromArray(data.data() + pos, static_cast<int>(len)))
      throw UserError(source + ": byte " + std::to_string(pos) + ": not a Chakra Node message" + ParseLog::why());
    pos += len;
    ChakraNode n;
    n.id = node.id();
    n.name = node.name();
    n.type = static_cast<ChakraNodeType>(node.type());
    n.data_deps.assign(node.data_deps().begin(), node.data_deps().end());
    n.ctrl_deps.assign(node.ctrl_deps().begin(), node.ctrl_deps().end());
    n.duration_micros = node.duration_micros();
    for (const pb::AttributeProto& a : node.attr())
      if (get_attr(a, v)) n.attrs[a.name()] = v;
    g.nodes.push_back(std::move(n));
  }
  return g;
}

#else

bool chakra_available() { return false; }

std::string encode_chakra(const ChakraTrace&) {
  throw UserError(std::string("cannot write a Chakra trace") + kNoProtobuf);
}

ChakraTrace decode_chakra(std::string_view, const std::string& source) {
  throw UserError(source + ": cannot read a Chakra trace" + kNoProtobuf);
}

#endif

void write_chakra_file(const ChakraTrace& g, const std::string& path) {
  std::string out;
  try {
    out = encode_chakra(g);
  } catch (const UserError& e) {
    throw UserError(path + ": " + e.what());
  }
  write_text_file(path, out);  // whole or not at all, as every file Reprise writes
}

ChakraTrace read_chakra(const std::string& path) {
  if (!chakra_available()) return decode_chakra({}, path);
  return decode_chakra(detail::read_input(path), path);
}

ChakraFile write_chakra(const Trace& t, int64_t rank, const std::string& path, const ChakraOptions& o) {
  const ChakraTrace g = build_chakra(t, rank, o);
  write_chakra_file(g, path);
  ChakraFile f = count_chakra(g);
  f.path = path;
  f.rank = rank;
  return f;
}

}  // namespace reprise::predict
