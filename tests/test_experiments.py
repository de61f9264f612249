"""The chapter experiments at smoke scale: they run, their tables hold what the chapters assert."""

import dataclasses
import itertools
import math

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from flatbook.errors import FlatbookInputError
from flatbook.experiments import SCALES, config_for, convex_dual, current_scale, flattest_generalise, symmetry_paradox
from flatbook.figures import REGISTRY


def assert_draws_its_figures(experiment, tables):
    """Every figure registered for ``experiment`` draws from its tables, with data on every axes."""
    specs = [spec for spec in REGISTRY.values() if spec.experiment_module is experiment]
    assert specs
    for spec in specs:
        fig = spec.draw(tables)
        assert isinstance(fig, Figure), spec.id
        assert all(ax.has_data() for ax in fig.axes), spec.id


def test_scales(monkeypatch):
    monkeypatch.delenv("FLATBOOK_SCALE", raising=False)
    assert current_scale() == "book"
    monkeypatch.setenv("FLATBOOK_SCALE", "smoke")
    assert config_for(symmetry_paradox.CONFIGS) == symmetry_paradox.CONFIGS["smoke"]
    monkeypatch.setenv("FLATBOOK_SCALE", "huge")
    with pytest.raises(
        FlatbookInputError, match="FLATBOOK_SCALE='huge' is not a scale; choose one of smoke, book, paper"
    ):
        current_scale()
    for module in (symmetry_paradox, convex_dual):
        assert tuple(module.CONFIGS) == SCALES


@pytest.fixture(scope="module")
def paradox():
    return symmetry_paradox.run(symmetry_paradox.CONFIGS["smoke"])


@pytest.fixture(scope="module")
def dual():
    return convex_dual.run(convex_dual.CONFIGS["smoke"])


def test_symmetry_paradox_tables(paradox):
    rows = {(r["activation"], r["interpolator"]): r for r in paradox["interpolators"]}
    assert set(rows) == {(a, k) for a in ("relu", "quadratic") for k in ("good", "bad")}
    for name in ("relu", "quadratic"):
        good, bad = rows[(name, "good")], rows[(name, "bad")]
        assert good["population_loss"] < bad["population_loss"]
        assert good["upsilon"] < bad["upsilon"]
        assert good["trace_sharpened"] > bad["trace_at_optimum"]
        assert bad["alignment_of_weighted_neurons"] < 1e-10
    for row in paradox["interpolators"]:
        assert row["fresh_output_change"] < 1e-10
        assert row["train_residual"] < 1e-10
        assert row["trace_at_optimum"] == pytest.approx(row["upsilon"], rel=1e-10)
    # (The curves' "formula" is computed from the same coefficients as "trace": comparing them would test the
    # code against itself; tests/test_flatness.py checks the trace against autograd.)
    assert all(isinstance(v, (str, int, float)) for row in paradox["interpolators"] for v in row.values())


def test_convex_dual_tables(dual):
    config = convex_dual.CONFIGS["smoke"]
    for row in dual["solutions"]:
        assert abs(row["duality_gap"]) < 1e-9
        # Υ / Σ|ã|^p is a κ-weighted mean of the κ_j, so it lies in [min κ, max κ] for any weights: no check.
    assert len(dual["others"]) == config.n_other * len(config.activations)
    relu = [r for r in dual["balancedness"] if r["activation"] == "relu"]
    assert all(r["support"] <= config.n for r in relu)
    assert [r["m"] for r in relu] == list(config.widths)


def test_plots_return_figures(paradox, dual):
    assert_draws_its_figures(symmetry_paradox, paradox)
    assert_draws_its_figures(convex_dual, dual)


