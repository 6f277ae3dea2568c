"""The measures of the invariance matrix (sharpness, trace, flatness, Fisher–Rao, λ, D, D⁺, ρ,
the Newton decrement) behind one registry, by name."""
