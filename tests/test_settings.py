"""`jiter_magic.settings`: every JITER_MAGIC_* variable parsed in one place, a bad value warned about
once (naming the variable and what it expects) and replaced by its default."""
from __future__ import annotations

import math
import pathlib
import re
import warnings

import pytest

from jiter_magic import SettingWarning, settings

PACKAGE = pathlib.Path(settings.__file__).parent


@pytest.fixture(autouse=True)
def _fresh_parses():
    settings._parsed.cache_clear()
    yield
    settings._parsed.cache_clear()


def _quietly(setting: settings.Setting):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return setting.get()


@pytest.mark.parametrize(("setting", "text", "expected"), [
    (settings.DISK_CACHE, "0", False), (settings.DISK_CACHE, "Off", False), (settings.DISK_CACHE, "yes", True),
    (settings.FAST_CALL, "false", False), (settings.DEBUG, "1", True), (settings.DEBUG, "", False),
    (settings.CACHE_MAX_BYTES, "2G", 2 << 30), (settings.CACHE_MAX_BYTES, "64KiB", 65536),
    (settings.CACHE_LOCK_TIMEOUT, "0", 0.0), (settings.CACHE_LOCK_TIMEOUT, "2.5", 2.5),
    (settings.CUDA_ARCH, "sm_80", "sm_80"), (settings.CUDA_ARCH, "SM_90a", "sm_90a"),
    (settings.CUDA_ARCH, "sm_120", "sm_120"), (settings.CUDA_ARCH, "", "sm_90"),
    (settings.NOTICE_AFTER, "0", 0.0), (settings.NOTICE_AFTER, "off", math.inf), (settings.NOTICE_AFTER, "", 0.5),
    (settings.PANEL, "Static", "static"), (settings.PANEL, "", "auto"),
    (settings.CACHE_DIR, "/tmp/somewhere", "/tmp/somewhere"), (settings.FAST_CALL_DIR, "", ""),
])
def test_valid_values(monkeypatch, setting, text, expected):
    monkeypatch.setenv(setting.name, text)
    value = _quietly(setting)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(("setting", "text", "expects"), [
    (settings.DISK_CACHE, "maybe", "1, 0, true, false, yes, no, on or off"),
    (settings.FAST_CALL, "2", "1, 0, true, false, yes, no, on or off"),
    (settings.DEBUG, "verbose", "1, 0, true, false, yes, no, on or off"),
    (settings.CACHE_MAX_BYTES, "-5", "a positive size in bytes"),
    (settings.CACHE_MAX_BYTES, "0", "a positive size in bytes"),
    (settings.CACHE_LOCK_TIMEOUT, "nan", "seconds, a number >= 0"),
    (settings.CACHE_LOCK_TIMEOUT, "-1", "seconds, a number >= 0"),
    (settings.CUDA_ARCH, "sm_bogus", "a CUDA architecture such as sm_80, sm_86"),
    (settings.CUDA_ARCH, "sm_35", "a CUDA architecture"),
    (settings.CUDA_ARCH, "compute_90", "a CUDA architecture"),
    (settings.NOTICE_AFTER, "xyz", "seconds (a number >= 0) or off"),
    (settings.NOTICE_AFTER, "-3", "seconds (a number >= 0) or off"),
    (settings.NOTICE_AFTER, "nan", "seconds (a number >= 0) or off"),
    (settings.NOTICE_AFTER, "inf", "seconds (a number >= 0) or off"),  # never is spelled off
    (settings.NOTICE_AFTER, "1e400", "seconds (a number >= 0) or off"),
    (settings.NOTICE_AFTER, "0.5s", "seconds (a number >= 0) or off"),
    (settings.PANEL, "fancy", "auto, static or widget"),
])
def test_a_value_that_is_not_valid_warns_once_naming_the_variable_and_gives_the_default(monkeypatch, setting, text,
                                                                                        expects):
    monkeypatch.setenv(setting.name, text)
    with pytest.warns(SettingWarning) as record:
        assert setting.get() == setting.default
    assert len(record) == 1
    message = str(record[0].message)
    assert message.startswith(f"jiter_magic: {setting.name}={text!r} is not valid: expected {expects}")
    assert message.endswith(f"using the default, {setting.default!r}")
    assert _quietly(setting) == setting.default  # once: asked again, it says nothing more


@pytest.mark.parametrize("text", ["xyz", "nan", "-3", "inf"])
def test_a_bad_notice_threshold_warns_and_the_notice_keeps_its_default_delay(monkeypatch, text):
    """Issue 29: these once turned the compile notice off (or to 0 s) without a word."""
    from jiter_magic.runtime import notice

    monkeypatch.setenv("JITER_MAGIC_NOTICE_AFTER", text)
    with pytest.warns(SettingWarning) as record:
        after = notice.threshold()
    assert after == 0.5 and type(after) is float
    assert [str(r.message).split(" is not valid")[0] for r in record] == [f"jiter_magic: JITER_MAGIC_NOTICE_AFTER={text!r}"]
    monkeypatch.setenv("JITER_MAGIC_NOTICE_AFTER", "off")
    assert _quietly(settings.NOTICE_AFTER) == math.inf and notice.threshold() is None


def test_the_default_architecture_follows_the_setting(monkeypatch):
    from jiter_magic.compilers.nvrtc import default_arch

    monkeypatch.setenv("JITER_MAGIC_CUDA_ARCH", "sm_86")
    assert default_arch() == "sm_86"
    monkeypatch.setenv("JITER_MAGIC_CUDA_ARCH", "sm_bogus")
    with pytest.warns(SettingWarning, match="JITER_MAGIC_CUDA_ARCH='sm_bogus'"):
        assert default_arch() == "sm_90"


def test_every_variable_is_read_in_the_settings_module_alone():
    """No other module reads a JITER_MAGIC_* variable from the environment itself."""
    reads = re.compile(r"environ(?:\.get)?\s*[\[(]\s*[\"']JITER_MAGIC_|getenv\(\s*[\"']JITER_MAGIC_")
    readers = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
               if path.name != "settings.py" and reads.search(path.read_text())]
    assert readers == []
    named = {s.name for s in settings.ALL}
    mentioned = set(re.findall(r"JITER_MAGIC_[A-Z0-9_]+", "".join(p.read_text() for p in PACKAGE.rglob("*.py"))))
    assert mentioned <= named, mentioned - named  # every variable the package names is one of these
