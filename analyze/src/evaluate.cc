// The labeled corpus (clean traces with anti-patterns injected at known steps) and the evaluation of the rules and
// a plain-threshold baseline on its held-out split.
#include "reprise/analyze/evaluate.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "detector.h"
#include "inject.h"
#include "reprise/analyze/analyze.h"
#include "reprise/common/error.h"
#include "reprise/common/files.h"
#include "reprise/common/stats.h"
#include "reprise/trace/read.h"
#include "reprise/trace/write.h"

namespace reprise::analyze {
namespace {

using namespace detail;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The plain-threshold baseline: one feature per class that does not know the cause, thresholded.
const std::map<std::string, std::string>& baseline_features() {
  static const std::map<std::string, std::string> m{{"gpu_idle", "gpu_busy_frac"},
                                                    {"host_sync", "syncs"},
                                                    {"launch_bound", "short_kernel_frac"},
                                                    {"pageable_copy", "h2d_copies"},
                                                    {"unfused_elementwise", "elementwise_chains"},
                                                    {"dtype_churn", "conversions"},
                                                    {"fp32_gemm", "gemm_us"},
                                                    {"unaligned_gemm", "gemm_us"},
                                                    {"exposed_comm", "comm_us"},
                                                    {"straggler", "rank_skew"},
                                                    {"single_tensor_optimizer", "optimizer_launches"},
                                                    {"zero_grad", "memsets"},
                                                    {"data_loader", "gpu_busy_frac"}};
  return m;
}

// gpu_busy_frac is thresholded from below: the baseline scores its complement, the idle fraction.
double baseline_value(const std::string& feature, double v) { return feature == "gpu_busy_frac" ? 1 - v : v; }

size_t feature_index(const std::string& name) {
  const auto& names = feature_names();
  return static_cast<size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

Options judge_only() {
  Options o;
  o.verdicts = true;
  o.scopes = false;
  o.sliding = false;
  return o;
}

// One run's ranks as injection starts from them: those with a Kineto timeline, analyzed together (a step's skew is
// its rank's computation against the median rank's), and of those the ones with steps to label (GPU timelines, and
// CPU captures, whose work is their top-level ops).
struct CleanRank {
  size_t index = 0;  // the rank's place over every input's ranks: its files' names and its random seeds
  int rank = 0;
  std::vector<const Window*> steps;
  std::map<std::string, std::vector<std::string>> present;  // by step: the classes the clean step already shows
  std::map<std::string, bool> test;                         // by step: held out
  std::map<std::string, double> compute;                    // by step: the clean computation (us)
};
struct CleanJob {
  TraceSet set;
  Analysis analysis;
  std::vector<CleanRank> ranks;  // parallel to set.ranks
  std::vector<size_t> usable;    // those with steps
};

CleanJob clean_job(const TraceSet& in, size_t& next_index, size_t& window_counter, const CorpusOptions& o,
                   CorpusSummary& summary) {
  CleanJob job;
  std::vector<size_t> index;
  for (const Trace& base : in.ranks) {
    const size_t i = next_index++;
    if (!base.kineto || base.kineto->events.empty()) {
      summary.skipped.push_back(base.source + ": no Kineto timeline");
      continue;
    }
    job.set.ranks.push_back(clone(base));
    index.push_back(i);
  }
  if (job.set.ranks.empty()) return job;
  job.analysis = analyze(job.set, judge_only());
  job.ranks.resize(job.set.ranks.size());
  for (size_t r = 0; r < job.set.ranks.size(); ++r) {
    CleanRank& c = job.ranks[r];
    c.index = index[r];
    c.rank = job.analysis.ranks[r].rank;
    for (const Window& w : job.analysis.windows)
      if (w.kind == WindowKind::Step && w.rank == c.rank) c.steps.push_back(&w);
    if (c.steps.empty()) {
      summary.skipped.push_back(job.set.ranks[r].source + ": no ProfilerSteps to label");
      continue;
    }
    job.usable.push_back(r);
    ++summary.bases;
    const Timeline tl = build_timeline(job.set.ranks[r], c.rank);
    for (const Window* w : c.steps) c.compute[w->name] = covered(tl.compute, w->begin_us, w->end_us);
  }
  for (const WindowVerdict& v : job.analysis.verdicts) {
    auto r = std::find_if(job.usable.begin(), job.usable.end(), [&](size_t k) { return job.ranks[k].rank == v.rank; });
    if (r == job.usable.end()) continue;
    for (size_t k = 0; k < v.fired.size(); ++k)
      if (v.fired[k]) job.ranks[*r].present[v.window].push_back(detector_table()[k]->info.id);
    job.ranks[*r].test[v.window] = window_counter++ % size_t(o.test_every) == size_t(o.test_every) - 1;
  }
  return job;
}

// A job as a compiler that fuses elementwise work would leave it (torch.compile, fused ops): each chain of
// elementwise kernels one kernel where the chain began, as long as its longest member; the rest as it was. Clean
// bases for unfused_elementwise, which every step of the shared traces already shows.
TraceSet fused_set(const TraceSet& in) {
  TraceSet out;
  for (size_t r = 0; r < in.ranks.size(); ++r) {
    const Trace& base = in.ranks[r];
    if (!base.kineto || base.kineto->events.empty()) {
      out.ranks.push_back(clone(base));  // clean_job says why it cannot serve
      continue;
    }
    const Timeline tl = build_timeline(base, static_cast<int>(r));
    std::vector<std::vector<int32_t>> chains;
    for (const Chain& c : elementwise_chains(tl, 0, tl.work.size())) {
      chains.emplace_back();
      for (size_t w : c.members) chains.back().push_back(tl.work[w].event);
    }
    Editor ed(base);
    ed.fuse(chains);
    Trace fused;
    fused.source = base.source;
    read_kineto_text(kineto_json(ed), base.kineto->source.empty() ? base.source : base.kineto->source, fused);
    fused.rank = base.rank;  // as the run's reader numbered it, whatever the Kineto header says
    out.ranks.push_back(std::move(fused));
  }
  return out;
}

// One step of one rank in one copy: what went in, and how much computation it added.
struct Labeled {
  std::string name, injected, decoy;
  std::vector<std::string> present;
  double added_us = 0;
};

// Injects into every step of one rank, each left clean, given one class or given a class's decoy; a straggler goes
// into one rank of a step at most (`straggling`), in a run of 3 ranks or more.
std::vector<Labeled> inject_rank(Editor& editor, const CleanJob& job, size_t r,
                                 const std::vector<const Detector*>& injectable, std::set<std::string>& straggling,
                                 std::mt19937_64& rng, const CorpusOptions& o) {
  const CleanRank& c = job.ranks[r];
  std::vector<Labeled> out;
  for (size_t s = c.steps.size(); s-- > 0;) {
    const Window& step = *c.steps[s];
    InjectSite site{step.begin_us, step.end_us, &rng};
    Labeled l;
    l.name = step.name;
    l.present = c.present.count(step.name) ? c.present.at(step.name) : std::vector<std::string>{};
    const double added_before = editor.added_compute_us();
    const double u = std::uniform_real_distribution<double>(0, 1)(rng);
    if (u >= o.clean_share) {
      const bool look_alike = u < o.clean_share + o.decoy_share;
      std::vector<const Detector*> order = injectable;
      std::shuffle(order.begin(), order.end(), rng);
      for (const Detector* d : order) {
        if (std::find(l.present.begin(), l.present.end(), d->info.id) != l.present.end()) continue;
        if (d == &kStraggler && (job.usable.size() < 3 || straggling.count(step.name))) continue;
        if (look_alike ? d->decoy && d->decoy(editor, site) : d->inject(editor, site)) {
          (look_alike ? l.decoy : l.injected) = d->info.id;
          if (d == &kStraggler && !look_alike) straggling.insert(step.name);
          break;
        }
      }
    }
    l.added_us = editor.added_compute_us() - added_before;
    out.push_back(std::move(l));
  }
  return out;
}

// Whatever went in, a rank whose computation in a step is then 5% and 100 us over the median rank's (clean plus
// added, over the run's labeled ranks: the straggler rule's bar) is a straggler there; known from what was added,
// not from the rule. Such a step is labeled as showing `straggler` unless one was injected into it, and an injected
// one that others' additions kept under the bar is left out of the class's scores the same way.
void label_stragglers(const CleanJob& job, std::vector<std::vector<Labeled>>& steps) {
  std::map<std::string, std::vector<double>> total;
  for (size_t r : job.usable)
    for (const Labeled& l : steps[r]) total[l.name].push_back(job.ranks[r].compute.at(l.name) + l.added_us);
  for (size_t r : job.usable)
    for (Labeled& l : steps[r]) {
      const std::vector<double>& all = total[l.name];
      if (all.size() < 2) continue;
      const double mid = median(all), over = job.ranks[r].compute.at(l.name) + l.added_us - mid;
      const bool straggles = over >= 100 && over >= 0.05 * mid;
      const bool shown = std::find(l.present.begin(), l.present.end(), "straggler") != l.present.end();
      if (straggles != (l.injected == "straggler") && !shown) l.present.push_back("straggler");
    }
}

// The corpus written into `dir` (make_corpus checks the options and owns the folder).
CorpusSummary write_corpus(const std::vector<TraceSet>& jobs, const std::string& dir, const CorpusOptions& options) {
  std::vector<const Detector*> injectable;
  for (const Detector* d : detector_table())
    if (d->inject) injectable.push_back(d);
  CorpusSummary summary;
  nlohmann::json corpus{{"format", "reprise-corpus/1"},
                        {"seed", options.seed},
                        {"copies", options.copies},
                        {"classes", nlohmann::json::array()},
                        {"traces", nlohmann::json::array()}};
  for (const Detector* d : injectable) corpus["classes"].push_back(d->info.id);
  size_t window_counter = 0, next_index = 0;
  const size_t inputs = jobs.size();
  for (size_t j = 0; j < inputs * (options.fused_bases ? 2 : 1); ++j) {
    const bool fused = j >= inputs;
    const CleanJob job = fused ? clean_job(fused_set(jobs[j - inputs]), next_index, window_counter, options, summary)
                               : clean_job(jobs[j], next_index, window_counter, options, summary);
    for (int copy = 0; copy < options.copies; ++copy) {
      std::vector<std::unique_ptr<Editor>> editors(job.ranks.size());
      std::vector<std::vector<Labeled>> steps(job.ranks.size());
      std::set<std::string> straggling;
      // Ranks in a shuffled order, so a step's straggler is not always the first rank to draw the class.
      std::vector<size_t> order = job.usable;
      std::mt19937_64 shuffle(options.seed * 1000003 + j * 104729 + static_cast<uint64_t>(copy));
      std::shuffle(order.begin(), order.end(), shuffle);
      for (size_t r : order) {
        std::mt19937_64 rng(options.seed * 1000003 + job.ranks[r].index * 7919 + static_cast<uint64_t>(copy));
        editors[r] = std::make_unique<Editor>(job.set.ranks[r]);
        steps[r] = inject_rank(*editors[r], job, r, injectable, straggling, rng, options);
      }
      label_stragglers(job, steps);
      for (size_t r : job.usable) {
        const CleanRank& c = job.ranks[r];
        nlohmann::json windows = nlohmann::json::array();
        for (const Labeled& l : steps[r]) {
          const bool test = c.test.count(l.name) && c.test.at(l.name);
          ++summary.injected[l.injected];
          if (!l.decoy.empty()) ++summary.decoys[l.decoy];
          ++summary.windows;
          summary.test_windows += test;
          windows.push_back({{"name", l.name},
                             {"injected", l.injected},
                             {"decoy", l.decoy},
                             {"split", test ? "test" : "train"},
                             {"present", l.present}});
        }
        const Trace& base = job.set.ranks[r];
        const std::string file = "b" + std::to_string(c.index) + "-c" + std::to_string(copy) + ".json.gz";
        write_text_file(dir + "/" + file, kineto_json(*editors[r]));
        ++summary.traces;
        corpus["traces"].push_back({{"file", file},
                                    {"base", (base.kineto->source.empty() ? base.source : base.kineto->source) +
                                                 (fused ? " (elementwise fused)" : "")},
                                    {"job", std::to_string(j) + "-c" + std::to_string(copy)},
                                    {"rank", c.rank},
                                    {"device", job.analysis.ranks[r].gpu ? "gpu" : "cpu"},
                                    {"copy", copy},
                                    {"windows", windows}});
        if (options.progress) options.progress("corpus: " + file + " (" + std::to_string(summary.traces) + " traces)");
      }
    }
  }
  if (summary.bases == 0)
    throw UserError("analyze: no clean trace with ProfilerSteps to inject into" +
                    (summary.skipped.empty() ? std::string("") : " (" + summary.skipped.front() + ")"));
  write_text_file(dir + "/corpus.json", corpus.dump(1) + "\n");
  return summary;
}

}  // namespace

CorpusSummary make_corpus(const std::vector<TraceSet>& jobs, const std::string& dir, const CorpusOptions& options) {
  if (options.copies < 1) throw UserError("analyze: --copies must be at least 1");
  if (options.test_every < 2) throw UserError("analyze: every test_every-th window is held out: at least 2");
  std::error_code ec;
  const bool made = !std::filesystem::exists(dir, ec);
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UserError(dir + ": cannot create the corpus folder: " + ec.message());
  try {
    return write_corpus(jobs, dir, options);
  } catch (...) {
    if (made) std::filesystem::remove_all(dir, ec);  // a corpus that failed leaves no folder it made
    throw;
  }
}

double auc_roc(const std::vector<bool>& truth, const std::vector<double>& score) {
  // A score that is not a number ranks lowest (it says nothing for the window).
  std::vector<double> clean(score);
  for (double& v : clean)
    if (std::isnan(v)) v = -std::numeric_limits<double>::infinity();
  std::vector<size_t> order(clean.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return clean[a] < clean[b]; });
  double positive_rank_sum = 0;
  size_t positives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i + 1;
    while (j < order.size() && clean[order[j]] == clean[order[i]]) ++j;
    const double rank = (double(i) + double(j) + 1) / 2;  // ranks i+1 .. j share their mean
    for (size_t k = i; k < j; ++k)
      if (truth[order[k]]) {
        positive_rank_sum += rank;
        ++positives;
      }
    i = j;
  }
  const size_t negatives = clean.size() - positives;
  if (positives == 0 || negatives == 0) return kNaN;
  return (positive_rank_sum - double(positives) * double(positives + 1) / 2) / (double(positives) * double(negatives));
}

