"""bench/gpu_rows.py, the GPU rows of the paper scale: its sections on this machine (the CPU standing in for the
GPU with --quick), the sections it keeps, and its refusals."""

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import gpu_rows  # noqa: E402


def test_the_two_computations_are_timed_on_both_devices_with_the_same_answer(tmp_path):
    out = tmp_path / "rows.json"
    out.write_text(json.dumps({"experiments": {"commit": "kept", "rows": []}}))
    assert gpu_rows.main(["--out", str(out), "--quick", "--sections", "trace", "flattest_weights"]) == 0
    rows = json.loads(out.read_text())
    assert rows["experiments"] == {"commit": "kept", "rows": []}  # a section not run is left as it was
    for name in ("trace", "flattest_weights"):
        (row,) = rows[name]["rows"]
        assert (row["n"], row["m"], row["d"]) == gpu_rows.SIZES[name]["quick"]
        assert row["gpu_s"] > 0 and row["cpu_s"] > 0
        assert row["value_gpu"] > 0
        # on a CPU-only machine both sides run the same float64 code on the same data
        assert row["relative_difference"] == 0.0 or torch.cuda.is_available()
        assert rows[name]["machine"] and rows[name]["versions"]["torch"] == torch.__version__


def test_the_computations_compute_where_their_data_is(monkeypatch):
    """Each side of a comparison builds its data on its own device (the trace computes where the network's
    weights are, whatever FLATBOOK_DEVICE says)."""
    seen = []

    def computation(device):
        seen.append(device)
        return lambda: 1.0

    row = gpu_rows.compare_devices(computation, "cpu")
    assert seen == ["cpu", "cpu"] and row["relative_difference"] == 0.0


@pytest.mark.slow
def test_an_experiment_stopped_at_its_deadline_keeps_its_finished_points_and_says_so():
    # 10 s: the child must import torch and install its SIGTERM handler first (slow on a loaded machine), and the
    # smoke run needs about 30 s, so it is still stopped early
    row = gpu_rows.run_experiment("bad_interpolators", jobs=1, seconds=10.0, quick=True)
    assert row["experiment"] == "bad_interpolators" and row["scale"] == "smoke"
    assert row["complete"] is False and row["points"] < 39  # the smoke run has 39 points and takes 30 s


def test_experiments_are_run_cheapest_first_and_the_uncommitted_last():
    order = gpu_rows.experiment_order()
    timed = [seconds for _, seconds in order if seconds is not None]
    assert timed == sorted(timed)
    assert all(seconds is None for _, seconds in order[len(timed) :])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--quick"], "--out is required"),
        (["--out", "x.json", "--quick", "--deadline", "0"], "--deadline must be positive"),
        (["--out", "x.json", "--quick", "--jobs", "0"], "--jobs at least 1"),
        (["--out", "x.json", "--sections", "traces"], "invalid choice"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        gpu_rows.main(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without a GPU")
def test_a_full_run_without_a_gpu_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        gpu_rows.main(["--out", str(tmp_path / "rows.json")])
    assert "no CUDA GPU" in capsys.readouterr().err
