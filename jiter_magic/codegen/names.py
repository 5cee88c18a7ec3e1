"""Names every generated source shares: the file names compiler messages carry, the kernel's symbol;
and the user's code placed under its own file name, between the generated head and the kernel."""
from __future__ import annotations

from jiter_magic.frontend.tokens import defined_macros

USER_FILE = "jiterator"  # the `#line` file of the user's code, as torch's jiterator names it
KERNEL_FILE = "jiter_magic_kernel"  # the `#line` file of the generated kernel around it
KERNEL_NAME = "jm_kernel"  # the entry symbol a backend loads


def with_user_code(head: str, code: str) -> str:
    """`head`, then the user's `code` under `#line 1 "jiterator"` (compiler messages point at the user's
    own lines), its macros undefined (they have done their work on the user's code; none may reach the
    kernel), then the `#line` of the generated kernel that follows."""
    text = head + f'#line 1 "{USER_FILE}"\n' + code + "\n"
    text += "".join(f"#undef {name}\n" for name in sorted(defined_macros(code)))
    return text + f'#line {text.count(chr(10)) + 2} "{KERNEL_FILE}"\n'
