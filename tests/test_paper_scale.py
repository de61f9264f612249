"""Paper-scale results: recorded, written, resumed and spot-checked (flatbook.paper_results), and every committed
results file in book/paper_scale/results recomputed at its cheapest points with the current code."""

import dataclasses
import gzip
import json
import math
from pathlib import Path

import pytest
import torch

from flatbook import paper_results
from flatbook.errors import FlatbookInputError
from flatbook.experiments.runner import cache_counts, map_points, recording_points

#: what the recomputed points of one committed file took when they were computed, at most (CI's minute per file)
SPOT_CHECK_SECONDS = 60.0
COMMITTED = sorted((Path(__file__).resolve().parent.parent / "book" / "paper_scale" / "results").glob("*.json.gz"))


def square_plus(config, x):
    """A point function for the recorder: x² + config (module level, as map_points needs)."""
    return {"value": x * x + config.shift, "x": x}


@dataclasses.dataclass(frozen=True)
class Shift:
    shift: float = 0.5


def test_recording_points_keeps_each_point_with_its_function_result_and_seconds(isolated_cache):
    points = [{"x": 1.0}, {"x": 2.0}]
    with recording_points() as recorded:
        map_points(square_plus, Shift(), points[:1], experiment="symmetry_paradox", jobs=1)
        map_points(square_plus, Shift(), points, experiment="symmetry_paradox", jobs=1)  # the first one cached
    assert [r["point"] for r in recorded] == [{"x": 1.0}, {"x": 1.0}, {"x": 2.0}]
    assert [r["result"]["value"] for r in recorded] == [1.5, 1.5, 4.5]
    assert recorded[0]["seconds"] >= 0 and recorded[1]["seconds"] is None and recorded[2]["seconds"] >= 0
    assert {r["function"] for r in recorded} == {f"{__name__}:square_plus"}
    with recording_points() as outside:
        pass
    map_points(square_plus, Shift(), points, experiment="symmetry_paradox", jobs=1)
    assert outside == []  # nothing is recorded after the block


def test_a_recorded_result_is_what_the_point_computed_whatever_the_caller_does_with_it(isolated_cache):
    """An experiment that adds columns to the rows it got back must not change the committed points: the spot
    check recomputes a point alone and would find the added columns missing."""
    with recording_points() as recorded:
        (result,) = map_points(square_plus, Shift(), [{"x": 3.0}], experiment="symmetry_paradox", jobs=1)
        result["added_later"] = 1.0
    assert recorded[0]["result"] == {"value": 9.5, "x": 3.0}


def first_number(value):
    """(the dict holding it, its key) of the first finite, non-zero float in a JSON value, depth first."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(value, dict) and isinstance(item, float) and math.isfinite(item) and item != 0:
            return value, key
        if isinstance(item, dict | list) and (found := first_number(item)) is not None:
            return found
    return None


@pytest.fixture
def smoke_results(isolated_cache):
    """Chapter 1's smoke scale (two points, well under a second), recorded."""
    return paper_results.run("symmetry_paradox", "smoke", jobs=1, allow_uncommitted=True)


def test_a_run_records_tables_points_and_provenance(smoke_results):
    r = smoke_results
    assert r["complete"] and r["format"] == paper_results.FORMAT and r["scale"] == "smoke"
    assert r["tables"] and r["points"] and r["points_computed"] == len(r["points"]) and r["points_cached"] == 0
    for field in ("code_fingerprint", "versions", "machine", "device", "command", "created_utc", "config"):
        assert r[field], field


def test_written_results_load_back_equal_and_the_same_results_give_the_same_bytes(smoke_results, tmp_path):
    path = paper_results.write(smoke_results, tmp_path / "results" / paper_results.file_name("symmetry_paradox"))
    assert paper_results.load(path) == json.loads(json.dumps(smoke_results))
    assert gzip.decompress(path.read_bytes()).count(b"\n") >= len(smoke_results["points"])  # one point per line
    again = paper_results.write(smoke_results, tmp_path / "again" / path.name)
    assert again.read_bytes() == path.read_bytes()  # no date in the gzip header
    plain = paper_results.write(smoke_results, tmp_path / "plain.json")
    assert paper_results.load(plain) == paper_results.load(path)