BinaryMetrics binary_metrics(const std::vector<bool>& truth, const std::vector<bool>& predicted,
                             const std::vector<double>& score) {
  BinaryMetrics m;
  for (size_t i = 0; i < truth.size(); ++i) {
    if (truth[i] && predicted[i]) ++m.tp;
    if (!truth[i] && predicted[i]) ++m.fp;
    if (!truth[i] && !predicted[i]) ++m.tn;
    if (truth[i] && !predicted[i]) ++m.fn;
  }
  m.precision = m.tp + m.fp ? double(m.tp) / double(m.tp + m.fp) : kNaN;
  m.recall = m.tp + m.fn ? double(m.tp) / double(m.tp + m.fn) : kNaN;
  m.f1 = m.precision + m.recall > 0 ? 2 * m.precision * m.recall / (m.precision + m.recall) : kNaN;
  if (m.tp == 0 && (m.fp + m.fn) > 0) m.f1 = 0;
  m.auc = auc_roc(truth, score);
  return m;
}

double best_threshold(const std::vector<bool>& truth, const std::vector<double>& score) {
  // Sorted once, highest first; each distinct value is a candidate threshold (predict at or above it), swept with
  // running counts. Ties in F1 keep the higher threshold. Not-a-number scores are never above a threshold.
  std::vector<size_t> order;
  size_t positives = 0;
  for (size_t i = 0; i < score.size(); ++i) {
    positives += truth[i];
    if (!std::isnan(score[i])) order.push_back(i);
  }
  if (order.empty()) return 0;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
  size_t tp = 0, fp = 0, best_at = 0;
  double best_f1 = -1;
  for (size_t k = 0; k < order.size();) {
    size_t j = k;
    for (; j < order.size() && score[order[j]] == score[order[k]]; ++j) (truth[order[j]] ? tp : fp)++;
    const double f1 = tp ? 2.0 * double(tp) / double(2 * tp + fp + (positives - tp)) : 0;
    if (f1 > best_f1) {
      best_f1 = f1;
      best_at = k;
    }
    k = j;
  }
  // Halfway between the chosen value and the next lower one.
  const double chosen = score[order[best_at]];
  for (size_t k = best_at; k < order.size(); ++k)
    if (score[order[k]] < chosen) return (chosen + score[order[k]]) / 2;
  return chosen;
}

