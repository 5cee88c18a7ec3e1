"""Render the full source of one specialization: prelude, the user's code, `Args`, the kernel.

The user's code sits under `#line 1 "jiterator"` so that compiler messages point at the
user's own lines; the kernel itself comes from the spec's path (kernels/). Strings in,
string out, for CUDA (NVRTC) and the host (C++) alike.
"""
from __future__ import annotations

from jiter_magic.codegen.names import with_user_code
from jiter_magic.codegen.prelude import prelude
from jiter_magic.frontend.bind import Binding
from jiter_magic.kernels import path_of
from jiter_magic.kernels.args import args_layout
from jiter_magic.planning.dtypes import ctype
from jiter_magic.planning.spec import KernelSpec


def render_source(binding: Binding, spec: KernelSpec, backend: str) -> tuple[str, int]:
    """Source of `spec` on `backend` ('cuda' or 'cpu'), and the line where the user's code starts."""
    code = binding.functor.code
    head = prelude("cuda" if backend == "cuda" else "host", spec.needs_complex or "complex" in code)
    head += f"\ntypedef {ctype(spec.compute)} jm_compute_t;\n"
    user_start = head.count("\n") + 2
    text = with_user_code(head, code) + args_layout(spec, backend).declaration() + "\n"
    return text + path_of(spec, backend).render(binding, spec), user_start


def render(binding: Binding, spec: KernelSpec, backend: str) -> str:
    """Source of `spec` on `backend`."""
    return render_source(binding, spec, backend)[0]