def test_the_spot_check_finds_no_difference_with_the_same_code_and_names_a_doctored_number(smoke_results):
    assert paper_results.spot_check(smoke_results, points=2) == []
    doctored = json.loads(json.dumps(smoke_results))
    container, field = first_number(doctored["points"][0]["result"])
    container[field] *= 1 + 1e-4  # far beyond rtol = 1e-6
    found = paper_results.spot_check(doctored, points=len(doctored["points"]))
    assert len(found) == 1 and found[0].where.endswith(f".{field}") and found[0].committed == container[field], found


def test_the_spot_check_refuses_a_changed_configuration(smoke_results):
    changed = json.loads(json.dumps(smoke_results))
    changed["config"]["seed"] = changed["config"].get("seed", 0) + 1
    with pytest.raises(FlatbookInputError, match="scripts/paper_scale.py symmetry_paradox"):
        paper_results.spot_check(changed)


def test_committed_points_resume_into_the_cache_and_are_not_computed_again(smoke_results, tmp_path, monkeypatch):
    monkeypatch.setenv("FLATBOOK_CACHE", str(tmp_path / "fresh-machine"))
    assert paper_results.resume_into_cache(smoke_results) == len(smoke_results["points"])
    before = cache_counts()
    again = paper_results.run("symmetry_paradox", "smoke", jobs=1, allow_uncommitted=True)
    assert cache_counts()["computed"] == before["computed"] and again["points_cached"] == len(again["points"])
    stale = {**smoke_results, "code_fingerprint": "0" * 64}
    assert paper_results.resume_into_cache(stale) == 0  # other code: its points are not this code's


def test_resumed_points_get_back_the_seconds_of_the_run_that_computed_them(smoke_results, tmp_path, monkeypatch):
    monkeypatch.setenv("FLATBOOK_CACHE", str(tmp_path / "fresh-machine"))
    paper_results.resume_into_cache(smoke_results)
    again = paper_results.run("symmetry_paradox", "smoke", jobs=1, allow_uncommitted=True)
    assert all(point["seconds"] is None for point in again["points"])
    stale = {**smoke_results, "code_fingerprint": "0" * 64}
    assert paper_results.carry_over(again, stale) == 0
    assert paper_results.carry_over(again, smoke_results) == len(smoke_results["points"])
    assert [p["seconds"] for p in again["points"]] == [p["seconds"] for p in smoke_results["points"]]
    assert again["points_cached"] == len(again["points"])  # still read from the cache, with their cost known
    assert not any("carried_from" in p for p in again["points"]) and "carried_because" not in again
    assert paper_results.cheapest_points(again, points=1)[0][0]["seconds"] == min(
        p["seconds"] for p in smoke_results["points"]
    )


@pytest.mark.parametrize(
    ("committed", "recomputed", "expected"),
    [
        (1.0, 1.0 + 5e-7, 0),  # within rtol 1e-6
        (1.0, 1.0 + 2e-6, 1),
        (0.0, 5e-10, 0),  # within atol 1e-9
        (float("nan"), float("nan"), 0),
        (float("inf"), float("inf"), 0),
        (float("inf"), 1e300, 1),
        ([1, 2], [1, 2, 3], 1),
        ({"a": 1}, {"b": 1}, 1),
        ("converged", "stalled", 1),
        (True, 1, 1),
    ],
)
def test_differences_at_their_tolerances(committed, recomputed, expected):
    assert len(paper_results.differences(committed, recomputed, rtol=1e-6, atol=1e-9)) == expected


def test_bad_files_and_names_get_clear_errors(tmp_path):
    (tmp_path / "x.json").write_text('{"format": 0}')
    with pytest.raises(FlatbookInputError, match="format"):
        paper_results.load(tmp_path / "x.json")
    with pytest.raises(FlatbookInputError, match="not a readable"):
        paper_results.load(tmp_path / "missing.json")
    (tmp_path / "truncated.json.gz").write_bytes(gzip.compress(b'{"format": 1}')[:-6])
    with pytest.raises(FlatbookInputError, match="not a readable"):
        paper_results.load(tmp_path / "truncated.json.gz")
    with pytest.raises(FlatbookInputError, match="unknown experiment"):
        paper_results.run("no_such_experiment")


