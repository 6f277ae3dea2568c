"""The diagnostics in arbitrary precision (mpmath): exact integer arithmetic on the float64
weights and a certified pseudo-inverse."""