bool CorpusWindow::has(const std::string& c) const {
  return std::find(present.begin(), present.end(), c) != present.end();
}

CorpusData read_corpus(const std::string& dir, const std::function<void(const std::string&)>& progress) {
  const std::string path = dir + "/corpus.json";
  std::string text;
  try {
    text = read_text_file(path);
  } catch (const UserError& e) {
    throw UserError(std::string(e.what()) + " (make one with reprise analyze --make-corpus)");
  }
  nlohmann::json corpus;
  try {
    corpus = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(path + ": " + e.what());
  }
  if (!corpus.is_object() || corpus.value("format", "") != "reprise-corpus/1" || !corpus["traces"].is_array())
    throw UserError(path + ": not a reprise-corpus/1 file");
  CorpusData data;
  data.dir = dir;
  try {
    for (const auto& c : corpus.at("classes")) {
      const std::string id = c.get<std::string>();
      if (!find_detector(id)) throw UserError(path + ": unknown class '" + id + "'");
      data.classes.push_back(id);
    }
  } catch (const nlohmann::json::exception& e) {
    throw UserError(path + ": classes: " + e.what());
  }
  // The traces of one job (its ranks, in one copy) are analyzed together, as they were made: a step's skew is its
  // rank's computation against the median rank's. A trace without a job is a job of its own.
  const nlohmann::json& traces = corpus["traces"];
  std::vector<std::vector<size_t>> jobs;
  std::map<std::string, size_t> job_of;
  for (size_t i = 0; i < traces.size(); ++i) {
    const nlohmann::json& entry = traces[i];
    const auto job = entry.is_object() ? entry.find("job") : entry.end();
    if (!entry.is_object() || job == entry.end() || !job->is_string()) {
      jobs.push_back({i});
      continue;
    }
    auto [it, fresh] = job_of.emplace(job->get<std::string>(), jobs.size());
    if (fresh) jobs.emplace_back();
    jobs[it->second].push_back(i);
  }
  for (const std::vector<size_t>& job : jobs) {
    size_t at = job.front();
    try {
      TraceSet set;
      for (size_t i : job) {
        at = i;
        const std::string file = dir + "/" + traces[i].at("file").get<std::string>();
        TraceSet one = load_traces({file});
        if (one.ranks.size() != 1) throw UserError(file + ": not one rank's timeline (the corpus is not its own)");
        const nlohmann::json rank = traces[i].value("rank", nlohmann::json(0));
        if (!rank.is_number_integer() || rank.get<int64_t>() < 0 || rank.get<int64_t>() > (int64_t{1} << 30))
          throw UserError(path + ": trace " + std::to_string(i) +
                          ": rank: expected a rank (an integer of at least 0), got " + rank.dump());
        one.ranks[0].rank = rank.get<int64_t>();
        for (const Trace& t : set.ranks)
          if (t.rank == one.ranks[0].rank)
            throw UserError(path + ": trace " + std::to_string(i) + ": rank " + std::to_string(t.rank) +
                            " twice in job " + traces[i].value("job", std::string("?")));
        set.ranks.push_back(std::move(one.ranks[0]));
      }
      const Analysis a = analyze(set, judge_only());
      std::map<std::pair<int, std::string>, const WindowVerdict*> by_name;
      for (const WindowVerdict& v : a.verdicts) by_name[{v.rank, v.window}] = &v;
      for (size_t k = 0; k < job.size(); ++k) {
        at = job[k];
        const nlohmann::json& entry = traces[job[k]];
        for (const auto& w : entry.at("windows")) {
          const std::string name = w.at("name").get<std::string>();
          auto it = by_name.find({a.ranks[k].rank, name});
          if (it == by_name.end())
            throw UserError(set.ranks[k].source + ": has no window " + name + " (the corpus is not its own)");
          const std::string where = path + ": trace " + std::to_string(job[k]) + ": window " + name;
          auto known = [&](const std::string& label, const char* key) {
            if (!label.empty() && std::find(data.classes.begin(), data.classes.end(), label) == data.classes.end())
              throw UserError(where + ": " + key + ": '" + label + "' is not one of the corpus's classes");
            return label;
          };
          CorpusWindow cw;
          cw.gpu = a.ranks[k].gpu;
          const std::string split = w.at("split").get<std::string>();
          if (split != "test" && split != "train")
            throw UserError(where + ": split: expected train or test, got '" + split + "'");
          cw.test = split == "test";
          cw.injected = known(w.at("injected").get<std::string>(), "injected");
          cw.decoy = known(w.value("decoy", ""), "decoy");
          for (const auto& p : w.at("present")) cw.present.push_back(known(p.get<std::string>(), "present"));
          cw.features = it->second->features;
          cw.fired = it->second->fired;
          cw.score = it->second->score;
          data.windows.push_back(std::move(cw));
        }
        ++data.traces;
      }
    } catch (const nlohmann::json::exception& e) {
      throw UserError(path + ": trace " + std::to_string(at) + ": " + e.what());
    }
    if (progress) progress("read " + std::to_string(data.traces) + " of " + std::to_string(traces.size()));
  }
  if (data.windows.empty()) throw UserError(path + ": no windows to score (the corpus holds no steps)");
  return data;
}

