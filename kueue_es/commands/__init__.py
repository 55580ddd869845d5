"""The CLI's subcommands, one module each.

Every module listed in :data:`COMMAND_MODULES` exposes ``register(subparsers)``, which adds its parser(s) and
sets ``func`` (``func(args) -> int``) as the parser default. :func:`kueue_es.cli.main` imports them in this
order, so the order here is the order ``kueue-es --help`` lists them. To add a command, write
``kueue_es/commands/<name>.py`` and append its module path below.
"""

from __future__ import annotations

COMMAND_MODULES: list[str] = [
    "kueue_es.commands.import_cmd",
    "kueue_es.commands.replay",
    "kueue_es.commands.audit",
    "kueue_es.commands.metrics",
    "kueue_es.commands.log_cmd",
    "kueue_es.commands.schedule",
    "kueue_es.commands.explain",
    "kueue_es.commands.pending",
    "kueue_es.commands.simulate",
    "kueue_es.commands.demo",
    "kueue_es.commands.run",
    "kueue_es.commands.manifests",
    # other commands (schedule, explain, simulate, demo, ...) are appended here
]
