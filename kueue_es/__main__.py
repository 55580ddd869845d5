"""``python -m kueue_es`` is the ``kueue-es`` command."""

from kueue_es.cli import main

raise SystemExit(main())
