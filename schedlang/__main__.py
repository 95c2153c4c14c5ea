"""``python -m schedlang ...`` runs the ``schedlang`` command (``bench``, ``show``, ``tune``)."""
import sys

from schedlang.cli import main

if __name__ == "__main__":
    sys.exit(main())
