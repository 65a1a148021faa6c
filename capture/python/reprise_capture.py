"""Record PyTorch execution traces that Reprise replays, from any PyTorch training loop.

    from reprise_capture import Capture

    with Capture("trace_dir", skip_steps=5, record_steps=1) as cap:
        for batch in loader:
            cap.step()            # an iteration begins
            train_step(batch)

Writes, per rank: ``rank-N.json`` (the execution trace: ExecutionTraceObserver on torch 2.x, ExecutionGraphObserver
on 1.13), ``rank-N.kineto.json`` (the ops' host times: a Kineto trace of the recorded steps when this torch has
Kineto; without Kineto, the CPU ops of the steps just before the recorded ones, timed by the autograd profiler, so
the recorded steps carry no profiler cost) and, from rank 0, ``manifest.json`` with every rank's uninstrumented step
times (the "original" that ``reprise replay`` compares with). The recorded steps are marked ``ProfilerStep#N``; the
process groups are written as the ``## process_group:init ##`` node when torch.distributed is initialized. Nothing
but torch is needed.
"""

import difflib
import json
import os
import statistics
import time
import warnings

import torch

__all__ = ["Capture"]


def _rank_and_world():
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    env = os.environ
    for rank_key, size_key in (("RANK", "WORLD_SIZE"), ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
                               ("SLURM_PROCID", "SLURM_NTASKS")):
        if rank_key in env and size_key in env:
            return int(env[rank_key]), int(env[size_key])
    return 0, 1


def _observer_class():
    profiler = torch.profiler
    if hasattr(profiler, "ExecutionTraceObserver"):  # torch >= 2.0
        return profiler.ExecutionTraceObserver
    if hasattr(profiler, "ExecutionGraphObserver"):  # torch 1.13
        return profiler.ExecutionGraphObserver
    raise RuntimeError("reprise_capture: this torch (%s) has no execution trace observer" % torch.__version__)


def _process_groups_json(world):
    """The process groups as PyTorch 2.x writes them in `## process_group:init ##`."""
    dist = torch.distributed
    groups = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "", "ranks": [], "group_size": world,
               "group_count": 1}]
    if dist.is_available() and dist.is_initialized():
        groups[0]["backend_config"] = str(dist.get_backend())
    return json.dumps(groups)


def _timeline_event(e, name):
    """A Chrome trace event of an autograd profiler event (times in microseconds)."""
    user_scope = 7  # torch.autograd.RecordScope.USER_SCOPE: record_function scopes
    event = {"ph": "X", "cat": "user_annotation" if getattr(e, "scope", 0) == user_scope else "cpu_op",
             "name": name, "pid": os.getpid(), "tid": e.thread, "ts": e.time_range.start,
             "dur": e.time_range.end - e.time_range.start, "args": {}}
    if e.sequence_nr >= 0:
        event["args"]["Sequence number"] = e.sequence_nr
    return event


def _rf_id(node):
    if "rf_id" in node:  # schema 1.0.1: flat keys
        return node["rf_id"]
    for a in node.get("attrs", []):
        if a.get("name") == "rf_id":
            return a.get("value")
    return None