@pytest.mark.slow
@pytest.mark.parametrize("path", COMMITTED, ids=[p.stem for p in COMMITTED])
def test_committed_results_are_what_the_current_code_computes(path, isolated_cache):
    """Up to three of the cheapest committed points of each file, as many as took at most a minute when they
    were computed, recomputed: a mismatch names the command to rerun.  A stopped run whose finished points are
    all longer (the largest sizes run first) is checked once it is resumed to its cheap points."""
    results = paper_results.load(path)
    try:
        cheap = paper_results.cheapest_points(results, 3, SPOT_CHECK_SECONDS)
    except FlatbookInputError:  # another paper configuration: a complete run must be rerun, a stopped one restarted
        if results["complete"]:
            raise
        pytest.skip(f"{path.name}: stopped, of another paper configuration than the current code's")
    if not cheap:
        assert not results["complete"], f"{path.name}: a complete run has no cheap point whose configuration it tells"
        pytest.skip(f"{path.name}: stopped, none of its finished points took less than {SPOT_CHECK_SECONDS:.0f} s")
    found = paper_results.spot_check(results, 3, SPOT_CHECK_SECONDS)
    assert not found, (
        f"{path.name}: {len(found)} numbers differ from the current code, e.g. {found[0]}; "
        f"regenerate with python scripts/paper_scale.py {results['experiment']}"
    )


def test_the_results_folder_is_found_from_the_root_from_book_and_from_a_folder_below(tmp_path):
    root = Path(__file__).resolve().parent.parent
    expected = root / "book" / "paper_scale" / "results"
    for start in (root, root / "book", root / "book" / "api"):
        assert paper_results.results_folder(start) == expected
    with pytest.raises(FlatbookInputError, match="no book/paper_scale/results"):
        paper_results.results_folder(tmp_path)


def test_missing_committed_results_name_the_command_that_computes_them(tmp_path):
    (tmp_path / "book" / "paper_scale" / "results").mkdir(parents=True)
    with pytest.raises(FlatbookInputError, match="python scripts/paper_scale.py convex_dual"):
        paper_results.committed("convex_dual", start=tmp_path)


def test_a_chapter_reads_only_a_complete_run_of_the_current_paper_configuration(smoke_results, tmp_path):
    from flatbook.experiments import symmetry_paradox

    folder = tmp_path / "book" / "paper_scale" / "results"
    paper_config = json.loads(json.dumps(dataclasses.asdict(symmetry_paradox.CONFIGS["paper"])))
    paper_run = {**smoke_results, "scale": "paper", "config": paper_config}
    path = folder / paper_results.file_name("symmetry_paradox")
    paper_results.write(paper_run, path)
    assert paper_results.complete_run("symmetry_paradox", start=tmp_path)["config"] == paper_config
    paper_results.write({**paper_run, "config": smoke_results["config"]}, path)
    with pytest.raises(FlatbookInputError, match="another paper configuration.*--again"):
        paper_results.complete_run("symmetry_paradox", start=tmp_path)
    paper_results.write({**paper_run, "complete": False, "tables": None}, path)
    with pytest.raises(FlatbookInputError, match="stopped with .* points done: resume it"):
        paper_results.complete_run("symmetry_paradox", start=tmp_path)


def test_the_run_status_says_whether_a_run_is_missing_of_another_configuration_stopped_or_complete(
    smoke_results, tmp_path
):
    from flatbook.experiments import symmetry_paradox

    folder = tmp_path / "book" / "paper_scale" / "results"
    folder.mkdir(parents=True)
    command = "python scripts/paper_scale.py symmetry_paradox"
    assert (
        paper_results.run_status("symmetry_paradox", start=tmp_path)
        == f"have not been computed ({command} computes them)"
    )
    path = folder / paper_results.file_name("symmetry_paradox")
    paper_results.write(smoke_results, path)  # the smoke configuration, not the paper's
    assert paper_results.run_status("symmetry_paradox", start=tmp_path) == (
        f"are of another paper configuration ({command} --again recomputes them)"
    )
    paper_config = json.loads(json.dumps(dataclasses.asdict(symmetry_paradox.CONFIGS["paper"])))
    paper_run = {**smoke_results, "scale": "paper", "config": paper_config}
    done = f"with {len(smoke_results['points'])} points computed"
    paper_results.write({**paper_run, "complete": False, "tables": None, "failure": "SolverError: x."}, path)
    assert paper_results.run_status("symmetry_paradox", start=tmp_path) == (
        f"were stopped by SolverError: x, {done} ({command} resumes from them once the cause is fixed)"
    )
    paper_results.write({**paper_run, "complete": False, "tables": None, "failure": None}, path)
    stopped = paper_results.run_status("symmetry_paradox", start=tmp_path)
    assert stopped == f"were stopped {done} ({command} resumes them)"
    paper_results.write(paper_run, path)
    assert paper_results.run_status("symmetry_paradox", start=tmp_path) == "are complete"
    with pytest.raises(FlatbookInputError, match="unknown experiment"):
        paper_results.run_status("no_such_experiment", start=tmp_path)


