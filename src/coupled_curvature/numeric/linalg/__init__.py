"""Linear algebra of one block: the relative-cutoff pseudo-inverse form, the LAPACK binding of
its fast route, the one Lanczos engine and the Krylov quadrature of ``wᵀH⁺w``."""
