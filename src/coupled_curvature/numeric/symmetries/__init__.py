"""Reparameterizations that keep the function: homogeneous rescalings and permutations of ReLU
networks, BatchNorm scale, linear mixing, nonlinear parametrizations, loss scaling."""
