"""Code a kernel library runs when it is loaded, tried first in a child process.

A code string may define a global object with a constructor or a non-constant initializer;
its library then runs that code inside `dlopen` (and its destructors inside `dlclose`), where
no fault guard can help: a throw there ends the process with std::terminate, and jumping out
of a fault would leave the dynamic loader's lock held. So a host library whose initializer
table is longer than that of the fault-guard runtime (same compiler, same options, no
initializers of its own) is first loaded and unloaded in a child process; if the child dies,
the library is refused with a KernelFaultError and this process never runs that code.
Each library is tried once a process. Libraries that are not ELF are not checked.
"""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading

from jiter_magic.errors import KernelFaultError
from jiter_magic.state import RUNTIME

_INITIALIZER_SECTIONS = (b".init_array", b".ctors", b".preinit_array")
_TRIAL_SECONDS = 60.0
_TRIAL = """
import _ctypes, ctypes, os, sys
ctypes.CDLL(sys.argv[1], mode=os.RTLD_GLOBAL)
library = ctypes.CDLL(sys.argv[2])
_ctypes.dlclose(library._handle)
"""


class LoadVerdicts:
    """What trying each library with initializers found, by cache key: '' (it loads cleanly) or
    why it does not. A part of `RUNTIME`."""

    def __init__(self) -> None:
        self.by_key: dict[str, str] = {}
        self.lock = threading.Lock()

    def after_fork_in_child(self) -> None:
        self.lock = threading.Lock()


def initializer_bytes(binary: bytes) -> int | None:
    """The size of an ELF library's initializer tables (.init_array, .ctors, .preinit_array);
    None when `binary` is not a well-formed ELF file."""
    try:
        if binary[:4] != b"\x7fELF" or binary[4] not in (1, 2) or binary[5] not in (1, 2):
            return None
        wide, order = binary[4] == 2, "<" if binary[5] == 1 else ">"
        header = f"{order}IIQQQQIIQQ" if wide else f"{order}IIIIIIIIII"
        offset = struct.unpack_from(order + ("Q" if wide else "I"), binary, 0x28 if wide else 0x20)[0]
        entry_size, count, names_index = struct.unpack_from(order + "HHH", binary, 0x3A if wide else 0x2E)
        sections = [struct.unpack_from(header, binary, offset + i * entry_size) for i in range(count)]
        names_at = sections[names_index][4]
        total = 0
        for section in sections:
            start = names_at + section[0]
            if binary[start:binary.index(b"\0", start)] in _INITIALIZER_SECTIONS:
                total += section[5]
        return total
    except (struct.error, IndexError, ValueError):
        return None


def runs_code_when_loaded(binary: bytes, baseline: bytes) -> bool:
    """True when `binary` has more initializers than `baseline` (a library with none of its own)."""
    size, base = initializer_bytes(binary), initializer_bytes(baseline)
    return size is not None and base is not None and size > base


def check_loading(binary: bytes, runtime: bytes, key: str, name: str) -> None:
    """Refuse `binary` (KernelFaultError) when loading or unloading it ends a child process."""
    if not runs_code_when_loaded(binary, runtime):
        return
    verdicts = RUNTIME.part(LoadVerdicts)
    with verdicts.lock:
        verdict = verdicts.by_key.get(key)
        if verdict is None:
            verdict = verdicts.by_key[key] = _trial(binary, runtime)
    if verdict:
        raise KernelFaultError(
            f"{name}: the code string runs code when its library is loaded or unloaded (a global object with a "
            f"constructor or destructor, or a global initialized by a call), and that code {verdict}. It was tried in "
            "a separate process, so this one is unharmed; do that work inside the functor instead (a function-local "
            "static is initialized on the first call, under the fault guard)")


def _trial(binary: bytes, runtime: bytes) -> str:
    """Load and unload `binary` in a child process: '' when that works, else what went wrong."""
    with tempfile.TemporaryDirectory(prefix="jiter_magic-trial-") as folder:
        paths = [os.path.join(folder, name) for name in ("runtime.so", "kernel.so")]
        for path, data in zip(paths, (runtime, binary)):
            with open(path, "wb") as handle:
                handle.write(data)
        try:
            done = subprocess.run([sys.executable, "-c", _TRIAL, *paths], capture_output=True, text=True,
                                  timeout=_TRIAL_SECONDS, check=False)
        except subprocess.TimeoutExpired:
            return f"did not finish within {_TRIAL_SECONDS:.0f} s"
        except OSError as exc:
            return f"could not be tried ({exc})"
    if done.returncode == 0:
        return ""
    said = " ".join(done.stderr.split())[-300:]
    if done.returncode < 0:
        number = -done.returncode
        what = signal.Signals(number).name if number in signal.Signals._value2member_map_ else f"signal {number}"
        return f"ended the trial process with {what}" + (f" ({said})" if said else "")
    return f"failed with exit status {done.returncode}" + (f" ({said})" if said else "")
