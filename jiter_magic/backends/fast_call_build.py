"""`python -m jiter_magic.backends.fast_call_build NAME`: build one module of the C call path into
the disk cache, in a process of its own that outlives the one that asked (see fast_call.py)."""
from __future__ import annotations

import sys

from .fast_call import build_here

if __name__ == "__main__":
    sys.exit(build_here(sys.argv[1]))
