#include "reprise/comms/sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <sstream>

#include "reprise/common/clock.h"

namespace reprise::comms {
namespace {

// Small integers: exact in every dtype (half and bfloat16 included) once summed over a few hundred ranks.
double pattern(int rank, size_t i) { return double((static_cast<size_t>(rank) * 3 + i) % 5 + 1); }

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

double reduce(ReduceOp op, DType t, int n, const std::function<double(int)>& v) {
  double acc = v(0);
  for (int r = 1; r < n; ++r) {
    double x = v(r);
    switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Avg:
        acc += x;
        break;
      case ReduceOp::Prod:
        acc *= x;
        break;
      case ReduceOp::Max:
        acc = std::max(acc, x);
        break;
      case ReduceOp::Min:
        acc = std::min(acc, x);
        break;
    }
  }
  if (op == ReduceOp::Avg) acc /= n;
  if (t == DType::Bool) acc = acc != 0;
  return acc;
}

// Per-rank element count of Args for a message of `elems` elements (nccl-tests' size convention).
size_t per_rank_count(Kind k, size_t elems, int n) {
  switch (k) {
    case Kind::AllGather:
    case Kind::ReduceScatter:
    case Kind::AllToAll:
    case Kind::AllToAllV:
    case Kind::Gather:
    case Kind::Scatter:
      return elems / static_cast<size_t>(n);
    default:
      return elems;
  }
}

}  // namespace

std::vector<SweepRow> sweep(Communicator& c, const SweepOptions& o,
                            const std::function<void(const SweepRow&)>& on_row) {
  const int n = c.size(), me = c.rank();
  const size_t es = dtype_size(o.dtype);
  const Descriptor& d = describe(o.kind);
  if (o.factor <= 1) throw CommError("the step factor must be greater than 1");
  if (o.min_bytes > o.max_bytes) throw CommError("the smallest size is larger than the largest");
  if (d.rooted && (o.root < 0 || o.root >= n)) throw CommError("root " + std::to_string(o.root) + " is not a rank");
  if (d.reduces && o.dtype == DType::Bool && o.op == ReduceOp::Avg) throw CommError("avg of bool is not defined");
  std::vector<SweepRow> rows;
  for (double b = double(std::max<size_t>(o.min_bytes, es)); b <= double(o.max_bytes) * 1.0000001; b *= o.factor) {
    size_t elems = static_cast<size_t>(b) / es;
    size_t cnt = per_rank_count(o.kind, elems, n);
    if (cnt == 0 && o.kind != Kind::Barrier) continue;
    size_t in_n = d.in_elems(cnt, n), out_n = d.out_elems(cnt, n);
    if (o.kind == Kind::AllToAllV) in_n = out_n = cnt * static_cast<size_t>(n);
    if (o.kind == Kind::Send || o.kind == Kind::Recv) in_n = out_n = cnt;  // a ring: everyone sends and receives
    auto in = allocate(c, std::max<size_t>(in_n, 1) * es, o.device);
    auto out = allocate(c, std::max<size_t>(out_n, 1) * es, o.device);
    std::vector<char> host(std::max(in_n, out_n) * es + es);
    for (size_t i = 0; i < in_n; ++i) put(o.dtype, host.data(), i, pattern(me, i));
    copy_in(*in, host.data(), in_n * es);

    Args a;
    a.kind = o.kind;
    a.dtype = o.dtype;
    a.op = o.op;
    a.in = in->ptr;
    a.out = out->ptr;
    a.count = cnt;
    a.root = o.root;
    if (o.kind == Kind::AllToAllV)
      for (int p = 0; p < n; ++p) {
        a.in_counts.push_back(cnt);
        a.out_counts.push_back(cnt);
        a.in_displs.push_back(cnt * static_cast<size_t>(p));
        a.out_displs.push_back(cnt * static_cast<size_t>(p));
      }
    auto run_once = [&]() {
      if (o.kind == Kind::Send || o.kind == Kind::Recv) {
        Args recv = a, send = a;
        recv.kind = Kind::Recv;
        recv.peer = (me + n - 1) % n;
        send.kind = Kind::Send;
        send.peer = (me + 1) % n;
        auto r1 = c.start(recv);
        auto r2 = c.start(send);
        r2->wait();
        r1->wait();
      } else {
        c.start(a)->wait();
      }
    };

    SweepRow row;
    row.count = std::max(in_n, out_n);
    row.bytes = row.count * es;
    row.wrong = -1;
    if (o.check) {
      run_once();
      device_synchronize(c, o.device);
      copy_out(*out, host.data(), out_n * es);
      int64_t wrong = 0;
      for (size_t i = 0; i < out_n; ++i) {
        double want = 0;
        bool checked = true;
        switch (o.kind) {
          case Kind::AllReduce:
            want = reduce(o.op, o.dtype, n, [&](int r) { return pattern(r, i); });
            break;
          case Kind::AllGather:
            want = pattern(int(i / cnt), i % cnt);
            break;
          case Kind::ReduceScatter:
            want = reduce(o.op, o.dtype, n, [&](int r) { return pattern(r, size_t(me) * cnt + i); });
            break;
          case Kind::AllToAll:
          case Kind::AllToAllV:
            want = pattern(int(i / cnt), size_t(me) * cnt + i % cnt);
            break;
          case Kind::Broadcast:
            want = pattern(o.root, i);
            break;
          case Kind::Reduce:
            checked = me == o.root;
            want = reduce(o.op, o.dtype, n, [&](int r) { return pattern(r, i); });
            break;
          case Kind::Gather:
            checked = me == o.root;
            want = pattern(int(i / cnt), i % cnt);
            break;
          case Kind::Scatter:
            want = pattern(o.root, size_t(me) * cnt + i);
            break;
          case Kind::Send:
          case Kind::Recv:
            want = pattern((me + n - 1) % n, i);
            break;
          case Kind::Barrier:
            checked = false;
            break;
        }
        if (o.dtype == DType::Bool) want = want != 0;
        if (checked && get(o.dtype, host.data(), i) != want) ++wrong;
      }
      row.wrong = wrong;
    }
    for (int w = 0; w < o.warmup; ++w) run_once();
    device_synchronize(c, o.device);
    c.exchange("");  // line up the ranks before timing
    double t0 = now_seconds();
    for (int it = 0; it < o.iters; ++it) run_once();
    device_synchronize(c, o.device);
    double mine = (now_seconds() - t0) / std::max(o.iters, 1);

    // The slowest rank's time, and every rank's wrong count.
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
    row.busbw = row.algbw * d.busbw_factor(n);
    rows.push_back(row);
    if (on_row) on_row(row);
  }
  return rows;
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
