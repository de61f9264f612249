"""How far the global solver's defaults end from long multi-start runs where pricing is heuristic (d > 3).

    python bench/defaults_against_long_runs.py                   # d = 8, n = 64 and d = 6, n = 48, seeds 0-4
    python bench/defaults_against_long_runs.py --instances 8:64 --seeds 0 1
    python bench/defaults_against_long_runs.py --instances 4:16 4:32 --certified   # against a proof (d = 4)
    python bench/defaults_against_long_runs.py --instances 4:16 --certified --certify-up-to 3   # d = 4 heuristic
    python bench/defaults_against_long_runs.py --no-cell-ascent   # every run with cell_ascent=False
    python bench/defaults_against_long_runs.py --cells 64:4       # cell ascent: 64 + 64 starts, 4 moves, every level
    python bench/defaults_against_long_runs.py --cell-settings off 16:2 64:4   # the defaults' Υ per cell-ascent setting

For each instance d:n and seed: a noiseless single-index ReLU teacher (``single_index(d, "relu", seed)``, samples with
seed + 1000), width m = 2n, and :func:`flatbook.flattest_interpolator`: with its defaults, as a long run (``rounds=80,
stall_rounds=None, pricing_starts=256``), as a longer one (``rounds=400``, otherwise the same) and pooled
(``POOLED_RESTARTS`` runs with the defaults from other seeds, then one with the defaults started from the union of their
final dictionaries). Nothing is proven in these dimensions (the proven lower bounds are closed forms, far below), so the
references are the other runs' Υ: upper bounds on Υ*(m), not Υ*(m). With ``--certified`` (dimensions where the cap
branch-and-bound closes the gap), the reference is instead a run with pricing certified (``certify_up_to=d``, no
tailing-off stop, ``CERTIFIED_LIMIT`` seconds) and its proven lower bound on Υ*(m): the defaults' excess over it is an
upper bound on how far they end from the optimum (``--certify-up-to K``: the defaults with ``certify_up_to=K``, e.g. 3
to price d = 4 heuristically). With ``--no-cell-ascent`` every run (the certified one too) prices with
``cell_ascent=False`` (gradient ascent alone); with ``--without-longer`` the 400-round run is left out. With
``--cell-settings`` only the defaults run, once per setting of the cell ascent (``off``, or STARTS:MOVES for
``column_generation.CELL_ASCENT_STARTS`` and ``CELL_ASCENT_STEPS`` at every effort level, where by default they grow
with the level), and each run's Υ, rounds, stop and seconds are printed. Otherwise, printed per row: Υ, rounds and stop
of each run, and the defaults' excess, Υ / min(long, longer, pooled) − 1 (or Υ / the proven bound − 1). One process, two
threads.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from flatbook import flattest_interpolator
from flatbook.data import single_index

from common import cell_ascent_fixed, header, instance

RUNS = {
    "defaults": {},
    "long": {"rounds": 80, "stall_rounds": None, "pricing_starts": 256},
    "longer": {"rounds": 400, "stall_rounds": None, "pricing_starts": 256},
}


#: seconds the certified reference may run (no tailing-off stop: it ends on a proof, or here)
CERTIFIED_LIMIT = 600.0
#: the pooled run: this many runs with the defaults from different seeds, then one from their dictionaries' union
POOLED_RESTARTS = 4
#: the seeds of the pooled run's restarts: seed + RESTART_SEED_STEP·j, j = 0 … POOLED_RESTARTS − 1
RESTART_SEED_STEP = 7919


def _entry(result, started: float) -> dict:
    return {
        "upsilon": result.upper,
        "rounds": result.rounds,
        "stop": result.stop.value,
        "seconds": time.perf_counter() - started,
    }


def certified_point(d: int, n: int, seed: int, extra: dict, defaults: dict) -> dict:
    """The defaults (with ``defaults``' options) against a run with certified pricing: its proven lower bound is
    the reference."""
    X, y = single_index(d, link="relu", seed=seed).sample(n, seed=seed + 1000)
    row: dict = {"d": d, "n": n, "seed": seed}
    started = time.perf_counter()
    row["defaults"] = _entry(flattest_interpolator(X, y, "relu", 2 * n, seed=seed, **extra, **defaults), started)
    started = time.perf_counter()
    proof = flattest_interpolator(
        X,
        y,
        "relu",
        2 * n,
        seed=seed,
        certify_up_to=d,
        stall_rounds=None,
        rounds=10_000,
        time_limit=CERTIFIED_LIMIT,
        **extra,
    )
    row["certified"] = _entry(proof, started) | {"lower": proof.lower}
    row["excess"] = row["defaults"]["upsilon"] / proof.lower - 1
    return row


def point(d: int, n: int, seed: int, extra: dict, runs: dict = RUNS) -> dict:
    X, y = single_index(d, link="relu", seed=seed).sample(n, seed=seed + 1000)
    row: dict = {"d": d, "n": n, "seed": seed}
    for name, options in runs.items():
        started = time.perf_counter()
        row[name] = _entry(flattest_interpolator(X, y, "relu", 2 * n, seed=seed, **options, **extra), started)
    # Pooled: the master over the union of several runs' final dictionaries is at least as flat as each of them
    # (a linear program over more columns), and column generation continues from it.
    started = time.perf_counter()
    restarts = [
        flattest_interpolator(X, y, "relu", 2 * n, seed=seed + RESTART_SEED_STEP * j, **extra)
        for j in range(POOLED_RESTARTS)
    ]
    union = torch.cat([result.columns for result in restarts])
    pooled = flattest_interpolator(X, y, "relu", 2 * n, seed=seed, start_directions=union, **extra)
    row["pooled"] = _entry(pooled, started)
    row["pooled"]["best_restart"] = min(result.upper for result in restarts)
    references = [row[name]["upsilon"] for name in ("long", "longer", "pooled") if name in row]
    row["excess"] = row["defaults"]["upsilon"] / min(references) - 1
    return row


def cell_setting(text: str) -> tuple[int, int] | None:
    """'off' (None) or 'STARTS:MOVES' (an argparse type)."""
    if text == "off":
        return None
    try:
        starts, moves = (int(part) for part in text.split(":"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"a cell-ascent setting is off or STARTS:MOVES, e.g. 64:4, got {text!r}"
        ) from exc
    if starts < 1 or moves < 1:
        raise argparse.ArgumentTypeError(f"need STARTS >= 1 and MOVES >= 1, got {text!r}")
    return starts, moves


def settings_point(d: int, n: int, seed: int, settings: list[tuple[int, int] | None]) -> dict:
    """The defaults once per cell-ascent setting (None: off)."""
    X, y = single_index(d, link="relu", seed=seed).sample(n, seed=seed + 1000)
    row: dict = {"d": d, "n": n, "seed": seed}
    for setting in settings:
        with cell_ascent_fixed(*(setting or (None, None))):
            started = time.perf_counter()
            result = flattest_interpolator(X, y, "relu", 2 * n, seed=seed, cell_ascent=setting is not None)
        row["off" if setting is None else f"{setting[0]}:{setting[1]}"] = _entry(result, started)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=instance, nargs="+", default=[(8, 64), (6, 48)], help="d:n pairs")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--out", type=Path, help="also write the rows as JSON here")
    parser.add_argument(
        "--certified", action="store_true", help="compare with a run whose pricing is certified (its proven bound)"
    )
    parser.add_argument("--no-cell-ascent", action="store_true", help="every run with cell_ascent=False")
    parser.add_argument(
        "--certify-up-to", type=int, help="with --certified: the defaults' run with certify_up_to=K (e.g. 3 in d = 4)"
    )
    parser.add_argument("--without-longer", action="store_true", help="no 400-round run (the slowest reference)")
    parser.add_argument(
        "--cells", type=cell_setting, help="every run with the cell ascent at STARTS:MOVES instead of the default"
    )
    parser.add_argument(
        "--cell-settings", type=cell_setting, nargs="+", help="only the defaults, per cell-ascent setting (off, S:M)"
    )
    args = parser.parse_args()
    if args.certify_up_to is not None and (not args.certified or args.certify_up_to < 0):
        parser.error("--certify-up-to K needs --certified and K >= 0")
    extra = {"cell_ascent": False} if args.no_cell_ascent else {}
    if args.cell_settings:
        setting_names = ["off" if s is None else f"{s[0]}:{s[1]}" for s in args.cell_settings]
        print(header("noiseless single-index ReLU, m = 2n, the defaults per cell-ascent setting (starts:moves)"))
        print(f"| d | n | seed | {' | '.join(setting_names)} |")
        print("|---" * (len(setting_names) + 3) + "|")
        rows = []
        for d, n in args.instances:
            for seed in args.seeds:
                row = settings_point(d, n, seed, args.cell_settings)
                rows.append(row)
                cells = " | ".join(
                    f"{row[name]['upsilon']:.4f}, {row[name]['rounds']}, {row[name]['stop']}, "
                    f"{row[name]['seconds']:.1f} s"
                    for name in setting_names
                )
                print(f"| {d} | {n} | {seed} | {cells} |", flush=True)
        if args.out:
            args.out.write_text(json.dumps(rows, indent=1))
        return
    names: tuple[str, ...]
    if args.certified:
        title, names = "defaults against a certified run", ("defaults", "certified")
        columns = "certified run: Υ, rounds, stop | its proven lower bound"
        defaults = {} if args.certify_up_to is None else {"certify_up_to": args.certify_up_to}

        def point_of(d, n, seed, extra):
            return certified_point(d, n, seed, extra, defaults)
    else:
        runs = {name: options for name, options in RUNS.items() if name != "longer" or not args.without_longer}
        title, names = "heuristic pricing", (*runs, "pooled")

        def point_of(d, n, seed, extra):
            return point(d, n, seed, extra, runs)

        longer = "" if args.without_longer else " | longer (400 rounds)"
        columns = f"long (80 rounds){longer} | pooled ({POOLED_RESTARTS} restarts)"
    print(header(f"noiseless single-index ReLU, m = 2n, {title}"))
    print(f"| d | n | seed | defaults: Υ, rounds, stop | {columns} | excess |")
    print("|---" * (len(columns.split("|")) + 5) + "|")
    rows = []
    for d, n in args.instances:
        for seed in args.seeds:
            with cell_ascent_fixed(*(args.cells or (None, None))):
                row = point_of(d, n, seed, extra)
            rows.append(row)
            cells = " | ".join(
                f"{row[name]['upsilon']:.4f}, {row[name]['rounds']}, {row[name]['stop']}" for name in names
            )
            if args.certified:
                cells += f" | {row['certified']['lower']:.4f}"
            print(f"| {d} | {n} | {seed} | {cells} | {100 * row['excess']:.2f} % |", flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