def _align_with_et(et_path, first_step, names, max_diff=20000):
    """The rf_id of the ET node each of `names` stands for (None where none does): the ET's ops from the marker
    `first_step` on, in id (start) order, aligned with `names` by their names."""
    try:
        with open(et_path) as f:
            nodes = sorted(json.load(f)["nodes"], key=lambda n: n["id"])
    except (OSError, ValueError, KeyError, TypeError):
        return [None] * len(names)
    start = next((n["id"] for n in nodes if n.get("name") == first_step), None)
    if start is None:
        return [None] * len(names)
    et = [(n["name"], _rf_id(n)) for n in nodes
          if n["id"] >= start and not n.get("name", "").startswith("[pytorch|profiler|")]
    if [name for name, _ in et] == names:
        return [rf_id for _, rf_id in et]
    out = [None] * len(names)
    if len(names) > max_diff or len(et) > max_diff:  # difflib is quadratic in repeated names
        return out
    matcher = difflib.SequenceMatcher(None, names, [name for name, _ in et], autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            out[block.a + k] = et[block.b + k][1]
    return out


class Capture:
    """A step window: `skip_steps` steps run uninstrumented, then `record_steps` steps are recorded. Call step() at
    the start of every iteration. Of the uninstrumented steps the first warms up; without Kineto the last (up to
    3 x `record_steps`) are timed by the autograd profiler (`timing`, for replay's --host-time); the others are the
    original iteration time."""

    def __init__(self, out_dir, skip_steps=5, record_steps=1, kineto=True, rank=None, world_size=None, timing=True):
        if skip_steps < 0 or record_steps < 1:
            raise ValueError("reprise_capture: skip_steps must be >= 0 and record_steps >= 1")
        self.out_dir = str(out_dir)
        self.skip_steps = skip_steps
        self.record_steps = record_steps
        self.kineto = kineto
        found_rank, found_world = _rank_and_world()
        self.rank = found_rank if rank is None else rank
        self.world_size = found_world if world_size is None else world_size
        self.trace_path = os.path.join(self.out_dir, "rank-%d.json" % self.rank)
        self.kineto_path = os.path.join(self.out_dir, "rank-%d.kineto.json" % self.rank)
        self.step_seconds = []      # uninstrumented steps
        self.timed_seconds = []     # steps under the autograd profiler (host times without Kineto)
        self.recorded_seconds = []  # recorded steps
        self._step = -1
        self._t0 = None
        self._observer = None
        self._profiler = None
        self._timer = None
        self._timed_events = None
        self._marker = None
        self._done = False
        # Without Kineto the host times come from steps just before the recorded ones (which they stand for, op for
        # op): up to three groups of `record_steps`, of which the fastest is kept (the one the machine disturbed
        # least), leaving the first step to warm up and at least one uninstrumented step to time.
        has_kineto = kineto and getattr(torch.autograd, "kineto_available", lambda: False)()
        self._timing_groups = min(3, (skip_steps - 2) // record_steps) if timing and not has_kineto else 0
        self._timing_from = skip_steps - self._timing_groups * record_steps if self._timing_groups > 0 else None
        if timing and not has_kineto and self._timing_groups < 1:
            warnings.warn("reprise_capture: skip_steps=%d leaves no step to time the host work of %d recorded step(s) "
                          "(needs skip_steps >= record_steps + 2): replay will have no host times" %
                          (skip_steps, record_steps))

    # -- context manager --
    def __enter__(self):
        os.makedirs(self.out_dir, exist_ok=True)
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop()
        return False

    @property
    def recording(self):
        return self._observer is not None

    @property
    def timing(self):
        return self._timer is not None

    def _sync(self):
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def _end_step(self):
        if self._step < 0 or self._t0 is None:
            return
        if self._marker is not None:
            self._marker.__exit__(None, None, None)
            self._marker = None
        self._sync()
        seconds = time.perf_counter() - self._t0
        if self.recording:
            self.recorded_seconds.append(seconds)
        elif self.timing:
            self.timed_seconds.append(seconds)
        else:
            self.step_seconds.append(seconds)

    def step(self):
        """Marks the start of an iteration."""
        if self._done:
            return
        self._end_step()
        self._step += 1
        first = self.skip_steps
        if self._step == first + self.record_steps:
            self._stop_recording()
        elif self._step == first:
            self._stop_timing()
            self._start_recording()
        elif self._step == self._timing_from:
            self._timer = torch.autograd.profiler.profile()
            self._timer.__enter__()
        if self.recording or self.timing:
            self._marker = torch.profiler.record_function("ProfilerStep#%d" % self._step)
            self._marker.__enter__()
        self._t0 = time.perf_counter()

    def _stop_timing(self):
        """Keeps the CPU ops of the fastest group of timed steps as Chrome trace events, each step's marker named after
        the recorded step it stands for; they are written once the ET is (_write_timeline)."""
        if self._timer is None:
            return
        self._timer.__exit__(None, None, None)
        events = sorted(self._timer.function_events, key=lambda e: (e.time_range.start, e.id))
        self._timer = None
        markers = [e for e in events if e.name.startswith("ProfilerStep")]
        n = self.record_steps
        groups = [markers[k:k + n] for k in range(0, len(markers) - n + 1, n)]
        if not groups:
            return
        markers = min(groups, key=lambda g: sum(m.time_range.end - m.time_range.start for m in g))
        begin, end = markers[0].time_range.start, max(m.time_range.end for m in markers)
        names = {id(m): "ProfilerStep#%d" % (self.skip_steps + k) for k, m in enumerate(markers)}
        self._timed_events = [_timeline_event(e, names.get(id(e), e.name)) for e in events
                              if begin <= e.time_range.start <= end]

    def _write_timeline(self):
        """Writes the timed steps' ops as a Kineto-style trace. The profiler's ids are those of other steps: each op
        gets the rf_id of the ET node it stands for, found by aligning the two sequences of op names (the same in
        every step), so readers link them by rf_id; ops left unaligned carry none."""
        events, self._timed_events = self._timed_events, None
        if not events:
            return
        rf_ids = _align_with_et(self.trace_path, "ProfilerStep#%d" % self.skip_steps, [e["name"] for e in events])
        for e, rf_id in zip(events, rf_ids):
            if rf_id is not None:
                e["args"]["Record function id"] = rf_id
        trace = {"schemaVersion": 1, "reprise_timeline": "python profiler",
                 "distributedInfo": {"rank": self.rank, "world_size": self.world_size}, "traceEvents": events}
        with open(self.kineto_path + ".tmp", "w") as f:
            json.dump(trace, f)
        os.replace(self.kineto_path + ".tmp", self.kineto_path)

    def _start_recording(self):
        os.makedirs(self.out_dir, exist_ok=True)
        cls = _observer_class()
        observer = cls()
        observer.register_callback(self.trace_path)
        if self.kineto and getattr(torch.autograd, "kineto_available", lambda: False)():
            self._profiler = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU] + (
                [torch.profiler.ProfilerActivity.CUDA] if torch.cuda.is_available() else []), record_shapes=True)
            self._profiler.__enter__()
        observer.start()
        self._observer = observer
        # The process groups, as the node PyTorch 2.x writes: a user scope with the groups as its JSON argument.
        self._pg_json = _process_groups_json(self.world_size)
        with torch.profiler.record_function("## process_group:init ##", self._pg_json):
            pass

    def _stop_recording(self):
        if self._observer is None:
            return
        self._observer.stop()
        self._observer.unregister_callback()
        self._observer = None
        self._fix_string_escapes()
        self._write_timeline()
        if self._profiler is not None:
            self._profiler.__exit__(None, None, None)
            self._profiler.export_chrome_trace(self.kineto_path)
            self._profiler = None

    def _fix_string_escapes(self):
        """torch 1.13's ExecutionGraphObserver writes string arguments unescaped: escape the one we passed."""
        try:
            with open(self.trace_path) as f:
                text = f.read()
        except OSError:
            return
        raw = '"%s"' % self._pg_json
        if raw in text:
            with open(self.trace_path + ".tmp", "w") as f:
                f.write(text.replace(raw, json.dumps(self._pg_json)))
            os.replace(self.trace_path + ".tmp", self.trace_path)

    def stop(self):
        """Ends the recording and writes the manifest (also done on leaving the `with` block)."""
        if self._done:
            return
        self._end_step()
        self._stop_timing()
        self._stop_recording()
        self._write_timeline()  # when the loop ended before recording: no ET to align with
        self._done = True
        self._write_manifest()

    def _write_manifest(self):
        mine = {"rank": self.rank, "trace": os.path.basename(self.trace_path),
                "iteration_seconds": self.step_seconds[1:] or self.step_seconds,  # the first step warms up
                "recorded_iteration_seconds": self.recorded_seconds}
        ranks = [mine]
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized() and self.world_size > 1:
            ranks = [None] * self.world_size
            dist.all_gather_object(ranks, mine)
        if self.rank != 0:
            return
        manifest = {"reprise_capture": 1, "workload": "python", "description": "python training loop",
                    "device": "cuda" if torch.cuda.is_available() and torch.cuda.is_initialized() else "cpu",
                    "torch_version": torch.__version__, "world_size": self.world_size,
                    "threads": torch.get_num_threads(),
                    "steps": {"warmup": min(1, len(self.step_seconds)), "timed": max(len(self.step_seconds) - 1, 0),
                              "host_timed": len(self.timed_seconds), "recorded": len(self.recorded_seconds)},
                    "ranks": ranks}
        path = os.path.join(self.out_dir, "manifest.json")
        with open(path + ".tmp", "w") as f:
            json.dump(manifest, f, indent=2)
        os.replace(path + ".tmp", path)

    def median_step_seconds(self):
        times = self.step_seconds[1:] or self.step_seconds
        return statistics.median(times) if times else float("nan")
