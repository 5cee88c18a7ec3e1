"""Every `JITER_MAGIC_*` environment variable, parsed in this one module.

A setting is read from the environment each time it is asked for (a test or a notebook may
change it while the process runs), and each raw value is parsed once: a value that is not valid
warns once (a `SettingWarning` naming the variable and what it expects) and the default is used.
Nothing here is asked on the hot path of a call; plans and builds ask.
"""
from __future__ import annotations

import functools
import math
import os
import re
import warnings
from collections.abc import Callable
from typing import Generic, TypeVar

from .errors import SettingWarning

Value = TypeVar("Value")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)


class Setting(Generic[Value]):
    """One variable: its name, its default, and how its text becomes a value (None: not valid)."""

    def __init__(self, name: str, default: Value, parse: Callable[[str], Value | None], expected: str) -> None:
        self.name = name
        self.default = default
        self.parse = parse
        self.expected = expected

    def get(self) -> Value:
        return _parsed(self, os.environ.get(self.name, "").strip())


@functools.lru_cache(maxsize=128)  # one parse and at most one warning per variable and value
def _parsed(setting: Setting[Value], text: str) -> Value:
    if not text:
        return setting.default
    value = setting.parse(text)
    if value is None:
        warnings.warn(f"jiter_magic: {setting.name}={text!r} is not valid: expected {setting.expected}; "
                      f"using the default, {setting.default!r}", SettingWarning, 4)
        return setting.default
    return value


def _switch(text: str) -> bool | None:
    lowered = text.lower()
    return True if lowered in _TRUE else False if lowered in _FALSE else None


def _size(text: str) -> int | None:
    match = _SIZE.fullmatch(text)
    if match is None:
        return None
    value = int(float(match[1]) * 1024 ** " kmgt".index(match[2].lower() or " "))
    return value if value > 0 else None


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _seconds_or_off(text: str) -> float | None:
    """Seconds, or inf for a word that turns the thing off ("0" is zero seconds here, not off)."""
    return math.inf if text.lower() in ("off", "no", "false", "none") else _seconds(text)


def _panel(text: str) -> str | None:
    lowered = text.lower()
    return lowered if lowered in ("auto", "static", "widget") else None


_SWITCH = "1, 0, true, false, yes, no, on or off"
CACHE_DIR = Setting[str]("JITER_MAGIC_CACHE_DIR", "", str, "a directory")
DISK_CACHE = Setting("JITER_MAGIC_DISK_CACHE", True, _switch, _SWITCH)
CACHE_MAX_BYTES = Setting("JITER_MAGIC_CACHE_MAX_BYTES", 1 << 30, _size,
                          "a positive size in bytes, such as 1073741824, 500M or 2G")
CACHE_LOCK_TIMEOUT = Setting("JITER_MAGIC_CACHE_LOCK_TIMEOUT", 60.0, _seconds, "seconds, a number >= 0")
# Read as written (lower case); whether NVRTC compiles for it is checked where NVRTC is known,
# compilers/nvrtc_archs.py, which warns and uses the default the same way.
CUDA_ARCH = Setting("JITER_MAGIC_CUDA_ARCH", "sm_90", str.lower, "a CUDA architecture NVRTC compiles for")
DEBUG = Setting("JITER_MAGIC_DEBUG", False, _switch, _SWITCH)
FAST_CALL = Setting("JITER_MAGIC_FAST_CALL", True, _switch, _SWITCH)
# inf: never (the notice is off).
NOTICE_AFTER = Setting("JITER_MAGIC_NOTICE_AFTER", 0.5, _seconds_or_off, "seconds (a number >= 0) or off")
PANEL = Setting("JITER_MAGIC_PANEL", "auto", _panel, "auto, static or widget")
ALL: tuple[Setting, ...] = (CACHE_DIR, DISK_CACHE, CACHE_MAX_BYTES, CACHE_LOCK_TIMEOUT, CUDA_ARCH, DEBUG,
                            FAST_CALL, NOTICE_AFTER, PANEL)
