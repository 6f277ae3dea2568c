"""The base of the package, beneath every other layer: the error family (:mod:`.errors`), safe output files
(:mod:`.output`), comma-separated choices (:mod:`.choices`) and the run settings every entry point takes
(:mod:`.run_settings`). It imports neither torch nor sympy, and nothing of the package above it."""