Evaluation evaluate_corpus(const std::string& dir, const WindowModel* model,
                           const std::function<void(const std::string&)>& progress) {
  const CorpusData data = read_corpus(dir, progress);
  Evaluation ev;
  ev.corpus = dir;
  ev.traces = data.traces;
  ev.windows = data.windows.size();
  for (const CorpusWindow& w : data.windows) (w.test ? ev.test : ev.train)++;
  std::vector<std::vector<double>> probabilities;
  if (model)
    for (const CorpusWindow& w : data.windows) probabilities.push_back(model->predict(w.features));
  const auto& table = detector_table();
  // Per class over the GPU windows (rules, baseline and classifier) or the CPU windows (rules and baseline: the
  // classifier learned from GPU steps); a class with no window of the kind is left out of it.
  auto score = [&](const std::string& id, bool gpu) {
    const size_t k = static_cast<size_t>(
        std::find_if(table.begin(), table.end(), [&](const Detector* d) { return d->info.id == id; }) - table.begin());
    ClassEvaluation ce;
    ce.detector = id;
    ce.baseline_feature = baseline_features().at(id);
    const size_t f = feature_index(ce.baseline_feature);
    size_t m =
        model
            ? static_cast<size_t>(std::find(model->classes.begin(), model->classes.end(), id) - model->classes.begin())
            : 0;
    ce.has_classifier = gpu && model && m < model->classes.size();
    std::vector<bool> train_truth, test_truth, test_fired, test_learned;
    std::vector<double> train_value, test_value, test_score, test_probability;
    for (size_t i = 0; i < data.windows.size(); ++i) {
      const CorpusWindow& w = data.windows[i];
      if (w.gpu != gpu) continue;
      if (w.has(id)) continue;  // the clean step already shows it: neither positive nor negative
      const bool positive = w.injected == id;
      const double value = baseline_value(ce.baseline_feature, w.features[f]);
      if (!w.test) {
        train_truth.push_back(positive);
        train_value.push_back(value);
        (positive ? ce.train_positive : ce.train_negative)++;
        continue;
      }
      test_truth.push_back(positive);
      test_fired.push_back(w.fired[k] != 0);
      test_score.push_back(w.score[k]);
      test_value.push_back(value);
      if (ce.has_classifier) {
        test_probability.push_back(probabilities[i][m]);
        test_learned.push_back(probabilities[i][m] >= 0.5);
      }
      (positive ? ce.test_positive : ce.test_negative)++;
    }
    ce.baseline_threshold = best_threshold(train_truth, train_value);
    std::vector<bool> baseline_pred;
    for (double v : test_value) baseline_pred.push_back(v >= ce.baseline_threshold);
    ce.rules = binary_metrics(test_truth, test_fired, test_score);
    ce.baseline = binary_metrics(test_truth, baseline_pred, test_value);
    if (ce.has_classifier) ce.classifier = binary_metrics(test_truth, test_learned, test_probability);
    return ce;
  };
  const bool any_gpu = std::any_of(data.windows.begin(), data.windows.end(), [](const auto& w) { return w.gpu; });
  const bool any_cpu = std::any_of(data.windows.begin(), data.windows.end(), [](const auto& w) { return !w.gpu; });
  for (const std::string& id : data.classes) {
    if (any_gpu) ev.classes.push_back(score(id, true));
    // On the CPU: the classes injected into some CPU window (the others have no CPU form).
    const bool injected = std::any_of(data.windows.begin(), data.windows.end(),
                                      [&](const CorpusWindow& w) { return !w.gpu && w.injected == id; });
    if (any_cpu && injected) ev.cpu_classes.push_back(score(id, false));
  }
  return ev;
}

