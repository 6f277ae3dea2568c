"""Sub-commands of ``ccurv``; each module has ``register(subparsers)`` and ``run(args)``."""

COMMANDS = ("check", "report", "explore", "experiment", "diagnose", "track")