def test_the_provenance_names_the_command_commit_and_whether_the_code_is_current(smoke_results):
    results = {**smoke_results, "git_commit": "a" * 40, "wall_time_s": 90.0}
    sentence = paper_results.provenance(results)
    assert "`python scripts/paper_scale.py symmetry_paradox`" in sentence and "`aaaaaaaaaaaa`" in sentence
    assert f"in 1.5 minutes (its {len(results['points'])} points took" in sentence
    assert "the current computing code" in sentence
    older = paper_results.provenance({**results, "code_fingerprint": "0" * 64})
    assert "an older computing code" in older


def test_the_provenance_of_a_resumed_run_gives_its_last_invocation_and_the_points_summed_time(smoke_results):
    points = [{**point, "seconds": 5400.0} for point in smoke_results["points"]]
    resumed = {**smoke_results, "points": points, "points_cached": len(points), "wall_time_s": 60.0}
    sentence = paper_results.provenance(resumed)
    assert f"in 1.0 minutes of its last invocation, which resumed {len(points)} points from earlier runs" in sentence
    assert f"(its {len(points)} points took {1.5 * len(points):.1f} hours of computing, summed over them)" in sentence
    unknown = paper_results.provenance({**resumed, "points": [{**points[0], "seconds": None}, *points[1:]]})
    assert "hours of computing" not in unknown
    assert f"(the computing time of 1 of its {len(points)} points is not recorded)" in unknown


def test_points_of_older_code_resume_only_where_declared_and_say_which_code_computed_them(
    smoke_results, tmp_path, monkeypatch
):
    """Older code's points stand for the current code's only under a declaration naming both fingerprints; the
    resumed file marks each such point with the code that computed it, keeps the mark through a later resume,
    and its provenance counts them with the declared reason."""
    current = smoke_results["code_fingerprint"]
    older = {**smoke_results, "code_fingerprint": "0" * 64}
    monkeypatch.setenv("FLATBOOK_CACHE", str(tmp_path / "fresh-machine"))
    assert paper_results.resume_into_cache(older) == 0  # undeclared
    monkeypatch.setitem(paper_results.SAME_FINISHED_POINTS, ("symmetry_paradox", "1" * 64, "0" * 64), "elsewhere")
    assert paper_results.resume_into_cache(older) == 0  # declared for another current code
    monkeypatch.setitem(paper_results.SAME_FINISHED_POINTS, ("symmetry_paradox", current, "0" * 64), "a reason")
    assert paper_results.resume_into_cache(older) == len(older["points"])
    before = cache_counts()
    again = paper_results.run("symmetry_paradox", "smoke", jobs=1, allow_uncommitted=True)
    assert cache_counts()["computed"] == before["computed"]  # none computed again
    assert paper_results.carry_over(again, older) == len(older["points"])
    assert [p["carried_from"] for p in again["points"]] == ["0" * 64] * len(older["points"])
    assert again["carried_because"] == {"0" * 64: "a reason"} and again["code_fingerprint"] == current
    sentence = paper_results.provenance(again)
    assert f"{len(older['points'])} of its points were computed by older code (fingerprint `00000000`)" in sentence
    assert "declared to compute them as the code that wrote the file does (a reason) and checked" in sentence
    third = paper_results.run("symmetry_paradox", "smoke", jobs=1, allow_uncommitted=True)  # resumed from `again`
    assert paper_results.carry_over(third, again) == len(older["points"])
    assert [p["carried_from"] for p in third["points"]] == ["0" * 64] * len(older["points"])
    assert third["carried_because"] == again["carried_because"]
    # a file that itself carried points, of code declared identical in its turn: both reasons stand, in order
    between = {**again, "code_fingerprint": "2" * 64}
    monkeypatch.setitem(paper_results.SAME_FINISHED_POINTS, ("symmetry_paradox", current, "2" * 64), "another")
    fourth = paper_results.run("symmetry_paradox", "smoke", jobs=1, allow_uncommitted=True)
    assert paper_results.carry_over(fourth, between) == len(older["points"])
    assert [p["carried_from"] for p in fourth["points"]] == ["0" * 64] * len(older["points"])
    assert fourth["carried_because"] == {"0" * 64: "a reason; then another"}


