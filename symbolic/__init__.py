"""Exact SymPy derivations of T1–T12 (never imports torch)."""
