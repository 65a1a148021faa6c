#include "test_util.h"

#include <execinfo.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>

#include "reprise/common/files.h"
#include "reprise/trace/read.h"

namespace reprise::test {

std::string shared_traces() {
  if (const char* env = std::getenv("REPRISE_SHARED_TRACES")) return std::filesystem::exists(env) ? env : "";
  std::string p = std::string(REPRISE_SOURCE_DIR) + "/../shared/traces";
  return std::filesystem::exists(p) ? p : "";
}

namespace {

std::string value_text(const Trace& t, const Value& v) {
  switch (v.kind) {
    case ValueKind::None:
      return "None";
    case ValueKind::Int:
      return std::to_string(v.i);
    case ValueKind::Double:
      return v.d != v.d ? "nan" : std::to_string(v.d);
    case ValueKind::Bool:
      return v.i ? "true" : "false";
    case ValueKind::String:
      return "'" + std::string(t.str(v.ref)) + "'";
    case ValueKind::Device:
      return "dev:" + std::string(t.str(v.ref));
    case ValueKind::Tensor: {
      const Tensor& x = t.tensors[v.ref];
      std::string s = "T(" + std::to_string(x.id) + "," + std::to_string(x.storage_id) + "," +
                      std::to_string(x.offset) + "," + std::to_string(x.numel) + "," + std::to_string(x.itemsize) +
                      "," + (x.has_device ? std::string(t.str(x.device)) : "-") + "," + std::string(t.str(x.dtype)) +
                      ",[";
      for (int64_t d : t.dims(x)) s += std::to_string(d) + ",";
      s += "],[";
      for (int64_t d : t.strides(x)) s += std::to_string(d) + ",";
      return s + "])";
    }
    case ValueKind::List:
    case ValueKind::Tuple: {
      std::string s = v.kind == ValueKind::List ? "[" : "(";
      for (const Value& e : t.items(v)) s += value_text(t, e) + ",";
      return s + (v.kind == ValueKind::List ? "]" : ")");
    }
  }
  return "?";
}

}  // namespace

std::string model_difference(const Trace& a, const Trace& b) {
  if (a.nodes.size() != b.nodes.size())
    return "node count " + std::to_string(a.nodes.size()) + " vs " + std::to_string(b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node &x = a.nodes[i], &y = b.nodes[i];
    std::string at = "node " + std::to_string(x.id) + ": ";
    if (x.id != y.id) return at + "id differs";
    if (x.parent != y.parent) return at + "parent differs";
    if (a.name(x) != b.name(y)) return at + "name differs";
    if (x.kind != y.kind) return at + "kind differs";
    if (x.fields != y.fields) return at + "recorded attributes differ";
    if (x.rf_id != y.rf_id || x.fw_parent != y.fw_parent || x.seq_id != y.seq_id || x.scope != y.scope ||
        x.tid != y.tid || x.fw_tid != y.fw_tid)
      return at + "attribute values differ";
    if (a.str(x.op_schema) != b.str(y.op_schema) || a.str(x.kernel_backend) != b.str(y.kernel_backend) ||
        a.str(x.kernel_file) != b.str(y.kernel_file) || a.str(x.tensor_range) != b.str(y.tensor_range))
      return at + "string attributes differ";
    if (x.num_inputs != y.num_inputs || x.num_outputs != y.num_outputs) return at + "argument counts differ";
    for (int side = 0; side < 2; ++side) {
      auto va = side ? a.outputs(x) : a.inputs(x);
      auto vb = side ? b.outputs(y) : b.inputs(y);
      auto ta = side ? a.output_types(x) : a.input_types(x);
      auto tb = side ? b.output_types(y) : b.input_types(y);
      for (size_t k = 0; k < va.size(); ++k) {
        if (a.str(ta[k]) != b.str(tb[k])) return at + "type of arg " + std::to_string(k) + " differs";
        std::string sa = value_text(a, va[k]), sb = value_text(b, vb[k]);
        if (sa != sb) return at + "arg " + std::to_string(k) + ": " + sa + " vs " + sb;
      }
    }
    if (x.num_attrs != y.num_attrs) return at + "extra attr count differs";
    for (size_t k = 0; k < x.num_attrs; ++k) {
      const Attr &p = a.node_attrs(x)[k], &q = b.node_attrs(y)[k];
      if (a.str(p.name) != b.str(q.name)) return at + "attr name differs";
      if (value_text(a, a.values[p.value]) != value_text(b, b.values[q.value]))
        return at + "attr " + std::string(a.str(p.name)) + " differs";
    }
  }
  if (a.collectives.size() != b.collectives.size()) return "collective count differs";
  if (a.process_groups.size() != b.process_groups.size()) return "process group count differs";
  if (a.iterations.size() != b.iterations.size()) return "iteration count differs";
  return "";
}

std::string temp_dir() {
  // Never freed: the exit handler that removes the folder runs after static destructors may have.
  static const std::string* dir = [] {
    char tmpl[] = "/tmp/reprise-test-XXXXXX";
    auto* d = new std::string(mkdtemp(tmpl));
    std::atexit([] {
      if (!std::getenv("REPRISE_KEEP_TEST_FILES")) remove_tree(*dir);
    });
    return d;
  }();
  return *dir;
}

std::string test_dir() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string dir = temp_dir() + "/" + t->test_suite_name() + "." + t->name();
  std::filesystem::create_directories(dir);
  return dir;
}

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  return path;
}

std::string et_read_error(const std::string& text, const std::string& name) {
  return user_error([&] { read_et_text(text, name); });
}

}  // namespace reprise::test

namespace {

// A crash in a test binary prints its stack (to stderr) before the process dies, so CI logs say where.
[[maybe_unused]] void print_stack_and_die(int sig) {
  void* frames[64];
  int n = backtrace(frames, 64);
  const char msg[] = "\n*** test binary crashed; stack:\n";
  (void)!write(2, msg, sizeof msg - 1);
  backtrace_symbols_fd(frames, n, 2);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REPRISE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define REPRISE_ASAN 1
#endif

[[maybe_unused]] const bool kStackOnCrash = [] {
#ifndef REPRISE_ASAN  // the sanitizers report crashes better themselves
  std::signal(SIGSEGV, print_stack_and_die);
  std::signal(SIGABRT, print_stack_and_die);
#endif
  return true;
}();

}  // namespace