def test_points_of_older_code_are_checked_on_their_cheapest_before_any_is_resumed(smoke_results, tmp_path, monkeypatch):
    """The declaration is checked on data each time it is used: the cheapest older point is recomputed, and a
    difference (here a doctored number), or no point that can be recomputed, raises before any point is resumed."""
    monkeypatch.setenv("FLATBOOK_CACHE", str(tmp_path / "fresh-machine"))
    key = ("symmetry_paradox", smoke_results["code_fingerprint"], "0" * 64)
    monkeypatch.setitem(paper_results.SAME_FINISHED_POINTS, key, "a reason")
    doctored = json.loads(json.dumps({**smoke_results, "code_fingerprint": "0" * 64}))
    cheapest = min(doctored["points"], key=lambda point: point["seconds"])
    container, field = first_number(cheapest["result"])
    container[field] *= 1 + 1e-3
    with pytest.raises(FlatbookInputError, match="declared to be what the current code computes .a reason., but"):
        paper_results.resume_into_cache(doctored)
    assert not list((tmp_path / "fresh-machine").rglob("*.json"))  # nothing resumed
    untimed = {**doctored, "points": [{**point, "seconds": None} for point in doctored["points"]]}
    with pytest.raises(FlatbookInputError, match="none of them can be recomputed to check it"):
        paper_results.resume_into_cache(untimed)


def test_a_file_whose_older_points_lack_their_reason_is_refused(smoke_results, tmp_path):
    points = [{**point, "carried_from": "0" * 64} for point in smoke_results["points"]]
    path = paper_results.write({**smoke_results, "points": points}, tmp_path / "unexplained.json.gz")
    with pytest.raises(FlatbookInputError, match="older code .00000000. without the reason"):
        paper_results.load(path)


def test_each_declaration_of_identically_computed_points_names_the_current_code_of_its_experiment():
    """A declaration tied to code that has since changed applies to nothing: remove it (the files it resumed
    keep, point by point, which code computed what, and why)."""
    from flatbook.experiments.runner import experiment_fingerprint

    for (experiment, current, older), reason in paper_results.SAME_FINISHED_POINTS.items():
        assert current == experiment_fingerprint(experiment), (experiment, current)
        assert older != current and len(older) == 64 and reason


def test_the_fingerprint_is_of_the_code_the_run_started_with(isolated_cache, monkeypatch):
    """Source files edited while a long run goes on must not be credited with its numbers."""
    calls = iter(["started-with", "edited-meanwhile", "edited-meanwhile"])
    monkeypatch.setattr(paper_results, "experiment_fingerprint", lambda experiment: next(calls))
    results = paper_results.run("symmetry_paradox", "smoke", jobs=1, allow_uncommitted=True)
    assert results["code_fingerprint"] == "started-with"


@pytest.mark.parametrize(
    "error",
    [
        "SolverError: HiGHS stopped with status 'Time limit reached' on the restricted master.",
        "LinAlgError: torch.linalg.lstsq: The least squares solution could not be computed",
    ],
)
def test_a_point_the_code_cannot_compute_stops_the_run_with_its_finished_points_and_the_cause(
    isolated_cache, monkeypatch, error
):
    """A solver's error, or one raised inside the numerical library (a torch RuntimeError such as LinAlgError),
    stops the run with the points that finished, so that the next run resumes from them."""
    from flatbook.errors import SolverError
    from flatbook.experiments import symmetry_paradox

    kind, message = error.split(": ", 1)
    exception = SolverError(message) if kind == "SolverError" else torch.linalg.LinAlgError(message)

    def failing_run(config, jobs=None):
        map_points(square_plus, Shift(), [{"x": 1.0}], experiment="symmetry_paradox", jobs=1)  # one finishes
        raise exception

    monkeypatch.setattr(symmetry_paradox, "run", failing_run)
    results = paper_results.run("symmetry_paradox", "smoke", jobs=1, allow_uncommitted=True)
    assert not results["complete"] and results["tables"] is None and len(results["points"]) == 1
    assert results["failure"].lstrip("_") == error  # torch's class is _LinAlgError