@pytest.mark.slow  # runs chapter 3's smoke-scale experiment (about 40 s) unless a figure test already ran it
def test_bad_interpolators_tables(smoke_cache, monkeypatch):
    from flatbook.experiments import bad_interpolators

    monkeypatch.setenv("FLATBOOK_CACHE", str(smoke_cache))  # the figures of chapter 3 draw the same run

    config = bad_interpolators.CONFIGS["smoke"]
    tables = bad_interpolators.run(config)
    for sweep in ("certified", "noisy", "relu_high_d", "quadratic", "quadratic_regime"):
        rows = tables[sweep]
        assert {r["method"] for r in rows} == {"best", "bad"}
        for row in rows:
            assert row["lower"] <= row["upper"] * (1 + 1e-9), row  # a proven lower bound never exceeds a network's Υ
            if row.get("certificate_upsilon") is not None:
                assert row["certificate_upsilon"] <= row["upper"] * (1 + 1e-9), row
    # ρ0 = 0 in d = 3 is a great circle: pricing is exact and both ends of the bracket are proven.
    assert {r["pricing"] for r in tables["certified"] if r["method"] == "best" or r["rho"] == 0.0} == {"exact"}
    for row in tables["ratios"]:
        if row["sweep"] != "certificate":
            # the proven end is floored at the trivial 1 (the bad set is a subset), which the estimate need not be
            assert row["proven"] <= max(1.0, row["estimate"]) * (1 + 1e-9), row
            assert row["estimate"] <= row["outer"] * (1 + 1e-8), row
    fitted = {(r["sweep"], r["rho"], r["ratio"]) for r in tables["slopes"]}
    assert {("certified", 0.0, "proven"), ("certificate", 0.0, "certificate")} <= fitted
    assert all(r["from_n_over_d"] == config.fit_from_n_over_d for r in tables["slopes"])
    for row in tables["slopes"] + tables["local_slopes"]:
        # an interval from several seeds around the mean (a point where every seed's slope is the same, e.g. ratios
        # at the trivial floor 1 on every seed)
        assert row["low"] <= row["slope"] <= row["high"]
    local = [r for r in tables["local_slopes"] if r["sweep"] == "certified" and r["ratio"] == "proven"]
    assert len(local) == 2 * (len(config.certified_n_grid) - 1)  # two alignments, consecutive n
    assert all(math.isfinite(r["memorising_upsilon"]) for r in tables["certified"])
    # ρ0 = 0 in d = 4: the bad set is a 2-sphere, priced exactly; the flattest interpolator by bounds.
    assert {r["pricing"] for r in tables["exact_bad"] if r["method"] == "bad"} == {"exact"}
    for row in tables["relu_high_d"]:  # the memorising network, where it exists, interpolates with Υ of eq-memorising
        if math.isfinite(row["memorising_bad_upsilon"]):
            assert row["memorising_bad_upsilon"] == pytest.approx(row["memorising_upsilon"], rel=1e-9)
    # Label noise: the teacher does not interpolate, so upper(best) is the network found, never the teacher's Υ.
    assert {r["noise"] for r in tables["noisy"]} == {config.noise_std} and config.noise_std > 0
    for row in (r for r in tables["ratios"] if r["sweep"] == "noisy"):
        assert math.isnan(row["teacher_upsilon"]) and row["proven"] <= max(1.0, row["estimate"]) * (1 + 1e-9)
    # The proposition's terms on the great circle: its chain, left to right, and its bound B_n(δ).
    for row in tables["certificate"]:
        assert row["certificate_sup"] <= row["process_sup"] / row["kappa_perp_min"] * (1 + 1e-6), row
        assert row["process_sup"] <= row["lambda_norm"] * row["process_bound"], row
    # The memorising regime: fractions in [0, 1], and every sample isolated while n ≤ d − 1 (almost surely).
    for row in tables["memorising"]:
        assert 0 <= row["isolated_fraction"] <= 1 and 0 < row["cover_probability"] <= 1
        assert isinstance(row["first_isolated"], bool) and (row["first_isolated"] or not row["all_isolated"])
        if row["n"] <= row["d"] - 1:
            assert row["all_isolated"] and row["cover_probability"] == 1.0
    assert_draws_its_figures(bad_interpolators, tables)


def test_flattest_generalise_tables():

    config = flattest_generalise.CONFIGS["smoke"]
    tables = flattest_generalise.run(config)
    runs = tables["runs"]
    assert len(runs) == len(config.conditions) * len(config.n_grid) * config.seeds * 2
    for row in runs:
        assert row["train_residual"] < 1e-6 and row["certified_factor"] >= 1 - 1e-9
        assert row["excess"] >= row["approximation_error"] - 1e-12  # the residual is unlearnable (eq-residual)
        assert row["path_norm"] <= row["upsilon"] / row["net_kappa_min"] * (1 + 1e-9)  # eq-path-norm
    # every slope is fitted over every size and seed, with its local slopes between consecutive sizes
    for rate in tables["rates"]:
        assert rate["sizes"] == len(config.n_grid) and rate["seeds"] == config.seeds
        assert rate["low"] <= rate["rate"] <= rate["high"]
    steps = [r for r in tables["local_rates"] if r["condition"] == "noiseless" and r["method"] == "flattest"]
    assert [(s["x_from"], s["x_to"]) for s in steps] == list(itertools.pairwise(config.n_grid))
    # the near-flattest range on every dataset of its conditions: floor ≤ the solver's ≤ the worst found
    near = tables["near"]
    assert len(near) == len(config.near_conditions) * len(config.n_grid) * config.seeds * len(config.slacks)
    for row in near:
        assert row["floor"] <= row["flattest"] + 1e-9 and row["flattest"] <= row["worst"] + 1e-9
        assert row["worst_upsilon"] <= (1 + row["slack"]) * row["flattest_upsilon"] * (1 + 1e-9)
    # the verdict reads the primary outcome's interval: the slope of (F − F*)/τ² with fixed noise, per interpolator
    assert {v["method"] for v in tables["verdicts"]} >= {"flattest", "control"}
    primary = {(r["condition"], r["method"]): r for r in tables["rates"] if r["outcome"] == "excess/τ²"}
    for v in tables["verdicts"]:
        assert v["condition"] == "fixed noise"
        rate = primary[v["condition"], v["method"]]
        assert (v["rate"], v["low"], v["high"]) == (rate["rate"], rate["low"], rate["high"]), (v, rate)
    # the noise's dual bound is below the flattest measure (weak duality, eq-noise-dual)
    for row in runs:
        if row["noise_variance"] > 0 and row["method"] == "flattest":
            assert row["noise_dual_bound"] <= row["measure_upper"] * (1 + 1e-9)
            # the noise off the teacher's features: λᵀy = ‖P⊥ξ‖² > 0, never vacuous; the bound keeps the larger
            assert row["noise_dual_projected"] > 0
            assert row["noise_dual_bound"] == max(row["noise_dual_projected"], row["noise_dual_plain"])
    for row in tables["rademacher"]:  # eq-rademacher, where the data leave no direction dead
        assert row["complexity"] <= row["bound"]
    for row in runs:  # κ_inf, exact, is below κ at every direction of every network
        assert row["kappa_inf"] <= row["net_kappa_min"] * (1 + 1e-9)
    # the deeper search starts from the same dataset: its sweep-like worst is the sweep's own, to round-off
    depth = tables["search_depth"]
    datasets = flattest_generalise._points("fixed noise", config, config.depth_n)
    assert [r["seed"] for r in depth] == [p["seed"] for p in datasets]
    sweep = {r["seed"]: r for r in near if r["condition"] == "fixed noise" and r["n"] == config.depth_n}
    for row in depth:
        assert row["slack"] == config.slacks[-1]
        assert row["worst"] == pytest.approx(sweep[row["seed"]]["worst"], rel=1e-9)
        assert row["dictionary"] < row["deep_dictionary"] <= row["dictionary"] + config.depth_directions
    assert flattest_generalise.predicted_rate("noise, τ² ∝ n^-1/4") == -0.25
    assert flattest_generalise.predicted_rate("noiseless") == -0.5
    assert flattest_generalise.predicted_rate("fixed residual") == 0.0
    assert_draws_its_figures(flattest_generalise, tables)


