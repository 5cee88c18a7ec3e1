"""`jiter_magic.settings`: every JITER_MAGIC_* variable parsed in one place, a bad value warned about
once (naming the variable and what it expects) and replaced by its default."""
from __future__ import annotations

import math
import pathlib
import re
import warnings

import pytest

from jiter_magic import SettingWarning, settings
from jiter_magic.compilers import nvrtc_archs
from jiter_magic.compilers.nvrtc import supported_archs

PACKAGE = pathlib.Path(settings.__file__).parent


@pytest.fixture(autouse=True)
def _fresh_parses():
    settings._parsed.cache_clear()
    nvrtc_archs.checked_arch.cache_clear()
    yield
    settings._parsed.cache_clear()
    nvrtc_archs.checked_arch.cache_clear()


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
    (settings.CACHE_DIR, "/tmp/somewhere", "/tmp/somewhere"),
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
    from jiter_magic.compilers.nvrtc_archs import default_arch

    monkeypatch.setenv("JITER_MAGIC_CUDA_ARCH", "sm_86")
    assert _quietly_arch() == "sm_86"
    monkeypatch.setenv("JITER_MAGIC_CUDA_ARCH", "sm_bogus")
    with pytest.warns(SettingWarning, match="JITER_MAGIC_CUDA_ARCH='sm_bogus'"):
        assert default_arch() == "sm_90"


def _quietly_arch() -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return nvrtc_archs.default_arch()


needs_nvrtc = pytest.mark.skipif(supported_archs() is None, reason="no NVRTC here to list its architectures")


@needs_nvrtc
def test_nvrtc_lists_the_architectures_it_compiles_for():
    archs = supported_archs()
    assert archs == tuple(sorted(archs)) and all(type(n) is int for n in archs)
    assert 90 in archs and min(archs) >= 50  # sm_90 is the default: every NVRTC 12 and 13 takes it


@needs_nvrtc
@pytest.mark.parametrize("text, expected", [
    ("sm_90", "sm_90"), ("sm_120", "sm_120"), ("SM_90a", "sm_90a"), ("sm_100f", "sm_100f"), ("sm_75", "sm_75"),
])
def test_architectures_nvrtc_compiles_for_are_taken(monkeypatch, text, expected):
    if int(expected[3:].rstrip("af")) not in supported_archs():
        pytest.skip(f"this NVRTC does not compile for {expected}")
    monkeypatch.setenv("JITER_MAGIC_CUDA_ARCH", text)
    assert _quietly_arch() == expected


@needs_nvrtc
@pytest.mark.parametrize("text", ["sm_bogus", "sm_35", "sm_55", "sm_99", "compute_90", "sm_80a", "sm_90f", "90"])
def test_an_architecture_nvrtc_does_not_take_warns_once_with_the_valid_ones_and_gives_the_default(monkeypatch, text):
    monkeypatch.setenv("JITER_MAGIC_CUDA_ARCH", text)
    with pytest.warns(SettingWarning) as record:
        assert nvrtc_archs.default_arch() == "sm_90"
    assert len(record) == 1
    message = str(record[0].message)
    valid = ", ".join(f"sm_{n}" for n in supported_archs())
    assert message.startswith(f"jiter_magic: JITER_MAGIC_CUDA_ARCH={text!r} is not valid: expected one of the "
                              f"architectures this NVRTC compiles for: {valid} (")
    assert "sm_90" in valid and message.endswith("using the default, 'sm_90'")
    assert _quietly_arch() == "sm_90"  # once: asked again, it says nothing more


def test_without_nvrtc_only_the_form_of_an_architecture_is_checked():
    assert [nvrtc_archs._valid(a, None) for a in ("sm_52", "sm_90a", "sm_100f", "sm_35", "sm_80a", "sm_x")] == [
        True, True, True, False, False, False]
    assert "a CUDA architecture such as sm_80" in nvrtc_archs._expected(None)


@needs_nvrtc
def test_a_compile_without_a_gpu_uses_the_default_when_the_setting_is_refused(monkeypatch):
    from jiter_magic.compilers.nvrtc import NvrtcCompiler

    monkeypatch.setenv("JITER_MAGIC_CUDA_ARCH", "sm_99")
    with pytest.warns(SettingWarning, match="JITER_MAGIC_CUDA_ARCH='sm_99'"):
        arch = nvrtc_archs.default_arch()
    result = NvrtcCompiler(arch).compile('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }', "k")
    assert arch == "sm_90" and result.binary[:4] == b"\x7fELF"


def test_every_variable_is_read_in_the_settings_module_alone():
    """No other module reads a JITER_MAGIC_* variable from the environment itself."""
    reads = re.compile(r"environ(?:\.get)?\s*[\[(]\s*[\"']JITER_MAGIC_|getenv\(\s*[\"']JITER_MAGIC_")
    readers = [str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
               if path.name != "settings.py" and reads.search(path.read_text())]
    assert readers == []
    named = {s.name for s in settings.ALL}
    mentioned = set(re.findall(r"JITER_MAGIC_[A-Z0-9_]+", "".join(p.read_text() for p in PACKAGE.rglob("*.py"))))
    assert mentioned <= named, mentioned - named  # every variable the package names is one of these
