"""``python -m zerda_eval``: the same as the ``zerda-eval`` command."""

import sys

from zerda_eval.cli import main

sys.exit(main())