def test_the_largest_path_norm_rows_bracket_every_member_found():
    """Without noise, the member of largest path norm at a slack: its path norm lies at most at the search's bound,
    which lies above the path norm of the set's other measures found at that slack (the solver's network and the
    worst-excess member), and below the bound of eq-path-norm-teacher; the largest over networks is at least the
    largest over measures and at least the solver's network plus a cancelling pair on κ_inf's direction (which the
    dictionary holds), at most B/κ_inf; with noise no such row."""
    config = dataclasses.replace(flattest_generalise.CONFIGS["smoke"], slacks=(0.05,), path_norm_slacks=(0.05,))
    rows = flattest_generalise._point(config, 0.0, 0.0, 12, 0, near=True)
    (path,) = [r for r in rows if r["method"] == "path"]
    (near,) = [r for r in rows if r["method"] == "near"]
    (flattest,) = [r for r in rows if r["method"] == "flattest"]
    from flatbook.near_flattest import PATH_NORM_MARGIN
    from flatbook.relu_cells import INSIDE_KAPPA_TOL

    margin = 1 + PATH_NORM_MARGIN  # the linear programs' tolerances
    assert path["optimal"] and path["path_norm"] <= path["path_norm_bound"] * margin
    for member in (near["worst_path_norm"], flattest["path_norm"]):  # measures of the set: below the bound
        assert member <= path["path_norm_bound"] * margin
    assert path["network_path_norm"] * margin >= path["path_norm"]  # every measure is a network too
    # the dictionary holds κ_inf's direction: at least the solver's network plus a cancelling pair there that spends
    # the rest of the budget (1e-6: κ at the direction nudged off its hyperplanes), at most B/κ_inf (every network)
    budget = (1 + path["slack"]) * path["flattest_upsilon"]
    assert path["kappa_inf"] > 0, "these samples must lie in no half-space: choose a seed where they do not"
    with_pair = flattest["path_norm"] + (budget - flattest["upsilon"]) / path["kappa_inf"]
    assert (
        with_pair * (1 - INSIDE_KAPPA_TOL) / margin <= path["network_path_norm"] <= budget / path["kappa_inf"] * margin
    )
    assert path["kappa_inf"] * (1 - 1e-9) <= path["dictionary_kappa_min"] <= path["kappa_inf"] * (1 + INSIDE_KAPPA_TOL)
    assert path["upsilon"] <= 1.05 * path["flattest_upsilon"] * (1 + 1e-9)
    assert flattest["stop"] == "converged"
    ceiling = 1.05 * (1 + config.tol) * path["teacher_upsilon"] / path["kappa_min"]  # eq-path-norm-teacher
    assert path["path_norm"] <= ceiling * (1 + 1e-9)
    noisy = flattest_generalise._point(config, 0.3, 0.0, 12, 0, near=True)
    assert not [r for r in noisy if r["method"] == "path"]


def test_the_noise_sizes_follow_the_schedule():
    """τ² follows eq-rate-terms, τ₀² (n/n₀)^{−ε₂}, and the noise conditions share their data at n₀."""
    from flatbook.experiments import flattest_generalise as experiment

    config = experiment.CONFIGS["smoke"]
    n0, n1 = config.n_grid[0], config.n_grid[-1]
    for name, exponent in (("fixed noise", 0.0), ("noise, τ² ∝ 1/n", 1.0)):
        tau, eta = experiment._sizes(name, config, n1)
        assert tau**2 == pytest.approx(config.noise_std0**2 * (n0 / n1) ** exponent) and eta == 0.0
    shared = [experiment._dataset(p) for p in experiment._points("fixed noise", config, n0)]
    assert shared == [experiment._dataset(p) for p in experiment._points("noise, τ² ∝ 1/n", config, n0)]


