"""flatbook: flatness, symmetry and implicit bias in two-layer homogeneous networks.

The package behind the flatbook executable textbook.  Everything is float64 and
runs on the device chosen by :func:`flatbook.backend.default_device`.
"""

from importlib.metadata import PackageNotFoundError, version

from .activations import get_activation
from .data import MultiIndexModel, population_loss
from .flatness import hessian_trace, min_flatness, optimal_rescaling
from .flattest import flattest_outer_weights
from .global_flattest import flattest_interpolator
from .network import TwoLayerNet

try:
    __version__ = version("flatbook")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0+unknown"

__all__ = [
    "get_activation",
    "TwoLayerNet",
    "MultiIndexModel",
    "hessian_trace",
    "min_flatness",
    "optimal_rescaling",
    "flattest_outer_weights",
    "flattest_interpolator",
    "population_loss",
]
