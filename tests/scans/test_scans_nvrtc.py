"""Every generated CUDA scan kernel compiles with NVRTC for sm_80 and sm_90, with no GPU: each path,
plain, exclusive, with indices, with a state of two values (and a map writing it; h alone of it), a
finalize, extras and the dtypes whose accumulators differ. The sources' `static_assert` on `sizeof(jm_Args)`
checks the struct against the packer in each compile."""
from __future__ import annotations

import itertools
import re

import pytest
from scan_functions import ADD, cummax, cumsum, ema, linear, linear_h, logcumsumexp

from jiter_magic import create_scan_fn
from jiter_magic.compilers.nvrtc import NvrtcCompiler
from jiter_magic.errors import InvalidArgumentError
from jiter_magic.kernels import scan_cuda, scan_entries, scan_loads, scan_lookback
from jiter_magic.planning.scan_plan import CUDA_SCAN_PATHS

try:
    from cupy.cuda import nvrtc as _cupy_nvrtc  # noqa: F401 - NVRTC through CuPy; works with no GPU
except ImportError:  # pragma: no cover - depends on the installation
    pytest.skip("CuPy's NVRTC binding is not installed", allow_module_level=True)

ARCHES = ("sm_80", "sm_90")
MEAN = create_scan_fn(ADD + "template <typename T> T mean(T total, int64_t n) { return total / T(n); }\n"
                      "template <typename T> T scaled(T x, T alpha) { return alpha * x; }\n", 0, map="scaled",
                      combine="add", finalize="mean", alpha=1.0)
FUNCTIONS = {"cumsum": cumsum, "logcumsumexp": logcumsumexp, "cummax": cummax, "linear": linear, "ema": ema,
             "mean": MEAN, "linear_h": linear_h}
_COMPILERS: dict[str, NvrtcCompiler] = {}


def compile_cuda(fn, *dtypes, arch, **spec):
    if arch not in _COMPILERS:
        _COMPILERS[arch] = NvrtcCompiler(arch)
    source = fn.source(*dtypes, **spec)
    result = _COMPILERS[arch].compile(source, fn.name)
    assert result.binary[:4] == b"\x7fELF"
    return source


@pytest.mark.parametrize(("name", "path", "exclusive"), list(itertools.product(FUNCTIONS, CUDA_SCAN_PATHS,
                                                                               (False, True))))
def test_every_path_and_kind_of_state_compiles(name, path, exclusive):
    fn = FUNCTIONS[name]
    for staged in (False, True) if path != "column_scan" else (False,):
        source = compile_cuda(fn, path=path, exclusive=exclusive, staged=staged, arch="sm_90")
        # Deterministic: fixed orders, and no atomics but the look-back's tile counter (which tile a
        # block scans, never how values group).
        assert source.count("atomic") == (path == "lookback_scan")
        assert ("jm_buf[" in source) == staged
        assert name != "linear_h" or "jm_out1" not in source  # h alone: one array written, the state whole


@pytest.mark.parametrize(("dtype", "arch"), list(itertools.product(
    ("float16", "bfloat16", "float64", "int32", "int8", "bool", "uint8", "int64"), ARCHES)))
def test_dtypes_compile_on_each_path(dtype, arch):
    for path in CUDA_SCAN_PATHS:
        compile_cuda(cumsum, dtype, path=path, arch=arch)
    compile_cuda(cummax, dtype, path="block_scan", arch=arch)


def test_staging_is_chosen_where_a_tile_of_states_fits_shared_memory():
    assert scan_cuda.staged("block_scan", "float32", 1, False) and scan_cuda.staged("warp_scan", "float64", 2, False)
    assert scan_cuda.staged("lookback_scan", "float32", 1, True)  # a value and its index: 16 bytes
    assert not scan_cuda.staged("block_scan", "float64", 3, False) and not scan_cuda.staged("column_scan", "int64",
                                                                                             1, False)
    for path in CUDA_SCAN_PATHS[:2] + CUDA_SCAN_PATHS[3:]:
        compile_cuda(cumsum, "float16", path=path, staged=True, arch="sm_80")
        compile_cuda(cummax, "int8", path=path, staged=True, exclusive=True, arch="sm_80")


