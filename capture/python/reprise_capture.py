"""Record PyTorch execution traces that Reprise replays, from any PyTorch training loop.

    from reprise_capture import Capture

    with Capture("trace_dir", skip_steps=3, record_steps=1) as cap:
        for batch in loader:
            cap.step()            # an iteration begins
            train_step(batch)

Writes, per rank: ``rank-N.json`` (the execution trace: ExecutionTraceObserver on torch 2.x, ExecutionGraphObserver
on 1.13), ``rank-N.kineto.json`` (a Kineto trace of the recorded steps, when this torch has Kineto) and, from rank 0,
``manifest.json`` with every rank's uninstrumented step times (the "original" that ``reprise replay`` compares
with). The recorded steps are marked ``ProfilerStep#N``; the process groups are written as the
``## process_group:init ##`` node when torch.distributed is initialized. Nothing but torch is needed.
"""

import json
import os
import statistics
import time

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


class Capture:
    """A step window: `skip_steps` steps run uninstrumented (timed: the original iteration time), then
    `record_steps` steps are recorded. Call step() at the start of every iteration."""

    def __init__(self, out_dir, skip_steps=2, record_steps=1, kineto=True, rank=None, world_size=None):
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
        self.recorded_seconds = []  # recorded steps
        self._step = -1
        self._t0 = None
        self._observer = None
        self._profiler = None
        self._marker = None
        self._done = False

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
        (self.recorded_seconds if self.recording else self.step_seconds).append(seconds)

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
            self._start_recording()
        if self.recording:
            self._marker = torch.profiler.record_function("ProfilerStep#%d" % self._step)
            self._marker.__enter__()
        self._t0 = time.perf_counter()

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
        self._stop_recording()
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
                              "recorded": len(self.recorded_seconds)},
                    "ranks": ranks}
        path = os.path.join(self.out_dir, "manifest.json")
        with open(path + ".tmp", "w") as f:
            json.dump(manifest, f, indent=2)
        os.replace(path + ".tmp", path)

    def median_step_seconds(self):
        times = self.step_seconds[1:] or self.step_seconds
        return statistics.median(times) if times else float("nan")