def test_verdict_reads_the_interval_of_the_slope():
    from flatbook.experiments.flattest_generalise import DELTA, verdict

    assert verdict(-0.2, 0.2) == "level" and verdict(-DELTA, DELTA) == "level"
    assert verdict(-1.0, -0.1) == "falling" and verdict(0.1, 2.0) == "growing"
    assert verdict(-1.0, 0.5) == "undecided" and verdict(-0.1, 0.3) == "undecided"
    with pytest.raises(FlatbookInputError, match="low <= high"):
        verdict(1.0, -1.0)


def test_the_half_space_program_agrees_with_a_grid_of_directions_in_the_plane():
    """Whether n points lie in an open half-plane through 0, exactly (an LP) and over 20 000 angles: four Gaussian
    points do so with probability 1/2 (Wendel), so both answers occur; one point and its negative never do."""
    angles = np.linspace(0.0, 2 * np.pi, 20_000, endpoint=False)
    grid = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    answers = []
    for seed in range(40):
        X = np.random.default_rng(seed).standard_normal((4, 2))
        answers.append(flattest_generalise.in_half_space(X))
        assert answers[-1] == bool(((X @ grid.T) < 0).all(axis=0).any()), seed
    assert 0 < sum(answers) < len(answers)
    assert not flattest_generalise.in_half_space(np.array([[1.0, 2.0], [-1.0, -2.0]]))
    assert flattest_generalise.in_half_space(torch.tensor([[1.0, 2.0], [2.0, 3.0]], dtype=torch.float64))


def test_median_interval_is_the_order_statistic_interval():
    from scipy import stats

    from flatbook.experiments.flattest_generalise import median_interval, trimmed_mean

    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    # five values: the widest interval (the range) covers 1 − 2/32 = 93.75 % < 95 %, reported as such
    assert median_interval(values) == (3.0, 1.0, 5.0, pytest.approx(1 - 2 / 32))
    # n = 20: the 95 % interval is (x_(6), x_(15)), coverage 1 − 2 P(Bin(20, 1/2) ≤ 5)
    values = list(range(1, 21))
    median, low, high, coverage = median_interval(values)
    assert (median, low, high) == (10.5, 6, 15) and coverage == pytest.approx(1 - 2 * stats.binom.cdf(5, 20, 0.5))
    assert coverage >= 0.95 > 1 - 2 * stats.binom.cdf(6, 20, 0.5)  # the next narrower one covers too little
    assert trimmed_mean([0.0, 1.0, 2.0, 3.0, 1000.0]) == pytest.approx(2.0)  # 20 % cut at each end
    with pytest.raises(FlatbookInputError):
        median_interval([1.0])


def test_mirror_flow_tables():
    import math

    from flatbook.experiments import mirror_flow

    config = mirror_flow.CONFIGS["smoke"]
    tables = mirror_flow.run(config)
    labels = [label for label, _, _ in mirror_flow.MAIN_POTENTIALS]
    mixed = {pair[0] for pair in mirror_flow.MIXED_POTENTIALS}
    assert {r["potential"] for r in tables["solutions"]} == {*labels, *mixed}
    for row in tables["solutions"]:
        assert row["train_accuracy"] == 1.0 and row["loss"] <= config.target_loss
        assert row["neuron_weights"] == sorted(row["neuron_weights"], reverse=True)
        assert 1 <= row["active"] <= config.m and "parameters" not in row
        assert all(row[f"cost_margin {g}"] > 0 for g in mirror_flow.GEOMETRIES)
    for label in labels:  # the balance drift shrinks with the step (first order), for every seed
        for seed in range(config.seeds):
            rows = sorted(
                (r for r in tables["balance"] if r["potential"] == label and r["seed"] == seed), key=lambda r: r["step"]
            )
            assert len(rows) == len(config.balance_steps) and rows[0]["drift"] < rows[-1]["drift"]
    # the KKT residual at every loss level of every main run (none for the mixed pair: two horizon degrees)
    levels = {(p, level) for p in labels for level in config.kkt_losses}
    assert {(r["potential"], r["level"]) for r in tables["kkt"]} == levels
    for row in tables["kkt"]:  # relative residuals of the own problem and, in one window, of every main problem
        residuals = [row["relative"], *(row[f"window {label}"] for label in labels)]
        columns = {key for key in row if key.startswith("balanced ")}
        assert columns == {f"balanced {label}" for label in labels}, row  # the ℓ1 problem's too
        residuals += [row[key] for key in columns]
        l1 = [label for label in labels if mirror_flow.run_potentials(label)[0].horizon_degree == 1]
        for label in l1:  # the ℓ1 problem: its support's size and the residual at each zero mass
            assert 1 <= row[f"nonzero {label}"] <= config.m * (config.d + 1), row
            masses = [row[f"window {label} zero mass {mass:g}"] for mass in config.kkt_zero_masses]
            assert row[f"window {label} zero mass {config.kkt_zero_mass:g}"] == row[f"window {label}"], row
            residuals += masses
        assert all(0 <= r <= 1 + 1e-9 for r in residuals) and row["loss"] <= row["level"], row
        assert row["window_slack"] == pytest.approx(math.log(config.kkt_weight_ratio) / row["g"])
    assert tables["rates"] and {r["potential"] for r in tables["rates"]} <= {*labels, *mixed}  # runs long enough
    assert all(math.isfinite(r["dual_exponent"]) and r["dual_exponent"] > 0 for r in tables["rates"])
    assert [(r["beta"], r["seed"]) for r in tables["sparsification"]] == [(b, 0) for b in (None, *config.betas)]
    gd = tables["sparsification"][0]
    assert gd["cosine_with_gd"] == pytest.approx(1.0) and gd["target_active"] >= 1
    # the sparse level comes from gradient descent's count, the dense reference outside the sweep of β
    assert all(
        r["target_active"] == math.floor(config.sparse_fraction * gd["final_active"]) for r in tables["sparsification"]
    )
    widths = {(r["beta"], r["width"]) for r in tables["alignment"]}
    assert widths == {*((b, config.m) for b in config.betas), *((config.width_beta, w) for w in config.widths)}
    for row in tables["alignment"]:  # aligned at the start: time 0; never: inf; else within the run
        assert (
            row["time"] == 0
            if row["aligned_at_start"]
            else 0 < row["time"] <= row["final_time"] or math.isinf(row["time"])
        )
    assert len(tables["cosines"]) == 10 * config.seeds + 3 * config.seeds  # 5 runs per seed; 3 same-horizon runs
    assert {r["potential"] for r in tables["horizon"]} == {label for label, _, _ in mirror_flow.HORIZON_POTENTIALS}
    assert {r["pruned"] for r in tables["digits"]} == {"neurons", "weights"}
    assert {r["seed"] for r in tables["digits"]} == set(range(config.digits_seeds))
    assert_draws_its_figures(mirror_flow, tables)


