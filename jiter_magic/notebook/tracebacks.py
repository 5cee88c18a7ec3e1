"""A mistake in a notebook call shown under the cell's own line, without jiter_magic's frames.

A call's facade drops the frames that found a mistake, but the frame that re-raised it stays
(its line `raise for_caller(error) ...`), a `%%jiterator --reduce` cell's reduction adds
one more, and a line magic adds IPython's dispatch: machinery that says nothing about the mistake,
whose message says all. With the extension loaded, IPython shows a `JiterError` through
`show_mistake`: its traceback without frames from jiter_magic's or IPython's own files, so the last
frame shown is the user's line (or the user's own function that made the call). Errors that render
themselves (a `%%jiterator` cell's compile error) do so as before; JITER_MAGIC_DEBUG=1 shows every
frame; other exceptions, a bug of jiter_magic's own among them, are untouched.
"""
from __future__ import annotations

import os
import types
from typing import Any

import IPython

import jiter_magic.settings as settings
from jiter_magic.errors import JiterError

# Files whose frames a mistake's traceback leaves out: jiter_magic's and IPython's own.
# (jiter_magic's folder is the one above this file's: importing the package itself would be an import up.)
_INTERNAL = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
             os.path.dirname(IPython.__file__ or "") + os.sep)


def without_internal_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback's frames outside jiter_magic and IPython, in order (None if there are none)."""
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_INTERNAL):
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def show_mistake(shell: Any, etype: type[BaseException], value: BaseException, tb: types.TracebackType | None,
                 tb_offset: int | None = None) -> list[str]:
    """IPython's handler of `JiterError`s (`set_custom_exc`): the usual traceback display (so
    `%debug` and `%tb` work), of the traceback without internal frames."""
    if not settings.DEBUG.get():
        tb = without_internal_frames(tb) or tb
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)
    return []


def install(shell: Any) -> None:
    """Show jiter_magic's mistakes with `show_mistake`, unless the shell has a handler of its own."""
    if not shell.custom_exceptions:
        shell.set_custom_exc((JiterError,), show_mistake)


def uninstall(shell: Any) -> None:
    if shell.custom_exceptions == (JiterError,):
        shell.set_custom_exc((), None)
