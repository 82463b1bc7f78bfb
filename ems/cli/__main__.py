"""`python -m ems.cli`."""

from __future__ import annotations

from ems.cli import main

# Guarded: spawned demo producers import this module as __mp_main__.
if __name__ == "__main__":
    main()