namespace {
nlohmann::json number(double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); }
nlohmann::json metrics_json(const BinaryMetrics& m) {
  return {{"tp", m.tp},
          {"fp", m.fp},
          {"tn", m.tn},
          {"fn", m.fn},
          {"precision", number(m.precision)},
          {"recall", number(m.recall)},
          {"f1", number(m.f1)},
          {"auc", number(m.auc)}};
}
std::string pad(const std::string& s) { return std::string(6 - std::min<size_t>(6, s.size()), ' ') + s; }
std::string cell(double v) {
  if (std::isnan(v)) return "-";
  char b[16];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

nlohmann::json classes_json(const std::vector<ClassEvaluation>& classes) {
  nlohmann::json list = nlohmann::json::array();
  for (const ClassEvaluation& c : classes)
    list.push_back({{"detector", c.detector},
                    {"baseline_feature", c.baseline_feature},
                    {"baseline_threshold", c.baseline_threshold},
                    {"train_positive", c.train_positive},
                    {"train_negative", c.train_negative},
                    {"test_positive", c.test_positive},
                    {"test_negative", c.test_negative},
                    {"rules", metrics_json(c.rules)},
                    {"baseline", metrics_json(c.baseline)},
                    {"classifier", c.has_classifier ? metrics_json(c.classifier) : nlohmann::json()}});
  return list;
}
}  // namespace

