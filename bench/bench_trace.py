"""Exact Hessian trace (closed form, O(n m d)) against Hutchinson and torch.func.hessian, same run.

    python bench/bench_trace.py            # the sizes of the table in bench/README.md
    python bench/bench_trace.py --quick    # a one-minute version
    python bench/bench_trace.py --floor    # the closed form against its floor (n = 2000, m = 8000, d = 50)

Peers, each on the same network and data (float64, one device):

1. Hutchinson's estimator from Hessian-vector products of torch autograd, as
   PyHessian does it.  The `pyhessian` package itself is used when it imports
   (``pip install pyhessian``; its data-loader mode keeps memory bounded);
   otherwise an equivalent estimator written here with the same Rademacher
   probes.  The number of probes for 1 % relative accuracy (standard error of
   the mean at most 1 % of the trace) is N = Var / (0.01 Tr)², with the
   per-probe variance from a pilot of ``--pilot`` probes; when N probes would
   take longer than ``--budget`` seconds the time is extrapolated from the
   pilot (marked "extrapolated").
2. The exact trace of ``torch.func.hessian``, where the (m(d+1))² Hessian fits.

Prints one row per size: times, speed ratios, relative errors.
"""

from __future__ import annotations

import argparse
import math

import torch

from flatbook import TwoLayerNet, get_activation, hessian_trace
from flatbook.backend import default_device
from flatbook.network import forward

from common import fastest, header, timed

try:
    from pyhessian import hessian as PyHessian
except Exception as exc:  # noqa: BLE001 - any import failure means "use the equivalent estimator"
    PyHessian, PYHESSIAN_ERROR = None, f"{type(exc).__name__}: {exc}"
else:
    PYHESSIAN_ERROR = None


class Net(torch.nn.Module):
    """The same two-layer network as an nn.Module, for autograd-based peers."""

    def __init__(self, net: TwoLayerNet):
        super().__init__()
        self.a = torch.nn.Parameter(net.a.clone())
        self.theta = torch.nn.Parameter(net.theta.clone())
        self.activation = net.activation

    def forward(self, X):
        return forward(self.a, self.theta, X, self.activation)


def problem(n, m, d, activation, seed=0):
    gen = torch.Generator().manual_seed(seed)
    device = default_device()
    X = torch.randn(n, d, generator=gen, dtype=torch.float64).to(device)
    y = torch.randn(n, generator=gen, dtype=torch.float64).to(device)
    a = torch.randn(m, generator=gen, dtype=torch.float64).to(device) / m
    theta = torch.randn(m, d, generator=gen, dtype=torch.float64).to(device) / math.sqrt(d)
    return TwoLayerNet(a, theta, activation), X, y


def batches(X, y, batch):
    return [(X[i : i + batch], y[i : i + batch]) for i in range(0, X.shape[0], batch)]


def hutchinson_probes(net, X, y, probes, batch, seed=0):
    """``probes`` Rademacher quadratic forms vᵀHv of F_S (mean loss), HVPs summed over row batches."""
    model = Net(net)
    params = [model.a, model.theta]
    n = X.shape[0]
    if PyHessian is not None:
        loader = [(xb, yb) for xb, yb in batches(X, y, batch)]
        criterion = torch.nn.MSELoss(reduction="sum")  # PyHessian averages over batches; we rescale below
        engine = PyHessian(
            model, lambda out, target: criterion(out, target) * len(loader) / n, dataloader=loader, cuda=X.is_cuda
        )
        torch.manual_seed(seed)
        return [float(v) for v in engine.trace(maxIter=probes, tol=0.0)]
    gen = torch.Generator(device=X.device).manual_seed(seed)
    values = []
    for _ in range(probes):
        v = [torch.randint(0, 2, p.shape, generator=gen, device=X.device, dtype=p.dtype) * 2 - 1 for p in params]
        hv = [torch.zeros_like(p) for p in params]
        for xb, yb in batches(X, y, batch):
            loss = ((model(xb) - yb) ** 2).sum() / n
            grads = torch.autograd.grad(loss, params, create_graph=True)
            dot = sum((g * vi).sum() for g, vi in zip(grads, v, strict=True))
            for acc, h in zip(hv, torch.autograd.grad(dot, params), strict=True):
                acc += h
        values.append(float(sum((h * vi).sum() for h, vi in zip(hv, v, strict=True))))
    return values