def test_prune_removes_the_smallest_neurons_and_weights():
    import torch

    from flatbook import TwoLayerNet
    from flatbook.experiments.mirror_flow import prune

    net = TwoLayerNet(
        torch.tensor([4.0, -0.1, 2.0, 0.5], dtype=torch.float64),
        torch.tensor([[1.0, 0.2], [3.0, 0.0], [0.5, -0.5], [1.0, 1.0]], dtype=torch.float64),
    )
    half = prune(net, 0.5, "neurons")  # |a_j| ||θ_j||: 4.08, 0.3, 1.41, 0.71
    assert half.a.tolist() == [4.0, 0.0, 2.0, 0.0] and torch.equal(half.theta, net.theta)
    weights = prune(net, 0.5, "weights")
    assert weights.a.tolist() == [4.0, 0.0, 2.0, 0.0]
    assert int((weights.theta == 0).sum()) == 4 and float(weights.theta.abs().min()) == 0.0
    assert float(prune(net, 1.0, "neurons")(torch.ones(3, 2, dtype=torch.float64)).abs().max()) == 0.0
    with pytest.raises(FlatbookInputError, match="Choose 'neurons' or 'weights'"):
        prune(net, 0.5, "layers")
    with pytest.raises(FlatbookInputError, match=r"fraction must lie in \[0, 1\]"):
        prune(net, 1.5, "neurons")


@pytest.mark.parametrize("scale", ["smoke", "book", "paper"])
def test_training_flatness_trains_each_run_once_with_the_step_control_on_every_seed(scale):
    from flatbook.experiments import training_flatness

    config = training_flatness.CONFIGS[scale]
    seeds = [config.seed + 100 * s for s in range(config.seeds)]
    points = training_flatness._training_points(config, seeds)
    keys = [(p["label"], p["seed"]) for p in points]
    assert len(keys) == len(set(keys)), keys  # no run twice, also where the sweep has the control's step
    control = [p for p in points if p.get("step") == config.fixed_step]
    assert sorted(p["seed"] for p in control) == seeds
    for seed in seeds:  # both sweeps on every seed
        swept = [p for p in points if "step" in p and p["seed"] == seed]
        assert sorted(p["step"] for p in swept) == sorted({*config.step_sizes, config.fixed_step})
        scaled = [p for p in points if p["label"].startswith("GD, init ") and p["seed"] == seed]
        assert sorted(p["scale"] for p in scaled) == sorted(config.init_scales)


