"""The GPU rows of the paper scale: each computation on the GPU and on the CPU of the same machine, in one run.

    python bench/gpu_rows.py --out gpu_rows.json --commit "$(git rev-parse HEAD)" --deadline 420
    python bench/gpu_rows.py --out /tmp/gpu_rows.json --quick       # small sizes, to try the script anywhere

Rows, written to ``--out`` (JSON, rewritten after every row, so a run stopped early keeps what finished):

- ``trace``: the exact Hessian trace (eq. ``eq-trace``, :func:`flatbook.hessian_trace`) of a random ReLU network
  at n = m = 20 000, d = 100 (the largest row of bench_trace.py).
- ``flattest_weights``: :func:`flatbook.flattest_outer_weights` (eq. ``eq-primal``) at n = 5000, m = 50 000,
  d = 50, for σ = ReLU² (c = 2, p = 4/3: the dual Newton solver; the quadratic's features have rank at most
  d(d + 1)/2 = 1275 < n, so no interpolator exists with them).

Each is timed on the GPU (the fastest of three runs after a warm-up) and on the same machine's CPU, all its
cores (one run), with the ratio and the relative difference of the two answers.

- ``experiments``: every experiment's paper configuration run on the GPU (``FLATBOOK_DEVICE=cuda``, an empty
  cache, ``--jobs`` processes sharing the GPU), cheapest first by its committed CPU wall time, each until
  ``--deadline`` seconds after the script started (then stopped: the row says how many points finished). Its
  tables are compared with the committed CPU results (book/paper_scale/results): how many numbers differ
  beyond 1e-6 relative, and the largest relative difference. Wall times are the GPU machine's; the committed
  CPU times beside them are of another machine (``machine`` in each row).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from bench_trace import problem

from flatbook import TwoLayerNet, flattest_outer_weights, get_activation, hessian_trace, paper_results
from flatbook.data import single_index
from flatbook.errors import FlatbookInputError
from flatbook.experiments.runner import experiment_names
from flatbook.figures.saving import machine, package_versions
from flatbook.interpolators import random_directions

from common import fastest, timed

#: the checkout this script belongs to (its committed results are the comparison)
ROOT = Path(__file__).resolve().parent.parent
#: (n, m, d) of each row, at full size and with --quick
SIZES = {
    "trace": {"full": (20_000, 20_000, 100), "quick": (500, 500, 10)},
    "flattest_weights": {"full": (5_000, 50_000, 50), "quick": (200, 2_000, 10)},
}
#: two JSON numbers agree when within this relative difference (the spot check's tolerance)
RTOL = 1e-6


@contextlib.contextmanager
def on_device(name: str):
    """flatbook computes on ``name`` inside the block (``FLATBOOK_DEVICE``, read at each call)."""
    before = os.environ.get("FLATBOOK_DEVICE")
    os.environ["FLATBOOK_DEVICE"] = name
    try:
        yield
    finally:
        if before is None:
            del os.environ["FLATBOOK_DEVICE"]
        else:
            os.environ["FLATBOOK_DEVICE"] = before


def synchronised(fn):
    """``fn`` that waits for the GPU's queued work before returning, so that timers see all of it."""

    def run(*args):
        value = fn(*args)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return value

    return run


def compare_devices(computation, gpu: str) -> dict:
    """``computation(device)()`` (a float; its data already on ``device``) timed on ``gpu`` (the fastest of three
    after a warm-up) and once on the CPU, with the GPU memory it took (0 would mean it never ran there)."""
    with on_device(gpu):
        compute = synchronised(computation(gpu))
        compute()
        if gpu == "cuda":
            torch.cuda.reset_peak_memory_stats()
        value_gpu, seconds_gpu = fastest(compute, repeats=3)
        peak = torch.cuda.max_memory_allocated() if gpu == "cuda" else 0
    with on_device("cpu"):
        value_cpu, seconds_cpu = timed(computation("cpu"))
    return {
        "gpu_peak_memory_gib": round(peak / 2**30, 2),
        "gpu_s": round(seconds_gpu, 4),
        "cpu_s": round(seconds_cpu, 4),
        "cpu_over_gpu": round(seconds_cpu / seconds_gpu, 2),
        "value_gpu": value_gpu,
        "value_cpu": value_cpu,
        "relative_difference": abs(value_gpu - value_cpu) / abs(value_cpu),
    }


def trace_row(size: str, gpu: str) -> dict:
    n, m, d = SIZES["trace"][size]
    with on_device("cpu"):
        net, X, y = problem(n, m, d, get_activation("relu"))

    def computation(device):  # the trace computes where the network's weights are
        here = TwoLayerNet(net.a.to(device), net.theta.to(device), net.activation)
        X_here, y_here = X.to(device), y.to(device)
        return lambda: hessian_trace(here, X_here, y_here)

    return {"n": n, "m": m, "d": d, **compare_devices(computation, gpu)}


def flattest_weights_row(size: str, gpu: str) -> dict:
    n, m, d = SIZES["flattest_weights"][size]
    activation = get_activation("relu_power", c=2.0)
    with on_device("cpu"):
        X, y = single_index(d, link=activation, seed=0).sample(n, seed=1)
        theta = random_directions(m, d, seed=2)

    def computation(device):
        theta_here, X_here, y_here = theta.to(device), X.to(device), y.to(device)
        return lambda: flattest_outer_weights(theta_here, X_here, y_here, activation).flatness

    row = compare_devices(computation, gpu)
    return {"n": n, "m": m, "d": d, "activation": "relu_power(c=2)", **row}


