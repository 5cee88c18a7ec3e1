"""Names every generated source shares: the file names compiler messages carry, the kernel's symbol."""
from __future__ import annotations

USER_FILE = "jiterator"  # the `#line` file of the user's code, as torch's jiterator names it
KERNEL_FILE = "jiter_magic_kernel"  # the `#line` file of the generated kernel around it
KERNEL_NAME = "jm_kernel"  # the entry symbol a backend loads