def test_kept_loop_dims_compile():
    for path in CUDA_SCAN_PATHS:
        compile_cuda(linear, "float32", "float64", path=path, kept_ndim=3, arch="sm_80")


@pytest.mark.parametrize("path", CUDA_SCAN_PATHS)
def test_ptx_keeps_the_state_in_registers(path):
    """No local memory: each thread's states (8 of a linear recurrence's pair, 16 of a float32
    cumsum's value) and the kernel's arguments stay in registers and the parameter bank (a loop that
    could not be unrolled, or a helper taking the arguments' address that was not inlined, would
    spill them)."""
    for function in (linear, cumsum):
        for staged in (False, True) if path != "column_scan" else (False,):
            ptx = function.inspect(path=path, kind="ptx", staged=staged)
            assert ".entry jm_kernel" in ptx and ".local" not in ptx


def test_host_assembly_and_the_kinds_that_fit_a_path():
    assert "jm_kernel" in cumsum.inspect(kind="asm")
    with pytest.raises(InvalidArgumentError, match="does not fit"):
        cumsum.inspect(path="block_scan", kind="asm")


@pytest.mark.parametrize("path", CUDA_SCAN_PATHS)
def test_every_offset_multiplies_a_whole_position_by_the_step(path):
    """An element's offset is its row's plus its position times the operand's step: a position that
    is a sum must be multiplied whole (a staged tile's `jm_j0 + jm_x`, a column's `jm_j0 + jm_i`)."""
    for staged in (False, True) if path != "column_scan" else (False,):
        source = FUNCTIONS["linear"].source(path=path, staged=staged)
        positions = re.findall(r"jm_k\d+ \+ (.*?) \* jm_a\.jm_step\[", source)
        assert positions and all(p.startswith("(") and p.endswith(")") for p in positions), positions


def test_the_look_back_publishes_a_state_before_its_flag_and_never_spins_for_ever(monkeypatch):
    """Packed (the default): each 8-byte word of an entry carries its flag and is written and read
    whole, with no fence; apart: a state is written, fenced, then flagged, and a reader spins on the
    flag, fences, then reads the state past L1. Either way a spin that never ends traps (the launch
    fails) instead of hanging the GPU."""
    monkeypatch.setattr(scan_lookback, "WINDOW", 0)  # the tree; the window publishes and reads the same way
    source = cumsum.source(path="lookback_scan")
    assert "__threadfence" not in source and "jm_flags" not in source
    put = source[source.index("void jm_put("):]
    assert put.index("st.relaxed.gpu.b64") < put.index("<< 32 | 1ull")
    wait = source[source.index("jm_get(const long long* jm_slot"):]
    assert wait.index("ld.relaxed.gpu.b64") < wait.index("!= 0u") < wait.index("__trap()") < wait.index("memcpy(")
    monkeypatch.setattr(scan_entries, "PACKED", 0)
    source = cumsum.source(path="lookback_scan")
    publish = source[source.index("if (jm_lane == 0) {"):]
    assert publish.index("jm_put(") < publish.index("__threadfence();") < publish.index("= 1;")
    wait = source[source.index("jm_get(const int* jm_flag"):]
    assert wait.index("volatile int*)jm_flag == 0") < wait.index("__trap()") < wait.index("__threadfence()") \
        < wait.index("__ldcg(")


# The look-back's tuning constants (bench/sweep_scan.py's variants), each compiled for the kinds
# of state the sweep's rows and the GPU tests take: one value, a half input, 8 bytes, a value and
# its index, two values, exclusive (a reversed scan is the same source, its direction an argument).
LOOKBACK_VARIANTS = ({"PACKED": 0, "BACKOFF": 200, "KEEP_STAGED": 0}, {"PERSIST": 2048, "BACKOFF": 100, "TILE_ITEMS": 32},
                     {"MIN_BLOCKS": 5, "TILE_ITEMS": 0, "WINDOW": 0}, {"TILE_ITEMS": 8, "KEEP_STAGED": 0, "WINDOW": 1},
                     {"WINDOW": 0, "PACKED": 0, "PERSIST": 2048}, {"WINDOW": 4, "PACKED": 0})