def experiment_order() -> list[tuple[str, float | None]]:
    """Every experiment with its committed CPU wall time (None when not committed or not complete), cheapest
    first and the uncommitted last."""
    folder = paper_results.results_folder(ROOT)
    order = []
    for name in experiment_names():
        path = folder / paper_results.file_name(name)
        results = paper_results.load(path) if path.is_file() else None
        order.append((name, results["wall_time_s"] if results and results["complete"] else None))
    return sorted(order, key=lambda item: (item[1] is None, item[1] or 0.0))


def run_experiment(name: str, jobs: int, seconds: float, quick: bool) -> dict:
    """The experiment's paper (``--quick``: smoke) run on the GPU in a child process, stopped (SIGTERM: it keeps
    its finished points) after ``seconds``; its row, with the comparison against the committed tables."""
    scale = "smoke" if quick else "paper"
    with tempfile.TemporaryDirectory() as scratch:
        result_path = Path(scratch) / paper_results.file_name(name)
        env = {**os.environ, "FLATBOOK_CACHE": str(Path(scratch) / "cache"), "FLATBOOK_PROGRESS": "off"}
        command = [sys.executable, __file__, "--experiment", name, "--scale", scale, "--jobs", str(jobs)]
        child = subprocess.Popen([*command, "--result", str(result_path)], env=env)
        start = time.perf_counter()
        try:
            child.wait(timeout=max(seconds, 1.0))
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        wall = time.perf_counter() - start
        if not result_path.is_file():
            return {"experiment": name, "scale": scale, "wall_s": round(wall, 1), "error": f"exit {child.returncode}"}
        results = paper_results.load(result_path)
    row = {
        "experiment": name,
        "scale": scale,
        "complete": results["complete"],
        "failure": results["failure"],
        "wall_s": results["wall_time_s"],
        "points": len(results["points"]),
        "device": results["device"],
    }
    if results["complete"] and not quick:
        row.update(against_committed(name, results["tables"]))
    return row


def against_committed(name: str, tables) -> dict:
    """How the GPU's tables compare with the committed CPU results of the same configuration."""
    try:
        committed = paper_results.complete_run(name, ROOT)
    except FlatbookInputError as exc:
        return {"committed": str(exc)}
    found = paper_results.differences(committed["tables"], tables, rtol=RTOL, atol=1e-9)
    numbers = [(a, b) for _, a, b in found if isinstance(a, (int, float)) and isinstance(b, (int, float))]
    largest = max((abs(a - b) / max(abs(a), 1e-300) for a, b in numbers), default=0.0)
    return {
        "committed_cpu_wall_s": committed["wall_time_s"],
        "committed_machine": committed["machine"],
        "numbers_beyond_rtol": len(found),
        "largest_relative_difference": largest if math.isfinite(largest) else None,
    }


def child(args) -> int:
    """One experiment's run, written where the parent reads it (the SIGTERM of the deadline keeps the finished
    points, as in scripts/paper_scale.py)."""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    results = paper_results.run(args.experiment, args.scale, jobs=args.jobs, allow_uncommitted=True)
    paper_results.write(results, args.result)
    return 0


SECTIONS = ("trace", "flattest_weights", "experiments")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="the JSON file of the rows (sections not run are kept)")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS), help="default: all")
    parser.add_argument("--commit", default=None, help="the commit of the code that runs (the machine may lack .git)")
    parser.add_argument("--deadline", type=float, default=420.0, help="seconds for the whole script (default 420)")
    parser.add_argument("--jobs", type=int, default=8, help="processes per experiment (default 8)")
    parser.add_argument("--quick", action="store_true", help="small sizes and smoke scales, CPU allowed")
    parser.add_argument("--experiment", help=argparse.SUPPRESS)
    parser.add_argument("--scale", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.experiment:
        return child(args)
    if args.out is None:
        parser.error("--out is required")
    if args.deadline <= 0 or args.jobs < 1:
        parser.error(f"--deadline must be positive and --jobs at least 1, got {args.deadline} and {args.jobs}")
    if not torch.cuda.is_available() and not args.quick:
        parser.error("torch sees no CUDA GPU here: run this on a machine with one, or try it with --quick")
    start = time.perf_counter()
    gpu = "cuda" if torch.cuda.is_available() else "cpu"
    size = "quick" if args.quick else "full"
    rows = json.loads(args.out.read_text()) if args.out.is_file() else {}
    with on_device(gpu):
        where = {
            "commit": args.commit,
            "machine": machine(),
            "versions": package_versions(),
            "cpu_threads": torch.get_num_threads(),
            "gpu": torch.cuda.get_device_name() if gpu == "cuda" else None,
        }

    def save(section, value):
        rows[section] = {**where, "rows": value}
        args.out.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
        print(section, value, flush=True)

    for name, row in (("trace", trace_row), ("flattest_weights", flattest_weights_row)):
        if name in args.sections:
            save(name, [row(size, gpu)])
    if "experiments" not in args.sections:
        return 0
    experiments: list[dict] = []
    with on_device(gpu):
        for name, cpu_wall in experiment_order():
            left = args.deadline - (time.perf_counter() - start)
            if left < 5:
                experiments.append({"experiment": name, "committed_cpu_wall_s": cpu_wall, "run": False})
            else:
                experiments.append(
                    {"committed_cpu_wall_s": cpu_wall, **run_experiment(name, args.jobs, left, args.quick)}
                )
            save("experiments", experiments)
    return 0


if __name__ == "__main__":
    sys.exit(main())
