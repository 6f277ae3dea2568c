"""The diagnostic itself: input checks, the objective, Hessian-vector products, the tangent
route, block partitions and :func:`~coupled_curvature.numeric.core.diagnostics.diagnose`."""