@pytest.mark.parametrize("variant", LOOKBACK_VARIANTS)
def test_each_look_back_variant_compiles(variant, monkeypatch):
    for name, value in variant.items():
        monkeypatch.setattr(scan_entries if hasattr(scan_entries, name) else scan_lookback, name, value)
    for fn, dtypes, extra in ((cumsum, ("float32",), {}), (cumsum, ("float16",), {}), (cumsum, ("int64",), {}),
                              (cummax, ("float32",), {}), (linear, ("float32", "float32"), {}),
                              (cumsum, ("float32",), {"exclusive": True}), (cumsum, ("float64",), {"staged": False})):
        source = compile_cuda(fn, *dtypes, **{"staged": True, "path": "lookback_scan", "arch": "sm_90", **extra})
        assert ("__nanosleep" in source) == ("BACKOFF" in variant)
        assert ("for (;;)" in source) == ("PERSIST" in variant)


def test_the_window_publishes_its_aggregate_before_it_waits_and_its_fold_after():
    """A(t) first (it waits on nothing, and later tiles wait on it), then the warps' reads of the
    window, a barrier, and I(t) = E(t) then A(t) from thread 0."""
    source = cumsum.source(path="lookback_scan", staged=True)
    body = source[source.index("const jm_index_t jm_base = jm_row * 2 * jm_tiles;"):]
    assert body.index("jm_put(jm_slots + (jm_base + jm_tile)") < body.index("jm_window(") \
        < body.index("__syncthreads();") < body.index("jm_put(jm_slots + (jm_base + jm_tiles + jm_tile)")
    assert "jm_index_t jm_s = jm_tile - 256 + jm_q;" in source  # 8 warps: 256 tiles


@pytest.mark.parametrize("variant", [{}, {"STAGED_LOADS": 1, "FULL_TILES": 0}, {"STAGED_LOADS": 1, "FULL_TILES": 1},
                                     {"STAGED_LOADS": 1, "FULL_TILES": 1, "KEEP_STAGED": 0},
                                     {"STAGED_LOADS": 1, "FULL_TILES": 1, "TILE_ITEMS": 32}])
def test_each_way_of_loading_a_staged_tile_compiles(monkeypatch, variant):
    """Issue 46: a staged tile's loads into registers first (STAGED_LOADS=1), unguarded where the
    tile is whole (FULL_TILES=1), or each stored as it comes (0, as shipped), with look-back tiles of
    16 or 32 elements a thread. Each kind of state on each staged path, plain and exclusive, the look-back's states
    kept in the staged slots or not; none spills."""
    for name, value in variant.items():
        monkeypatch.setattr(scan_lookback if name in ("KEEP_STAGED", "TILE_ITEMS") else scan_loads, name, value)
    kinds = [(cumsum, ("float32",)), (cumsum, ("float16",)), (cumsum, ("int64",)), (cummax, ("float32",)),
             (linear, ("float32", "float32")), (linear, ("float64", "float64"))]
    loads, full = scan_loads.STAGED_LOADS, scan_loads.STAGED_LOADS and scan_loads.FULL_TILES
    for (fn, dtypes), path, exclusive in itertools.product(kinds, ("warp_scan", "block_scan", "lookback_scan"),
                                                           (False, True)):
        source = compile_cuda(fn, *dtypes, path=path, staged=True, exclusive=exclusive, arch="sm_90")
        assert ("jm_n[jm_i] = jm_element(" in source) == bool(loads)
        assert ("<= jm_a.jm_count) {" in source) == bool(full)
    for path in ("block_scan", "lookback_scan"):
        assert ".local" not in linear.inspect(path=path, kind="ptx", staged=True)
