"""Certified enclosures (FLINT's arb ball arithmetic, via python-flint) of ``D``, ``D⁺`` and their invariance."""
