"""Shared test settings: deterministic hypothesis runs, float64 by default."""

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci")


def pytest_configure(config):
    """``CCURV_TEST_THREADS=N`` runs the whole suite with ``torch.set_num_threads(N)``: reductions reorder
    with the thread count, so the suite is run with 1 and with 2 (issue 23) to show that no bound
    depends on one summation order."""
    import os

    threads = os.environ.get("CCURV_TEST_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))
