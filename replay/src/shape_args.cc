#include "shape_args.h"

namespace reprise::replay::detail {
namespace {

std::string text(const Shape& s) {
  std::string out = "[";
  for (size_t k = 0; k < s.size(); ++k) out += (k ? ", " : "") + std::to_string(s[k]);
  return out + "]";
}

int64_t product(const Shape& s, const std::vector<size_t>& at) {
  int64_t p = 1;
  for (size_t k : at) p *= s[k];
  return p;
}

struct Candidate {
  size_t entry = 0;
  int64_t value = 0;
  bool exact = false;  // the entry equals one `from`; else it is a multiple of the froms it carries
  const gen::DimChange* change = nullptr;
};

// One candidate, or the batch (or world) dimension's leftmost one, or why none.
std::string choose(const std::vector<Candidate>& all, const Shape& sizes, Candidate& out) {
  std::vector<Candidate> c;
  for (const Candidate& x : all)
    if (x.exact) c.push_back(x);
  if (c.empty()) c = all;
  if (c.size() == 1) {
    out = c.front();
    return {};
  }
  // Batch-first layouts put the batch outermost; rank-major ones (what an all_to_all exchanges) the world.
  bool outer = true;
  for (const Candidate& x : c) outer = outer && x.change && (x.change->name == "batch" || x.change->name == "world");
  if (outer) {
    out = c.front();
    return {};
  }
  std::string which;
  for (const Candidate& x : c) which += (which.empty() ? "" : " or ") + std::to_string(x.entry);
  return "sizes " + text(sizes) + ": entry " + which + " could carry the change: ambiguous";
}

// Entries of `group` that can carry old_prod -> new_prod: each scaled by one or more changes it is a multiple of.
std::string solve_group(Shape& sizes, const std::vector<size_t>& group, int64_t old_prod, int64_t new_prod,
                        const std::vector<gen::DimChange>& changes) {
  if (old_prod == new_prod || group.empty()) return {};
  if (group.size() == 1) {
    sizes[group[0]] = new_prod;
    return {};
  }
  std::vector<Candidate> all;
  const size_t subsets = size_t{1} << changes.size();
  for (size_t j : group) {
    const int64_t e = sizes[j];
    if (e <= 0) continue;
    for (size_t m = 1; m < subsets; ++m) {
      int64_t v = e;
      const gen::DimChange* only = nullptr;
      bool ok = true;
      for (size_t k = 0; k < changes.size() && ok; ++k)
        if (m & (size_t{1} << k)) {
          ok = v % changes[k].from == 0;
          v = ok ? v / changes[k].from * changes[k].to : v;
          only = &changes[k];
        }
      if (!ok || old_prod / e * v != new_prod) continue;
      const bool single = (m & (m - 1)) == 0;
      all.push_back({j, v, single && e == only->from, single ? only : nullptr});
    }
  }
  if (all.empty())
    return "sizes " + text(sizes) + ": no entry can carry the change of " + std::to_string(old_prod) + " elements to " +
           std::to_string(new_prod);
  Candidate c;
  std::string why = choose(all, sizes, c);
  if (why.empty()) sizes[c.entry] = c.value;
  return why;
}

}  // namespace

ArgSolution solve_view(const Shape& in_old, const Shape& in_new, const Shape& sizes,
                       const std::vector<gen::DimChange>& changes) {
  ArgSolution r;
  r.values = sizes;
  int64_t numel = 1, known = 1;
  for (int64_t d : in_old) numel *= d;
  Shape out = sizes;
  size_t inferred = out.size();
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] == -1) {
      inferred = k;
    } else if (out[k] < -1 || __builtin_mul_overflow(known, out[k], &known)) {
      // the recorded arguments are no shape (a trace edited by hand): nothing to align
      r.why = "sizes " + text(sizes) + " are not a shape";
      return r;
    }
  }
  if (inferred < out.size() && known > 0) out[inferred] = numel / known;
  if (numel == 0) return r;
  size_t i = 0, j = 0;
  while (i < in_old.size() || j < out.size()) {
    std::vector<size_t> gi, go;
    int64_t pi = 1, pj = 1;
    if (i < in_old.size()) pi *= in_old[gi.emplace_back(i++)];
    if (j < out.size()) pj *= out[go.emplace_back(j++)];
    while (pi != pj) {
      if ((pi < pj && i < in_old.size()) || j >= out.size()) {
        if (i >= in_old.size()) break;
        pi *= in_old[gi.emplace_back(i++)];
      } else {
        pj *= out[go.emplace_back(j++)];
      }
    }
    if (pi != pj) {
      r.why = "sizes " + text(sizes) + " do not match the input's " + text(in_old);
      return r;
    }
    bool has_inferred = false;
    for (size_t k : go) has_inferred = has_inferred || k == inferred;
    if (has_inferred) continue;  // LibTorch infers the -1 entry again
    r.why = solve_group(r.values, go, product(in_old, gi), product(in_new, gi), changes);
    if (!r.why.empty()) return r;
  }
  return r;
}

ArgSolution solve_free(const Shape& sizes, const std::vector<bool>& free, const std::vector<gen::DimChange>& changes) {
  ArgSolution r;
  r.values = sizes;
  for (const gen::DimChange& c : changes) {
    std::vector<Candidate> all;
    for (size_t j = 0; j < sizes.size(); ++j)
      if (free[j] && sizes[j] == c.from) all.push_back({j, c.to, true, &c});
    if (all.empty()) continue;
    Candidate x;
    r.why = choose(all, sizes, x);
    if (!r.why.empty()) return r;
    r.values[x.entry] = x.value;
  }
  return r;
}

ArgSolution solve_expand(const Shape& in_old, const Shape& in_new, const Shape& sizes,
                         const std::vector<gen::DimChange>& changes) {
  Shape v = sizes;
  std::vector<bool> free(sizes.size(), true);
  const size_t lead = sizes.size() >= in_old.size() ? sizes.size() - in_old.size() : 0;
  for (size_t j = lead; j < sizes.size() && in_old.size() == in_new.size(); ++j) {
    const size_t d = j - lead;
    if (v[j] == -1 || v[j] == in_old[d]) {
      free[j] = false;
      if (v[j] != -1) v[j] = in_new[d];
    }
  }
  return solve_free(v, free, changes);
}

}  // namespace reprise::replay::detail