@pytest.mark.slow
def test_training_flatness_tables():
    from flatbook.experiments import training_flatness

    config = training_flatness.CONFIGS["smoke"]
    tables = training_flatness.run(config)
    assert [r["method"] for r in tables["finals"]] == list(training_flatness.METHODS)
    assert len(tables["init_scale"]) == len(config.init_scales) * config.seeds
    assert len(tables["step_size"]) == len(config.step_sizes) * config.seeds
    # the step-rule control: gradient descent with the perturbed methods' fixed step, once per seed
    assert len(tables["fixed_step"]) == config.seeds
    assert all(r["fixed_step"] == config.fixed_step for r in tables["fixed_step"])
    # the budget sweep: each perturbed method on every seed at every budget, its own run at the config's budget
    budgets = training_flatness.perturbation_budgets(config)
    assert sorted((r["method"], r["seed"], r["perturbation_budget"]) for r in tables["budget"]) == sorted(
        (label, config.seed + 100 * s, b) for label in training_flatness.PERTURBED_METHODS
        for s in range(config.seeds) for b in budgets
    )  # fmt: skip
    for row in tables["finals"] + tables["references"] + tables["budget"]:
        assert row["ratio"] == pytest.approx(row["upsilon"] / row["flattest_upsilon"])
        assert row["proven_ratio"] >= row["ratio"] * (1 - 1e-12)  # a lower bound is below the network found
        assert row["population_loss"] >= row.get("bayes_risk", 0.0)
    for row in tables["references"]:  # both flattest interpolators interpolate
        assert row["train_residual"] <= 1e-8 * row["max_abs_y"]
    misaligned = [r for r in tables["references"] if r["method"] == "flattest misaligned"]
    assert misaligned and all(r["weighted_alignment"] < 1e-8 for r in misaligned)
    # every trained network is at least as sharp as the proven bound on all width-m interpolators
    assert all(r["upsilon"] >= r["flattest_lower"] * (1 - 1e-9) for r in tables["finals"])
    quad = next(r for r in tables["solver_summary"] if r["activation"] == "quadratic")
    assert quad["lower_bound"] <= quad["optimum"] * (1 + 1e-9)
    assert_draws_its_figures(training_flatness, tables)


def test_perturbation_budgets_leave_plain_steps_after_the_perturbation():
    from flatbook.experiments import training_flatness

    for config in training_flatness.CONFIGS.values():
        budgets = training_flatness.perturbation_budgets(config)
        assert len(budgets) >= 4 and config.perturbed_steps in budgets and max(budgets) < config.max_steps
    short = dataclasses.replace(training_flatness.CONFIGS["smoke"], max_steps=500)
    with pytest.raises(FlatbookInputError, match="raise max_steps"):
        training_flatness.perturbation_budgets(short)


