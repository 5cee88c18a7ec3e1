"""`python -m jiter_magic.native.build NAME`: build one module of the C call path into the disk
cache, in a process of its own that outlives the one that asked (see loader.py)."""
from __future__ import annotations

import sys

from jiter_magic.native.binaries import build_here

if __name__ == "__main__":
    sys.exit(build_here(sys.argv[1]))
