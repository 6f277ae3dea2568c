"""Float64 (and later arbitrary-precision) numerics on PyTorch models (never imports sympy)."""
