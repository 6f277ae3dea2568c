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
    depends on one summation order.

    In a checkout, the child processes that tests start (``python -m coupled_curvature``, ``ccurv``, probes)
    import the same copy as the tests themselves: the checkout's ``src/``, which pyproject.toml's
    ``pythonpath`` puts first only in this process. Without it a child would import whichever copy is
    installed (an editable install of another checkout, say)."""
    import os
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "src"
    if (src / "coupled_curvature").is_dir():
        os.environ["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [os.environ.get("PYTHONPATH")])])

    threads = os.environ.get("CCURV_TEST_THREADS")
    if threads:
        import torch

        torch.set_num_threads(int(threads))
