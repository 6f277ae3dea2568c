"""``python -m coupled_curvature`` runs the ``ccurv`` command line."""

from coupled_curvature.cli import main

if __name__ == "__main__":  # not on a plain import (a documentation tool inspecting the package)
    raise SystemExit(main())