def test_a_perturbation_budget_reaches_the_training_run():
    """The config's own budget is the method's own run; another budget trains differently."""
    from flatbook.experiments import training_flatness

    config = training_flatness.CONFIGS["smoke"]
    own = training_flatness._train(config, "SAM", config.init_small, 0)["finals"][0]
    same = training_flatness._train(config, "SAM", config.init_small, 0, perturbed_steps=config.perturbed_steps)
    other = training_flatness._train(config, "SAM", config.init_small, 0, perturbed_steps=config.perturbed_steps // 3)
    assert same["finals"][0]["upsilon"] == own["upsilon"]
    assert other["finals"][0]["upsilon"] != own["upsilon"]


def _budget_rows(slopes: dict[int, tuple[float, float]], budgets=(10, 30, 100, 300)) -> list[dict]:
    """Rows of one method's budget sweep: seed s has Υ = b^slope below the third budget and (b/100)^late · 100^slope
    from it, with (slope, late) = slopes[s]."""
    rows = []
    for seed, (slope, late) in slopes.items():
        for b in budgets:
            upsilon = b**slope if b <= 100 else 100**slope * (b / 100) ** late
            rows.append({"seed": seed, "perturbation_budget": b, "upsilon": upsilon, "method": "SAM"})
    return rows


@pytest.mark.parametrize(
    ("slopes", "trend", "steepens"),
    [
        ({s: (-0.01 - 0.001 * s, -0.01 - 0.001 * s) for s in range(5)}, "falls", False),  # a straight fall
        ({s: (-0.01 - 0.001 * s, -0.05 - 0.001 * s) for s in range(5)}, "falls", True),  # steeper at the end
        ({s: (0.02 + 0.001 * s, 0.02 + 0.001 * s) for s in range(5)}, "rises", False),
        ({s: ((-1) ** s * 0.01, (-1) ** s * 0.01) for s in range(5)}, "unresolved", False),
        ({s: (0.05 + 0.001 * s, -0.02) for s in range(5)}, "rises", False),  # a steeper end, but no fall
    ],
)
def test_budget_summary_reads_the_sign_only_where_the_interval_has_one(slopes, trend, steepens):
    from flatbook.experiments.training_flatness import budget_summary

    budgets = [10, 30, 100, 300]
    summary = budget_summary(_budget_rows(slopes), budgets)
    assert summary["trend"] == trend and summary["steepens"] is steepens
    assert len(summary["local"]) == 3 and [r["perturbation_budget"] for r in summary["last"]] == [300] * 5
    first = {s: slope for s, (slope, _) in slopes.items()}
    expected = [(100 ** first[s] * 3 ** slopes[s][1]) / 10 ** first[s] - 1 for s in slopes]
    assert summary["change"][0] == pytest.approx(np.mean(expected))


def test_budget_summary_draws_its_verdicts_at_the_level_asked():
    """Slopes −0.018 to −0.002 over five seeds (mean −0.01) fall at 95 % (t interval half-width 0.008) but not at
    99.99 % (0.044): the trend, and every interval, come from the level given."""
    from flatbook.experiments.training_flatness import budget_summary

    budgets = [10, 30, 100, 300]
    rows = _budget_rows({s: (-0.01 + 0.004 * (s - 2), -0.01 + 0.004 * (s - 2)) for s in range(5)})
    usual, strict = budget_summary(rows, budgets), budget_summary(rows, budgets, level=0.9999)
    assert usual["trend"] == "falls" and strict["trend"] == "unresolved"
    assert strict["slope"][1] < usual["slope"][1] and strict["change"][1] < usual["change"][1]
    assert all(s["low"] < u["low"] for s, u in zip(strict["local"], usual["local"], strict=True))


def test_budget_summary_refuses_a_seed_missing_a_budget():
    from flatbook.experiments.training_flatness import budget_summary

    rows = _budget_rows({s: (-0.01, -0.01) for s in range(3)})
    with pytest.raises(FlatbookInputError, match="every budget"):
        budget_summary(rows[:-1], [10, 30, 100, 300])


def test_upsilon_of_the_function_ignores_labels_and_the_symmetry():
    import torch

    from flatbook import TwoLayerNet, min_flatness
    from flatbook.experiments.training_flatness import upsilon_of_function

    gen = torch.Generator().manual_seed(0)
    net = TwoLayerNet(
        torch.randn(6, generator=gen, dtype=torch.float64), torch.randn(6, 3, generator=gen, dtype=torch.float64)
    )
    X = torch.randn(10, 3, generator=gen, dtype=torch.float64)
    value = upsilon_of_function(net, X)
    alpha = torch.exp(torch.randn(6, generator=gen, dtype=torch.float64))
    assert upsilon_of_function(net.rescale(alpha), X) == pytest.approx(value, rel=1e-10)
    # at labels the network fits exactly it is the Υ of chapter 2
    assert min_flatness(net, X, net(X) + 0.0) == pytest.approx(value, rel=1e-12)


def test_paper_experiments_sweeps_reuse_the_settings_rows_at_the_configs_own_values(monkeypatch):
    """A noise or width sweep value equal to the config's own (the paper's τ = 0.1, m/n = 2) takes the settings
    run's rows instead of running the same points again; the other values run."""
    from dataclasses import replace

    from flatbook.experiments import paper_experiments as pe

    monkeypatch.setenv("FLATBOOK_CACHE", "off")
    base = pe.CONFIGS["smoke"]
    config = replace(
        base,
        settings=("sum of single-index, ReLU",),
        rhos=(0.0, 0.3, 0.6, 0.9),
        noise_sweep=(base.noise_std, 0.5),
        width_sweep=(base.width_ratio, 3.0),
        reference_settings=(),
    )
    calls = []
    point = pe._point

    def counted(config, **kwargs):
        calls.append((config.noise_std, config.width_ratio))
        return point(config, **kwargs)

    monkeypatch.setattr(pe, "_point", counted)
    tables = pe.run(config)
    tau, ratio = base.noise_std, base.width_ratio
    assert sorted(calls) == sorted([(tau, ratio), (0.5, ratio), (tau, 3.0)] * config.seeds)
    # the same rows, so the same correlation; each table's intervals hold together (Bonferroni over its rows), so
    # the two-level sweeps draw theirs at 1 − 0.05/2, wider than the one-setting table's at 0.95
    same = ("spearman", "seeds_used", "condition_number", "not_interpolable")
    own = tables["correlations"][0]
    assert own["level"] == 0.95
    for name in ("noise", "width"):
        row = tables[name][0]
        assert {key: row[key] for key in same} == {key: own[key] for key in same}
        assert row["level"] == 1 - 0.05 / 2
        assert row["low"] <= own["low"] and row["high"] >= own["high"]
    assert [row["noise_std"] for row in tables["noise"]] == [tau, 0.5]
    assert [row["width_ratio"] for row in tables["width"]] == [ratio, 3.0]


@pytest.mark.slow
def test_paper_experiments_tables():
    from flatbook.experiments import paper_experiments

    config = paper_experiments.CONFIGS["smoke"]
    tables = paper_experiments.run(config)
    assert [r["setting"] for r in tables["correlations"]] == list(config.settings)
    assert all(-1 <= r["low"] <= r["spearman"] <= r["high"] <= 1 for r in tables["correlations"])
    refs = tables["references"]
    assert len(refs) == len(config.reference_settings) * config.seeds
    for ref in refs:  # every fixed-direction interpolator of the same data and width is above the proven bound
        grid = [
            r
            for r in tables["points"]
            if r["setting"] == ref["setting"] and r["seed"] == ref["seed"] and r["interpolable"]
        ]
        assert grid and all(r["upsilon"] >= ref["lower"] * (1 - 1e-9) for r in grid)
        assert ref["lower"] <= ref["upsilon"] * (1 + 1e-9)
    assert_draws_its_figures(paper_experiments, tables)


def _correlation_rows(setting: str, seed: int, losses: list[float]) -> list[dict]:
    """Grid points of one setting and seed whose Υ is 1, 2, …: their Spearman correlation is that of the losses
    with the order."""
    return [
        {"setting": setting, "seed": seed, "interpolable": True, "upsilon": float(i), "population_loss": loss}
        for i, loss in enumerate(losses)
    ]


def test_correlation_differences_are_paired_intervals_adjusted_over_the_pairs():
    """Against scipy's paired t-test interval on the per-seed correlations of the seeds both settings keep, at the
    Bonferroni-adjusted level; a seed one setting drops is left out of its pairs."""
    from scipy import stats

    from flatbook.experiments import paper_experiments

    rows, generator = [], np.random.default_rng(0)
    for setting, noise in (("strong", 0.2), ("weak", 2.0), ("other", 1.0)):
        for seed in range(5):
            rows += _correlation_rows(setting, seed, list(np.arange(6) + noise * generator.standard_normal(6)))
    for row in rows:
        if row["setting"] == "other" and row["seed"] == 4:
            row["interpolable"] = row["upsilon"] < 3  # three points kept: no correlation for this seed
    pairs = [("weak", "strong"), ("weak", "other")]
    found = paper_experiments.correlation_differences(rows, pairs, level=0.95)
    by_setting = {
        s: paper_experiments.per_seed_correlations([r for r in rows if r["setting"] == s])
        for s in ("strong", "weak", "other")
    }
    assert sorted(by_setting["other"]) == [0, 1, 2, 3]
    for row, (setting, other) in zip(found, pairs, strict=True):
        seeds = sorted(by_setting[setting].keys() & by_setting[other].keys())
        test = stats.ttest_rel([by_setting[setting][s] for s in seeds], [by_setting[other][s] for s in seeds])
        reference = test.confidence_interval(confidence_level=1 - 0.05 / len(pairs))
        assert row["level"] == pytest.approx(1 - 0.05 / len(pairs)) and row["seeds"] == len(seeds)
        assert (row["low"], row["high"]) == pytest.approx((reference.low, reference.high), rel=1e-10)
        first, second = ([by_setting[name][s] for s in seeds] for name in (setting, other))
        assert row["difference"] == pytest.approx(np.mean(first) - np.mean(second))
    with pytest.raises(FlatbookInputError, match="fewer than two seeds"):
        paper_experiments.correlation_differences(rows[:6] + rows[30:36], [("strong", "weak")])


def _bracket_rows(p: float, allowance: float, noise: float = 0.0) -> list[dict]:
    """One point of a chapter 3 sweep: the flattest interpolator found (Υ 10 on [9.5, 10]) and a bad one."""
    kept = {"sweep": "certified", "activation": "relu", "c": 1.0, "p": p, "d": 3, "n": 12, "m": 24, "seed": 0,
            "n_over_d": 4.0, "noise": noise, "teacher_upsilon": 12.0, "bad_dimension": None,
            "memorising_upsilon": 1.0, "memorising_bad_upsilon": 1.0}  # fmt: skip
    best = {**kept, "method": "best", "rho": math.nan, "lower": 9.5, "upper": 10.0, "certified": True,
            "residual_allowance": allowance, "population_loss": 0.1}  # fmt: skip
    bad = {**kept, "method": "bad", "rho": 0.0, "lower": 30.0, "upper": 31.0, "certified": True,
           "population_loss": 0.5}  # fmt: skip
    return [best, bad]


@pytest.mark.parametrize(
    ("p", "allowance", "noise", "proven", "included"),
    [
        (1.0, 2.0, 0.0, 30.0 / 12.0, True),  # the teacher (12) is below upper + allowance (12.0): min is 12
        (1.0, 0.5, 0.0, 30.0 / 10.5, True),  # upper + allowance
        (1.0, math.inf, 0.3, 1.0, True),  # the allowance's bound failed: nothing proven beyond the trivial 1
        (4.0 / 3.0, math.nan, 0.3, 3.0, False),  # no allowance exists for p > 1: the network's Υ, said as such
    ],
)
def test_chapter3_upper_best_carries_the_residual_allowance(p, allowance, noise, proven, included):
    from flatbook.experiments.bad_interpolators import ratios

    (row,) = ratios(_bracket_rows(p, allowance, noise))
    assert row["proven"] == pytest.approx(proven) and row["proven"] == max(1.0, row["separation"])
    assert row["allowance_included"] is included
    assert row["estimate"] == pytest.approx(31.0 / 10.0)  # the two networks found, no allowance


def test_chapter3_separation_is_lower_bad_over_upper_best_unclamped():
    """A bad set whose lower end lies below upper(best) is not separated: its ratio stays below 1 (proven: 1)."""
    from flatbook.experiments.bad_interpolators import ratios

    best, bad = _bracket_rows(1.0, 0.5)
    (row,) = ratios([best, {**bad, "lower": 8.0, "upper": 31.0}])
    assert row["separation"] == pytest.approx(9.5 / 10.5) and row["proven"] == 1.0


def test_chapter7_ratios_widen_both_ends_by_the_allowances_of_the_labels_each_network_fits():
    from flatbook.experiments.training_flatness import _against_flattest

    flattest = {"upsilon": 10.0, "lower": 8.0, "residual_allowance": 0.5}
    trained = {"method": "GD, small init", "upsilon": 12.0, "residual_allowance": 0.25}
    mine = _against_flattest(trained, flattest, own_labels=True)
    assert mine["low_ratio"] == pytest.approx(12.0 / 10.75) and mine["proven_ratio"] == pytest.approx(12.0 / 7.75)
    assert mine["ratio"] == pytest.approx(1.2)
    reference = _against_flattest({**flattest, "method": "flattest"}, flattest, own_labels=False)
    assert reference["low_ratio"] == pytest.approx(10.0 / 10.5) and reference["proven_ratio"] == pytest.approx(1.25)
