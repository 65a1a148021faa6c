#include "reprise/comms/sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>
#include <tuple>
#include <utility>

#include "reprise/common/clock.h"

namespace reprise::comms {
namespace {

uint16_t to_half(float x) {
  // Exact for the small integers used here.
  if (x == 0) return 0;
  int e;
  float m = std::frexp(x, &e);  // x = m * 2^e, m in [0.5, 1)
  uint32_t mant = static_cast<uint32_t>((m * 2 - 1) * 1024 + 0.5f);
  return static_cast<uint16_t>(((e - 1 + 15) << 10) | (mant & 0x3ff));
}
float from_half(uint16_t h) {
  int e = (h >> 10) & 0x1f;
  if (e == 0) return 0;
  return std::ldexp(1.0f + float(h & 0x3ff) / 1024.0f, e - 15) * ((h & 0x8000) ? -1 : 1);
}

void put(DType t, void* p, size_t i, double v) {
  switch (t) {
    case DType::F32:
      static_cast<float*>(p)[i] = float(v);
      break;
    case DType::F64:
      static_cast<double*>(p)[i] = v;
      break;
    case DType::F16:
      static_cast<uint16_t*>(p)[i] = to_half(float(v));
      break;
    case DType::BF16: {
      float f = float(v);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(b >> 16);
      break;
    }
    case DType::I8:
      static_cast<int8_t*>(p)[i] = int8_t(v);
      break;
    case DType::U8:
      static_cast<uint8_t*>(p)[i] = uint8_t(v);
      break;
    case DType::Bool:
      static_cast<uint8_t*>(p)[i] = v != 0;
      break;
    case DType::I32:
      static_cast<int32_t*>(p)[i] = int32_t(v);
      break;
    case DType::I64:
      static_cast<int64_t*>(p)[i] = int64_t(v);
      break;
  }
}

double get(DType t, const void* p, size_t i) {
  switch (t) {
    case DType::F32:
      return static_cast<const float*>(p)[i];
    case DType::F64:
      return static_cast<const double*>(p)[i];
    case DType::F16:
      return from_half(static_cast<const uint16_t*>(p)[i]);
    case DType::BF16: {
      uint32_t b = uint32_t(static_cast<const uint16_t*>(p)[i]) << 16;
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    case DType::I8:
      return static_cast<const int8_t*>(p)[i];
    case DType::U8:
      return static_cast<const uint8_t*>(p)[i];
    case DType::Bool:
      return static_cast<const uint8_t*>(p)[i] != 0;
    case DType::I32:
      return static_cast<const int32_t*>(p)[i];
    case DType::I64:
      return double(static_cast<const int64_t*>(p)[i]);
  }
  return 0;
}

// One size of the sweep: the buffers, filled with this rank's input, and the call that runs it.
struct Step {
  Args args;
  size_t in_n = 0, out_n = 0;  // buffer elements
  std::unique_ptr<Buffer> in, out;
};

// One rank's buffer elements for `cnt` (Args::count) over n ranks.
std::pair<size_t, size_t> buffer_elems(const Descriptor& d, size_t cnt, int n) {
  if (d.p2p) return {cnt, cnt};  // a ring: everyone sends and receives
  return {d.in_elems(cnt, n), d.out_elems(cnt, n)};
}

Step prepare(Communicator& c, const SweepOptions& o, size_t cnt) {
  const int n = c.size();
  const size_t es = dtype_size(o.dtype);
  const Descriptor& d = describe(o.kind);
  Step s;
  std::tie(s.in_n, s.out_n) = buffer_elems(d, cnt, n);
  s.in = allocate(c, std::max<size_t>(s.in_n, 1) * es, o.device);
  s.out = allocate(c, std::max<size_t>(s.out_n, 1) * es, o.device);
  std::vector<char> host(s.in_n * es + es);
  for (size_t i = 0; i < s.in_n; ++i) put(o.dtype, host.data(), i, sweep_input(c.rank(), i));
  copy_in(*s.in, host.data(), s.in_n * es);
  Args& a = s.args;
  a.kind = o.kind;
  a.dtype = o.dtype;
  a.op = o.op;
  a.in = s.in->ptr;
  a.out = s.out->ptr;
  a.count = cnt;
  a.root = o.root;
  if (d.per_peer_count)
    for (int p = 0; p < n; ++p) {
      a.in_counts.push_back(cnt);
      a.out_counts.push_back(cnt);
      a.in_displs.push_back(cnt * static_cast<size_t>(p));
      a.out_displs.push_back(cnt * static_cast<size_t>(p));
    }
  return s;
}

void run_once(Communicator& c, const Args& a) {
  if (!describe(a.kind).p2p) {
    c.start(a)->wait();
    return;
  }
  const int n = c.size(), me = c.rank();
  Args recv = a, send = a;
  recv.kind = Kind::Recv;
  recv.peer = (me + n - 1) % n;
  send.kind = Kind::Send;
  send.peer = (me + 1) % n;
  auto r1 = c.start(recv);
  auto r2 = c.start(send);
  r2->wait();
  r1->wait();
}

// Runs the step once and counts the output elements that differ from what the descriptor expects.
int64_t count_wrong(Communicator& c, const SweepOptions& o, const Step& s) {
  run_once(c, s.args);
  device_synchronize(c, o.device);
  const size_t es = dtype_size(o.dtype);
  std::vector<char> host(s.out_n * es + es);
  copy_out(*s.out, host.data(), s.out_n * es);
  const Descriptor& d = describe(o.kind);
  SweepCheck check;
  check.rank = c.rank();
  check.nranks = c.size();
  check.root = o.root;
  check.count = s.args.count;
  check.op = o.op;
  check.dtype = o.dtype;
  int64_t wrong = 0;
  for (size_t i = 0; i < s.out_n; ++i) {
    double want = 0;
    bool checked = d.expect(check, i, want);
    if (o.dtype == DType::Bool) want = want != 0;
    if (checked && get(o.dtype, host.data(), i) != want) ++wrong;
  }
  return wrong;
}

// Seconds per operation on this rank, after the warm-up.
double time_step(Communicator& c, const SweepOptions& o, const Step& s) {
  for (int w = 0; w < o.warmup; ++w) run_once(c, s.args);
  device_synchronize(c, o.device);
  c.exchange("");  // line up the ranks before timing
  double t0 = now_seconds();
  for (int it = 0; it < o.iters; ++it) run_once(c, s.args);
  device_synchronize(c, o.device);
  return (now_seconds() - t0) / std::max(o.iters, 1);
}

// The slowest rank's time, and every rank's wrong count (-1 when not checked).
void gather_row(Communicator& c, const SweepOptions& o, double mine, SweepRow& row) {
  std::ostringstream s;
  s.precision(17);
  s << mine << " " << row.wrong;
  double worst = 0;
  int64_t wrong_total = o.check ? 0 : -1;
  for (const std::string& e : c.exchange(s.str())) {
    std::istringstream in_s(e);
    double t;
    int64_t w;
    in_s >> t >> w;
    worst = std::max(worst, t);
    if (o.check) wrong_total += w;
  }
  row.wrong = wrong_total;
  row.time_us = worst * 1e6;
  row.algbw = worst > 0 ? double(row.bytes) / worst / 1e9 : 0;
  row.busbw = row.algbw * describe(o.kind).busbw_factor(c.size());
}

void validate(const Communicator& c, const SweepOptions& o) {
  const Descriptor& d = describe(o.kind);
  if (o.factor <= 1) throw CommError("the step factor must be greater than 1");
  if (o.min_bytes > o.max_bytes) throw CommError("the smallest size is larger than the largest");
  if (d.rooted && (o.root < 0 || o.root >= c.size()))
    throw CommError("root " + std::to_string(o.root) + " is not a rank");
  if (d.reduces && o.dtype == DType::Bool && o.op == ReduceOp::Avg) throw CommError("avg of bool is not defined");
}

}  // namespace

std::vector<SweepRow> sweep(Communicator& c, const SweepOptions& o,
                            const std::function<void(const SweepRow&)>& on_row) {
  validate(c, o);
  const size_t es = dtype_size(o.dtype);
  std::vector<SweepRow> rows;
  for (size_t cnt : sweep_counts(o, c.size())) {
    Step s = prepare(c, o, cnt);
    SweepRow row;
    row.count = std::max(s.in_n, s.out_n);
    row.bytes = row.count * es;
    row.wrong = o.check ? count_wrong(c, o, s) : -1;
    gather_row(c, o, time_step(c, o, s), row);
    rows.push_back(row);
    if (on_row) on_row(row);
  }
  return rows;
}

std::vector<size_t> sweep_counts(const SweepOptions& o, int nranks) {
  const size_t es = dtype_size(o.dtype);
  std::vector<size_t> counts;
  for (double b = double(std::max<size_t>(o.min_bytes, es)); b <= double(o.max_bytes) * 1.0000001; b *= o.factor) {
    size_t cnt = describe(o.kind).sweep_count(static_cast<size_t>(b) / es, nranks);
    if (cnt > 0) counts.push_back(cnt);
  }
  return counts;
}

SweepMemory sweep_memory(const SweepOptions& o, int nranks) {
  const size_t es = dtype_size(o.dtype);
  SweepMemory m;
  for (size_t cnt : sweep_counts(o, nranks)) {
    auto [in, out] = buffer_elems(describe(o.kind), cnt, nranks);
    m.buffers = std::max(m.buffers, (std::max<size_t>(in, 1) + std::max<size_t>(out, 1)) * es);
    m.host_copy = std::max(m.host_copy, (std::max(in, out) + 1) * es);
  }
  return m;
}

void print_header(std::FILE* out, const Communicator& c, const SweepOptions& o) {
  std::fprintf(out, "# reprise comms: %s, %s, %d rank(s), backend %s, %d warm-up + %d timed iterations per size\n",
               describe(o.kind).name, dtype_name(o.dtype), c.size(), c.backend().c_str(), o.warmup, o.iters);
  std::fprintf(out, "#\n# %10s %12s %8s %6s %6s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "root", "time",
               "algbw", "busbw", "#wrong");
  std::fprintf(out, "# %10s %12s %8s %6s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
               "(GB/s)", "");
}

void print_row(std::FILE* out, const SweepOptions& o, const SweepRow& r) {
  const Descriptor& d = describe(o.kind);
  std::string wrong = r.wrong < 0 ? "N/A" : std::to_string(r.wrong);
  std::fprintf(out, "  %10zu %12zu %8s %6s %6d %10.2f %8.3f %8.3f %7s\n", r.bytes, r.count, dtype_name(o.dtype),
               d.reduces ? reduce_op_name(o.op) : "none", d.rooted ? o.root : -1, r.time_us, r.algbw, r.busbw,
               wrong.c_str());
}

std::string sweep_json(const Communicator& c, const SweepOptions& o, const std::vector<SweepRow>& rows) {
  std::ostringstream s;
  s << "{\n  \"op\": \"" << describe(o.kind).name << "\",\n  \"dtype\": \"" << dtype_name(o.dtype)
    << "\",\n  \"redop\": \"" << reduce_op_name(o.op) << "\",\n  \"root\": " << o.root << ",\n  \"backend\": \""
    << c.backend() << "\",\n  \"world_size\": " << c.size()
    << ",\n  \"busbw_factor\": " << describe(o.kind).busbw_factor(c.size()) << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) {
    const SweepRow& r = rows[i];
    s << (i ? "," : "") << "\n    {\"bytes\": " << r.bytes << ", \"count\": " << r.count
      << ", \"time_us\": " << r.time_us << ", \"algbw_gbps\": " << r.algbw << ", \"busbw_gbps\": " << r.busbw
      << ", \"wrong\": " << r.wrong << "}";
  }
  s << "\n  ]\n}\n";
  return s.str();
}

}  // namespace reprise::comms