def autograd_exact(net, X, y):
    m, d = net.theta.shape

    def loss(flat):
        return ((forward(flat[:m], flat[m:].reshape(m, d), X, net.activation) - y) ** 2).mean()

    return float(torch.trace(torch.func.hessian(loss)(torch.cat([net.a, net.theta.reshape(-1)]))))


def best_time(fn, repeats=15):
    """The fastest of ``repeats`` runs (seconds)."""
    return fastest(fn, repeats=repeats)[1]


def floor_time(net, X):
    """The floor of any exact trace: one GEMM X·Θᵀ and one elementwise pass (σ, summed per neuron), at its
    best row-block size."""

    def one_pass(rows):
        out = torch.zeros(net.width, dtype=X.dtype, device=X.device)
        for start in range(0, X.shape[0], rows):
            out += net.activation(X[start : start + rows] @ net.theta.T).sum(dim=0)
        return out

    return min(best_time(lambda rows=rows: one_pass(rows)) for rows in (64, 128, 256, 512, X.shape[0]))


def floor_table(activation, sizes):
    print("| n | m | d | closed form (s, best of 15) | floor (s) | closed form / floor |")
    print("|---|---|---|---|---|---|")
    for n, m, d in sizes:
        net, X, y = problem(n, m, d, activation)
        t_trace = best_time(lambda net=net, X=X, y=y: hessian_trace(net, X, y))
        t_floor = floor_time(net, X)
        print(f"| {n} | {m} | {d} | {t_trace:.3f} | {t_floor:.3f} | {t_trace / t_floor:.2f} |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, about a minute")
    parser.add_argument("--activation", default="relu")
    parser.add_argument("--pilot", type=int, default=8, help="Hutchinson pilot probes")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds allowed for the full N probes")
    parser.add_argument("--batch", type=int, default=2000, help="rows per autograd batch")
    parser.add_argument("--floor", action="store_true", help="only the closed form against its floor (GEMM + one pass)")
    args = parser.parse_args()
    activation = get_activation(args.activation)
    if args.floor:
        print(header(f"activation {activation!r}"))
        floor_table(activation, [(2000, 8000, 50), (5000, 5000, 50)])
        return
    sizes = (
        [(1000, 2000, 20), (2000, 4000, 50)]
        if args.quick
        else [(1000, 2000, 20), (5000, 5000, 50), (10000, 10000, 100), (20000, 20000, 100)]
    )
    print(header(f"activation {activation!r}"))
    peer = "pyhessian package" if PyHessian else f"own estimator (pyhessian: {PYHESSIAN_ERROR})"
    print(f"# Hutchinson peer: {peer}")

    small = problem(200, 100, 10, activation)
    hessian_trace(*small)  # warm-up
    exact, t_exact = timed(hessian_trace, *small)
    auto, t_auto = timed(autograd_exact, *small)
    print(
        f"\n## exact peers, n=200 m=100 d=10: closed form {t_exact * 1e3:.2f} ms, torch.func.hessian "
        f"{t_auto * 1e3:.0f} ms (ratio {t_auto / t_exact:.0f}x), "
        f"relative difference {abs(exact - auto) / abs(auto):.1e}"
    )

    print(
        "\n| n | m | d | closed form (s) | Hutchinson probes for 1 % | Hutchinson (s) | ratio | "
        "Hutchinson rel. error | pilot mean vs exact |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n, m, d in sizes:
        net, X, y = problem(n, m, d, activation)
        hessian_trace(net, X, y)  # warm-up
        exact, t_exact = timed(hessian_trace, net, X, y)
        pilot, t_pilot = timed(hutchinson_probes, net, X, y, args.pilot, args.batch)
        mean = sum(pilot) / len(pilot)
        var = sum((v - mean) ** 2 for v in pilot) / (len(pilot) - 1)
        needed = max(1, math.ceil(var / (0.01 * exact) ** 2))
        per_probe = t_pilot / args.pilot
        if needed * per_probe <= args.budget:
            values, t_hutch = timed(hutchinson_probes, net, X, y, needed, args.batch, 1)
            estimate, note = sum(values) / len(values), ""
            error = f"{abs(estimate - exact) / exact:.1e}"
        else:
            t_hutch, note = needed * per_probe, " (extrapolated)"
            error = f"{math.sqrt(var / needed) / exact:.1e} (s.e.)"
        print(
            f"| {n} | {m} | {d} | {t_exact:.3f} | {needed} | {t_hutch:.1f}{note} | {t_hutch / t_exact:.0f}x | "
            f"{error} | {abs(mean - exact) / exact:.1e} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
