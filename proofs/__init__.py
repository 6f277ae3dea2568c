"""The theorem catalogue: statements, checked steps and numeric cross-checks."""
