// One descriptor per collective: buffer sizes and the nccl-tests bus-bandwidth factor. Adding a collective
// touches this table and the backends' switch.
#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "reprise/comms/communicator.h"

namespace reprise::comms {
namespace {

size_t same(size_t c, int) { return c; }
size_t times_n(size_t c, int n) { return c * static_cast<size_t>(n); }
size_t zero(size_t, int) { return 0; }
double ring2(int n) { return n > 1 ? 2.0 * (n - 1) / n : 0.0; }
double ring1(int n) { return n > 1 ? double(n - 1) / n : 0.0; }
double one(int) { return 1.0; }
double none(int) { return 0.0; }

const Descriptor kTable[] = {
    {Kind::AllReduce, "all_reduce", same, same, ring2, true, false},
    {Kind::AllGather, "all_gather", same, times_n, ring1, false, false},
    {Kind::ReduceScatter, "reduce_scatter", times_n, same, ring1, true, false},
    {Kind::AllToAll, "all_to_all", times_n, times_n, ring1, false, false},
    {Kind::AllToAllV, "all_to_allv", same, same, ring1, false, false},  // counts come from the splits
    {Kind::Broadcast, "broadcast", same, same, one, false, true},
    {Kind::Reduce, "reduce", same, same, one, true, true},
    {Kind::Gather, "gather", same, times_n, ring1, false, true},
    {Kind::Scatter, "scatter", times_n, same, ring1, false, true},
    {Kind::Send, "send", same, zero, one, false, false},
    {Kind::Recv, "recv", zero, same, one, false, false},
    {Kind::Barrier, "barrier", zero, zero, none, false, false},
};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

const Descriptor& describe(Kind k) { return kTable[static_cast<int>(k)]; }

const std::vector<Kind>& all_kinds() {
  static const std::vector<Kind> v = [] {
    std::vector<Kind> k;
    for (const Descriptor& d : kTable) k.push_back(d.kind);
    return k;
  }();
  return v;
}

bool parse_kind(std::string_view name, Kind& out) {
  static const std::unordered_map<std::string, Kind> names = {
      {"all_reduce", Kind::AllReduce},
      {"allreduce", Kind::AllReduce},
      {"all_gather", Kind::AllGather},
      {"allgather", Kind::AllGather},
      {"reduce_scatter", Kind::ReduceScatter},
      {"reducescatter", Kind::ReduceScatter},
      {"all_to_all", Kind::AllToAll},
      {"alltoall", Kind::AllToAll},
      {"all_to_allv", Kind::AllToAllV},
      {"alltoallv", Kind::AllToAllV},
      {"broadcast", Kind::Broadcast},
      {"bcast", Kind::Broadcast},
      {"reduce", Kind::Reduce},
      {"gather", Kind::Gather},
      {"scatter", Kind::Scatter},
      {"send", Kind::Send},
      {"recv", Kind::Recv},
      {"barrier", Kind::Barrier},
  };
  auto it = names.find(lower(name));
  if (it == names.end()) return false;
  out = it->second;
  return true;
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::F16:
    case DType::BF16:
      return 2;
    case DType::I8:
    case DType::U8:
    case DType::Bool:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "float";
    case DType::F64:
      return "double";
    case DType::F16:
      return "half";
    case DType::BF16:
      return "bfloat16";
    case DType::I8:
      return "int8";
    case DType::U8:
      return "uint8";
    case DType::I32:
      return "int32";
    case DType::I64:
      return "int64";
    case DType::Bool:
      return "bool";
  }
  return "?";
}

bool parse_dtype(std::string_view name, DType& out) {
  static const std::unordered_map<std::string, DType> names = {
      {"float", DType::F32},         {"float32", DType::F32},   {"f32", DType::F32},
      {"double", DType::F64},        {"float64", DType::F64},   {"f64", DType::F64},
      {"half", DType::F16},          {"float16", DType::F16},   {"c10::half", DType::F16},
      {"f16", DType::F16},           {"bfloat16", DType::BF16}, {"c10::bfloat16", DType::BF16},
      {"bf16", DType::BF16},         {"char", DType::I8},       {"int8", DType::I8},
      {"signed char", DType::I8},    {"byte", DType::U8},       {"uint8", DType::U8},
      {"unsigned char", DType::U8},  {"int", DType::I32},       {"int32", DType::I32},
      {"long", DType::I64},          {"int64", DType::I64},     {"long int", DType::I64},
      {"long long int", DType::I64}, {"bool", DType::Bool},
  };
  auto it = names.find(lower(name));
  if (it == names.end()) return false;
  out = it->second;
  return true;
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Prod:
      return "prod";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Avg:
      return "avg";
  }
  return "?";
}

bool parse_reduce_op(std::string_view name, ReduceOp& out) {
  std::string n = lower(name);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg})
    if (n == reduce_op_name(op)) {
      out = op;
      return true;
    }
  return false;
}

}  // namespace reprise::comms
