"""Exact per-sample factors ``H_bb = BᵀB`` and what they give: dense blocks and diagonals of
Linear/Conv layers, row-pair traces, and ``D⁺`` of ReLU MLPs from ``B``."""
