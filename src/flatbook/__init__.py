"""flatbook: flatness, symmetry and implicit bias in two-layer homogeneous networks."""
from .activations import get_activation
from .network import TwoLayerNet
from .data import MultiIndexModel, population_loss
from .flatness import hessian_trace, min_flatness, optimal_rescaling
from .flattest import flattest_outer_weights