std::string evaluation_json(const Evaluation& e) {
  nlohmann::json j{{"format", "reprise-evaluation/1"},
                   {"corpus", e.corpus},
                   {"traces", e.traces},
                   {"windows", e.windows},
                   {"train", e.train},
                   {"test", e.test},
                   {"classes", classes_json(e.classes)}};
  if (!e.cpu_classes.empty()) j["cpu_classes"] = classes_json(e.cpu_classes);
  return j.dump(1) + "\n";
}

namespace {
void print_classes(std::FILE* out, const std::vector<ClassEvaluation>& classes) {
  const bool learned =
      std::any_of(classes.begin(), classes.end(), [](const ClassEvaluation& c) { return c.has_classifier; });
  std::fprintf(out, "%-24s %9s  %-27s  %-27s%s\n", "", "held out", "rules", "threshold baseline",
               learned ? "  classifier" : "");
  std::fprintf(out, "%-24s %4s %4s  %6s %6s %6s %6s  %6s %6s %6s %6s%s  %s\n", "class", "pos", "neg", "prec", "recall",
               "f1", "auc", "prec", "recall", "f1", "auc", learned ? "    prec recall     f1    auc" : "",
               "baseline feature >= threshold");
  for (const ClassEvaluation& c : classes) {
    std::string learned_cells;
    if (learned)
      learned_cells = c.has_classifier
                          ? "  " + pad(cell(c.classifier.precision)) + " " + pad(cell(c.classifier.recall)) + " " +
                                pad(cell(c.classifier.f1)) + " " + pad(cell(c.classifier.auc))
                          : "       -      -      -      -";
    std::fprintf(
        out, "%-24s %4zu %4zu  %6s %6s %6s %6s  %6s %6s %6s %6s%s  %s >= %.4g\n", c.detector.c_str(), c.test_positive,
        c.test_negative, cell(c.rules.precision).c_str(), cell(c.rules.recall).c_str(), cell(c.rules.f1).c_str(),
        cell(c.rules.auc).c_str(), cell(c.baseline.precision).c_str(), cell(c.baseline.recall).c_str(),
        cell(c.baseline.f1).c_str(), cell(c.baseline.auc).c_str(), learned_cells.c_str(),
        c.baseline_feature == "gpu_busy_frac" ? "idle fraction" : c.baseline_feature.c_str(), c.baseline_threshold);
  }
}
}  // namespace

void print_evaluation(std::FILE* out, const Evaluation& e) {
  std::fprintf(out, "%zu traces, %zu windows (%zu train, %zu held out)\n\n", e.traces, e.windows, e.train, e.test);
  if (!e.classes.empty()) print_classes(out, e.classes);
  if (e.cpu_classes.empty()) return;
  std::fprintf(out, "%sCPU captures (their top-level ops are the work; the classifier learned from GPU steps):\n",
               e.classes.empty() ? "" : "\n");
  print_classes(out, e.cpu_classes);
}

}  // namespace reprise::analyze
