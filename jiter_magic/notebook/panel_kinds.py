"""What a panel shows that differs between kinds of operation: the hook each kind fills.

One panel (widgets.py, panel_html.py) serves elementwise functions, reductions and scans; a kind
gives it only the facts of its header (the signature, or a reduction's and a scan's roles and
identity), what a built kernel is called, the dtypes column of the Cache tab, the Compile log's
note, and the CUDA counterpart of a host kernel for the PTX and SASS listings. The hook is chosen
by `KernelFunction.operation`, so the notebook package never imports a kind's facade.
"""
from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from jiter_magic.kernel_function import KernelFunction


class Fact(NamedTuple):
    """One fact of a function for its header: `value` shown as code or not, and in the live header or not."""

    name: str
    value: str
    code: bool = True
    in_header: bool = True

    @property
    def html(self) -> str:
        return f"<code>{html.escape(self.value)}</code>" if self.code else html.escape(self.value)


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """'1 entry', '3 entries'."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


class PanelKind:
    """The hook of one kind of operation. As written here, a reduction's: a scan's differs in its
    facts and CUDA counterparts, an elementwise function's in nearly every part."""

    title = "ReductionFunction"  # the static text's first word
    word = "reduction"  # what the header calls a function of the kind
    noun = "kernel"  # what one built kernel is called, 'kernels: 2'
    built = "built"  # 'no kernel built yet'
    column = "kernel"  # the Cache tab's column of backend and kernel shape

    def summary(self, fn: Any) -> str:
        """'combine add, map sq, finalize root': the cell's functions by what the operation does with them."""
        binding = fn.binding
        indices = " (values with their indices)" if binding.indexed else ""
        parts = [f"combine {binding.combine.name}{indices}",
                 f"map {binding.map.functor.name}" if binding.map is not None else "no map (the elements themselves)"]
        if binding.finalize is not None:
            parts.append(f"finalize {binding.finalize.name}")
        return ", ".join(parts)

    def summary_html(self, fn: Any) -> str:
        return f"{self.word}: {html.escape(self.summary(fn))}"

    def facts(self, fn: Any) -> list[Fact]:
        """Inputs, identity (none for values with their indices: none is compared with it, so no
        default 0 is shown), extras and the default dim (a `%%jiterator --reduce dim=...` cell's)."""
        dim = getattr(fn, "default_dim", None)
        identity = [] if fn.binding.indexed else [Fact("identity", repr(fn.identity))]
        return [Fact("inputs", ", ".join(fn.binding.input_names), in_header=False), *identity,
                Fact("kwargs", kwargs_text(fn)), Fact("default dim", "every dim" if dim is None else repr(dim), False)]

    def text_lines(self, fn: Any) -> list[str]:
        """The static text's lines of facts, between the title and the kernels."""
        return ["; ".join(f"{fact.name}: {fact.value}" for fact in self.facts(fn))]

    def header_facts(self, fn: Any) -> list[str]:
        """The live header's facts as HTML, after the summary and before where calls run."""
        shown = [f"{fact.name} {fact.html}" for fact in self.facts(fn) if fact.in_header]
        return [*shown, counted(len(fn.specializations), self.noun)]

    def runs_on(self, fn: Any) -> str:
        """Where calls run: where their inputs live."""
        from jiter_magic.runtime.inspection import cuda_available, cuda_device_name

        if not cuda_available():
            return "the inputs' device (the CPU: no GPU found)"
        return f"the inputs' device ({cuda_device_name()}, or the CPU)"

    def dtypes(self, spec: Any) -> str:
        """The Cache tab's dtypes of a kernel: '(float32) → float32'."""
        return f"({', '.join(spec.inputs)}) → {spec.output}"

    def log_note(self, spec: Any, earlier: Sequence[Any]) -> str:
        """A line of the Compile log under a kernel's label (none for reductions and scans)."""
        return ""

    def counterpart(self, fn: Any, spec: Any) -> tuple[str, str]:
        """The CUDA source of a host kernel's counterpart (the columns kernel for the host's column
        walk, the grid kernel otherwise: it serves any layout), and what it is."""
        from jiter_magic.kernels.reduce_family import REDUCTION
        from jiter_magic.planning.reduce_spec import COLUMNS, GRID, HOST_COLUMNS

        spec = replace(spec, path=COLUMNS if spec.path == HOST_COLUMNS else GRID, vec=1)
        return (REDUCTION.render(fn.binding, spec, "cuda"),
                f"the {spec.path} kernel ({spec.kept_ndim}-d kept x {spec.reduced_ndim}-d reduced)")


