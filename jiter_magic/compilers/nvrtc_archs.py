"""The architecture NVRTC compiles for without a GPU: `JITER_MAGIC_CUDA_ARCH`, checked against
the list NVRTC itself gives.

Which architectures are valid depends on the NVRTC installed (NVRTC 13 dropped everything before
sm_75), which the settings layer below cannot know: it only reads the variable. A value NVRTC
would refuse warns here, once, naming the variable and the values this NVRTC takes, and the
default is used, rather than every compile failing with NVRTC's "invalid value for
--gpu-architecture", which names no variable. Where NVRTC cannot be asked (not installed), the
value's form is checked (sm_XY, an optional suffix), and the compile says the rest.
"""
from __future__ import annotations

import functools
import re
import warnings

import jiter_magic.settings as settings
from jiter_magic.compilers.nvrtc import supported_archs
from jiter_magic.errors import SettingWarning

# sm_XY with an optional suffix: `a` (architecture-specific features, sm_90a and newer) or `f`
# (family-portable, sm_100f and newer); NVRTC lists the plain numbers only.
_ARCH = re.compile(r"sm_(\d{2,3})([af]?)")
_SUFFIX_FROM = {"": 0, "a": 90, "f": 100}
_EXAMPLES = "sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100, sm_120"


def default_arch() -> str:
    """Architecture to compile for when no GPU is present (inspection, CI): JITER_MAGIC_CUDA_ARCH,
    when NVRTC compiles for it, or sm_90."""
    return checked_arch(settings.CUDA_ARCH.get())


def _valid(arch: str, supported: tuple[int, ...] | None) -> bool:
    match = _ARCH.fullmatch(arch)
    if match is None:
        return False
    number = int(match[1])
    if number < _SUFFIX_FROM[match[2]]:
        return False
    return number >= 50 if supported is None else number in supported


def _expected(supported: tuple[int, ...] | None) -> str:
    if supported is None:
        return f"a CUDA architecture such as {_EXAMPLES} (NVRTC was not found to list its own)"
    names = ", ".join(f"sm_{n}" for n in supported)
    return (f"one of the architectures this NVRTC compiles for: {names} (sm_90 and newer also with "
            "an a suffix, sm_100 and newer with an f suffix: sm_90a, sm_100f)")


@functools.lru_cache(maxsize=32)  # one check, and at most one warning, a value
def checked_arch(arch: str) -> str:
    """`arch` if NVRTC compiles for it, else (after one `SettingWarning`) the variable's default."""
    default = settings.CUDA_ARCH.default
    if arch == default:
        return arch  # the default needs no NVRTC to be asked (finding it costs a new process 50 ms)
    supported = supported_archs()
    if _valid(arch, supported):
        return arch
    warnings.warn(f"jiter_magic: {settings.CUDA_ARCH.name}={arch!r} is not valid: expected "
                  f"{_expected(supported)}; using the default, {default!r}", SettingWarning, 3)
    return default