def noise_plus(config, x):
    """A point function that reads a field a sweep changes (module level, as map_points needs)."""
    return {"value": x + config.noise_std}


@pytest.fixture
def swept_results(isolated_cache, monkeypatch):
    """A run whose sweep runs one point under the experiment's configuration and under one with another noise_std,
    as chapter 5's noise and width sweeps do."""
    from flatbook.experiments import symmetry_paradox

    def sweeping_run(config, jobs=None):
        for noise_std in (config.noise_std, 0.7):
            map_points(
                noise_plus,
                dataclasses.replace(config, noise_std=noise_std),
                [{"x": 1.0}],
                experiment="symmetry_paradox",
                jobs=1,
            )
        return {"rows": []}

    monkeypatch.setattr(symmetry_paradox, "run", sweeping_run)
    return paper_results.run("symmetry_paradox", "smoke", jobs=1, allow_uncommitted=True)


def test_a_swept_point_is_committed_with_the_configuration_it_ran_under(swept_results):
    points = swept_results["points"]
    assert [p["config_changes"] for p in points] == [{}, {"noise_std": 0.7}]
    assert [p["result"]["value"] for p in points] == [1.0 + swept_results["config"]["noise_std"], 1.7]


def test_swept_points_resume_under_their_own_configuration(swept_results, tmp_path, monkeypatch):
    """Each point goes back under its own key: one configuration's result never stands for another's."""
    monkeypatch.setenv("FLATBOOK_CACHE", str(tmp_path / "fresh-machine"))
    assert paper_results.resume_into_cache(swept_results) == 2
    before = cache_counts()
    again = paper_results.run("symmetry_paradox", "smoke", jobs=1, allow_uncommitted=True)
    assert cache_counts()["computed"] == before["computed"]
    assert [p["result"] for p in again["points"]] == [p["result"] for p in swept_results["points"]]


def test_the_spot_check_recomputes_a_swept_point_under_its_configuration(swept_results):
    assert paper_results.spot_check(swept_results, points=2) == []
    doctored = json.loads(json.dumps(swept_results))
    doctored["points"][1]["result"]["value"] += 1e-3
    found = paper_results.spot_check(doctored, points=2)
    assert len(found) == 1 and found[0].committed == doctored["points"][1]["result"]["value"]


def test_points_recorded_without_their_configuration_are_used_only_where_the_file_tells_it(swept_results):
    """Without ``config_changes``, a point whose function and arguments occur twice has no known configuration:
    it is neither resumed nor spot-checked (under the run's configuration the swept one would fail the check,
    and resumed it would stand for the other in the cache); a point that occurs once ran under the run's."""
    without = json.loads(json.dumps(swept_results))
    for point in without["points"]:
        del point["config_changes"]
    assert paper_results.resume_into_cache(without) == 0
    assert paper_results.cheapest_points(without, points=2) == []
    without["points"] = without["points"][:1]
    assert paper_results.resume_into_cache(without) == 1
    assert len(paper_results.cheapest_points(without)) == 1 and paper_results.spot_check(without) == []


def test_a_point_whose_changes_name_fields_the_configuration_lacks_is_not_used(swept_results):
    """Changes that name a field the experiment's configuration does not have come from another kind of
    configuration: such a point is neither resumed nor spot-checked (rebuilding it would raise)."""
    foreign = json.loads(json.dumps(swept_results))
    foreign["points"][1]["config_changes"] = {"no_such_field": 1.0}
    assert paper_results.resume_into_cache(foreign) == 1
    assert [entry["point"] for entry, _ in paper_results.cheapest_points(foreign, points=2)] == [{"x": 1.0}]