class ScanKind(PanelKind):
    """A scan: a reduction's roles, its identity a tuple of the state's values, the state's size."""

    title, word = "ScanFunction", "scan"

    def facts(self, fn: Any) -> list[Fact]:
        binding, dim = fn.binding, getattr(fn, "default_dim", None)
        state = [] if binding.state == 1 else [Fact("state", f"{binding.state} values", False)]
        return [Fact("inputs", ", ".join(binding.input_names), in_header=False),
                Fact("identity", repr(fn.identity)), *state, Fact("kwargs", kwargs_text(fn)),
                Fact("default dim", "none (each call names its dim)" if dim is None else repr(dim), False)]

    def dtypes(self, spec: Any) -> str:
        """'(float32, float32) → 2 x float32': a result a state value, or values with their indices."""
        text = spec.describe()
        return text[text.index("("):text.index(" accumulating")].replace(" -> ", " → ")

    def counterpart(self, fn: Any, spec: Any) -> tuple[str, str]:
        """The warp-per-row kernel for the host's row walk, the column kernel for its column walk."""
        from jiter_magic.kernels.scan_family import SCAN
        from jiter_magic.planning.scan_plan import COLUMN_SCAN, SCAN_COLUMNS, WARP_SCAN

        spec = replace(spec, path=COLUMN_SCAN if spec.path == SCAN_COLUMNS else WARP_SCAN, vec=1, staged=False)
        return SCAN.render(fn.binding, spec, "cuda"), f"the {spec.path} kernel ({spec.kept_ndim}-d kept)"


class ElementwiseKind(PanelKind):
    """An elementwise function: its signature, extras, outputs and backend; a kernel is a specialization."""

    title, noun, built, column = "JitFunction", "specialization", "compiled", "path"

    def summary(self, fn: Any) -> str:
        return str(fn.functor.signature)

    def summary_html(self, fn: Any) -> str:
        return f"<code>{html.escape(self.summary(fn))}</code>"

    def facts(self, fn: Any) -> list[Fact]:
        return [Fact("kwargs", kwargs_text(fn)), Fact("outputs", str(fn.num_outputs), False),
                Fact("backend", fn.backend, False)]

    def text_lines(self, fn: Any) -> list[str]:
        return [f"kwargs: {kwargs_text(fn)}", f"outputs: {fn.num_outputs}, backend: {fn.backend}"]

    def header_facts(self, fn: Any) -> list[str]:
        return [f"kwargs <code>{html.escape(kwargs_text(fn))}</code>", counted(fn.num_outputs, "output")]

    def runs_on(self, fn: Any) -> str:
        """'the CPU', 'cuda:0, NVIDIA H200', 'the CPU (no GPU found)': by the function's backend."""
        from jiter_magic.runtime.inspection import cuda_available, cuda_device_name

        if fn.backend == "cpu":
            return "the CPU"
        if not cuda_available():
            return "the CPU (no GPU found)" if fn.backend == "auto" else "CUDA, but no GPU was found"
        device = cuda_device_name()
        return device if fn.backend == "cuda" else f"the inputs' device ({device}, or the CPU)"

    def dtypes(self, spec: Any) -> str:
        from jiter_magic.kernels import dtypes_text

        return dtypes_text(spec).replace(" -> ", " → ")

    def log_note(self, spec: Any, earlier: Sequence[Any]) -> str:
        """Why the specialization is new beside the function's earlier ones."""
        from jiter_magic.kernels.novelty import novelty

        return novelty(spec, earlier)

    def counterpart(self, fn: Any, spec: Any) -> tuple[str, str]:
        """The same functor, dtypes and scalar kinds on CUDA's path for the call (runtime/inspection.py)."""
        from jiter_magic.kernels import identity
        from jiter_magic.kernels.render import render
        from jiter_magic.runtime.inspection import cuda_counterpart

        spec = cuda_counterpart(spec)
        return render(fn.binding, spec, "cuda"), identity(spec)


KINDS: dict[str, PanelKind] = {"elementwise": ElementwiseKind(), "reduction": PanelKind(), "scan": ScanKind()}


def kind_of(fn: KernelFunction) -> PanelKind:
    """The hook of `fn`'s kind of operation."""
    return KINDS[fn.operation]


def kwargs_text(fn: KernelFunction) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in fn.kwargs.items()) or "none"
