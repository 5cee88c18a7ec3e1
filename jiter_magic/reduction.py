"""`ReductionFunction`: the callable `create_reduction_fn` returns, a facade over the reduction call path.

Parsing and binding the named functions happen once, here; a call goes to runtime/reduce_call.py,
which plans it and launches the function's kernels (runtime/reduce_loader.py).
"""
from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any

from jiter_magic.errors import InvalidArgumentError
from jiter_magic.frontend.reduction import bind_reduction
from jiter_magic.planning.reduce_spec import CUDA_PATHS, HOST, HOST_PATHS, ReductionSpec, check_identity
from jiter_magic.planning.values import scalar_value
from jiter_magic.runtime import reduce_call
from jiter_magic.runtime.reduce_call import ValuesIndices
from jiter_magic.runtime.reduce_loader import BuiltReduction, ReductionKernels, render

__all__ = ["ReductionFunction", "ValuesIndices"]


class ReductionFunction:
    """A jitted reduction; call it as torch.sum: `fn(*inputs, dim=None, keepdim=False, dtype=None, out=None)`.
    One with indices (`create_multi_output_reduction_fn`) returns `ValuesIndices(values, indices)`
    and takes `out=(values, indices)`, as torch.max(x, dim) does."""

    def __init__(self, code_string: str, identity: object, map_name: str | None, combine: object,
                 finalize: object, kwargs: dict[str, object], indexed: bool = False) -> None:
        check_identity(identity)
        self.binding = bind_reduction(code_string, map_name, combine, finalize, list(kwargs), indexed)
        self.identity = identity
        self.code = code_string
        self.kwargs = {name: scalar_value(value, name) for name, value in kwargs.items()}
        self.name = self.__name__ = self.__qualname__ = self.binding.name
        self._kernels = ReductionKernels(self.binding)

    def __call__(self, *inputs: object, dim: object = None, keepdim: bool = False, dtype: object = None,
                 out: object = None, **kwargs: object) -> Any:
        options = {"dim": dim, "keepdim": keepdim, "dtype": dtype, "out": out}
        return reduce_call.run(self._kernels, self.identity, self.kwargs, inputs, options, kwargs)

    @property
    def num_inputs(self) -> int:
        return self.binding.num_inputs

    @property
    def num_outputs(self) -> int:
        """1, or 2 for a reduction with indices (its values and their indices)."""
        return 2 if self.binding.indexed else 1

    @property
    def specializations(self) -> list[BuiltReduction]:
        """Every kernel built for this function, in order."""
        return list(self._kernels.built)

    def source(self, *dtypes: str, path: str = HOST, output: str | None = None, kept_ndim: int = 1,
               reduced_ndim: int = 1, vec: int = 1, **kwargs: object) -> str:
        """The generated source of one kernel (no GPU, no compiler needed): input dtype names (all
        float32 by default), the kernel shape (`path`: 'host', or a CUDA one of
        `jiter_magic.kernels.reduce_cuda`) and its loop dims; kwargs override the extras' defaults."""
        return render(self.binding, self.spec(*dtypes, path=path, output=output, kept_ndim=kept_ndim,
                                              reduced_ndim=reduced_ndim, vec=vec, **kwargs))

    def spec(self, *dtypes: str, path: str = HOST, output: str | None = None, kept_ndim: int = 1,
             reduced_ndim: int = 1, vec: int = 1, **kwargs: object) -> ReductionSpec:
        """The spec of one kernel, as `source` takes it."""
        from jiter_magic.planning.reduce_spec import accumulate_dtype, identity_literal, result_dtype
        from jiter_magic.planning.values import scalar_kind

        inputs = tuple(dtypes) or ("float32",) * self.num_inputs
        result = result_dtype(inputs[0], output, self.binding.indexed)
        accumulate = accumulate_dtype(result)
        extras = reduce_call.extra_values(self.binding, self.kwargs, kwargs)
        if path not in HOST_PATHS + CUDA_PATHS:
            raise InvalidArgumentError(f"path must be one of {list(HOST_PATHS + CUDA_PATHS)}, got {path!r}")
        return ReductionSpec(inputs, result, accumulate, tuple(scalar_kind(v) for v in extras),
                             identity_literal(self.identity, accumulate), path=path, kept_ndim=kept_ndim,
                             reduced_ndim=reduced_ndim, vec=vec, indexed=self.binding.indexed)

    def __repr__(self) -> str:
        return f"<jiter_magic.ReductionFunction {self.name} combine={self.binding.combine.name}>"

    # Inspection and the notebook: compiled listings, warnings, and the panel, which follows builds.

    def inspect(self, *dtypes: str, kind: str = "ptx", path: str | None = None, output: str | None = None,
                kept_ndim: int = 1, reduced_ndim: int = 1, vec: int = 1, **kwargs: object) -> str:
        """The compiled code of one kernel as text (no GPU needed): kind='ptx' or 'sass' of a CUDA
        kernel shape (`path`, 'grid' by default), compiled by NVRTC, or kind='asm' of a host one
        ('host' by default); other arguments as `source` takes them. The code string's lines the
        compiler's line tables point at are shown as comments before their instructions."""
        from jiter_magic.compilers.nvrtc_archs import default_arch
        from jiter_magic.planning.reduce_spec import GRID
        from jiter_magic.runtime import inspection
        from jiter_magic.runtime.compiled_code import compiled_text

        path = path if path is not None else (HOST if kind == "asm" else GRID)
        backend = "cpu" if path in HOST_PATHS else "cuda"
        if kind in ("ptx", "sass") and backend == "cpu":
            raise InvalidArgumentError(f"kind={kind!r} is CUDA code: pass a CUDA path, one of {list(CUDA_PATHS)} "
                                       f"(for the host kernel path={path!r}, kind='asm')")
        if kind == "asm" and backend == "cuda":
            raise InvalidArgumentError(f"kind='asm' is a host kernel's assembly: pass path='host' or 'host_columns' "
                                       f"(for path={path!r}, kind='ptx' or kind='sass')")
        text = self.source(*dtypes, path=path, output=output, kept_ndim=kept_ndim, reduced_ndim=reduced_ndim,
                           vec=vec, **kwargs)
        arch = default_arch()
        if backend == "cuda" and inspection.cuda_available():
            from jiter_magic.runtime.backends.cuda import current_device, device_arch

            arch = device_arch(current_device())
        return compiled_text(kind, text, backend, arch, self.code)

    @property
    def warnings(self) -> list[str]:
        """Compiler warnings of the kernels built so far."""
        return [made.built.log for made in self._kernels.built if made.built.log.strip()]

    def add_listener(self, callback: Callable[[BuiltReduction], None]) -> None:
        """Call `callback(built)` whenever a new kernel is built (the notebook panel follows them)."""
        self._kernels.listeners.append(callback)

    def remove_listener(self, callback: Callable[[BuiltReduction], None]) -> None:
        if callback in self._kernels.listeners:
            self._kernels.listeners.remove(callback)

    def _repr_mimebundle_(self, include: Container[str] | None = None,
                          exclude: Container[str] | None = None) -> dict[str, Any]:
        from jiter_magic.notebook.reduce_panel import mimebundle  # a display in a notebook is its panel

        return mimebundle(self, include, exclude)
