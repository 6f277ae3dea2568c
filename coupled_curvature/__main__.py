"""``python -m coupled_curvature`` runs the ``ccurv`` command line."""

from coupled_curvature.cli import main

raise SystemExit(main())
