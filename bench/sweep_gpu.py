"""Tuning sweeps for the contiguous and the tiled paths, each variant timed next to torch.

`--contiguous`: patches how the contiguous path picks its vector, how many elements a thread
moves, and whether its loads and stores carry streaming cache hints (`ld.global.cs` /
`st.global.cs`). `--tiled`: patches the tiled path's tile edge, rows of threads, and whether the
inputs read in the outputs' order are loaded before the block waits on its tile. Each variant
builds a fresh function and is timed with CUDA events in interleaved rounds next to torch's
jiterator and torch's native op on the same tensors, so each line reads "ours / torch" for that
variant. The defaults in kernels/contiguous.py and kernels/tiled.py come from these sweeps.

`--rows`: patches how many vectors a thread of the rows path moves (outer products, bias adds).
`--blocks`: patches the contiguous path's threads a block (128 shipped; 256 and 512).
`--per-thread`: the contiguous path with 16 and 32 elements a thread against the shipped choice.
`--grid-order`: the tiled path with its grid's x and y swapped (tiles of the second loop dimension
along x), against the shipped order.
`--tile-shapes`: the tiled path's tile edges (elements along the outputs' rows x along the tiled
inputs' rows, or 128 bytes of the widest tiled element), rows of threads, and batches a block walks;
with 1- and 2-byte cases and a copy of each case's bytes as its own ceiling. `--batched-tiles`: the
shipped tiles of batched loops against the earlier 32x32 tiles, NCHW read as NHWC with 256 and 32 channels.
`--packed`: the tiled path's packed accesses (2 or 4 elements of 1- and 2-byte dtypes as one 4-byte
access along both rows, `spec.params.pack`) off and on, with rows of threads for each pack; 1- and 2-byte
transposed, NCHW, misaligned and odd-sized cases, each with a copy of its bytes as its ceiling.
`--packed-batched`: batched packed kernels (NCHW int8 and float16 read as NHWC) with 32x32, 32x16
and 32x8 threads for 1-byte ones, with a minimum of blocks an SM asked through `__launch_bounds__`,
with and without the fence on the thread's indices at each batch, and with 2 batches a block.
`--batched`: the shipped contiguous path and torch's jiterator timed two ways, by events around each
call (as the benchmark does: the host's time up to the launch counts) and over 50 calls queued back
to back (only the kernels count), to tell host-side from device-side gaps.
`--math`: the math-heavy row (`sin(x)*exp(-y*y) + erf(x*y)/(1+tanh(x))`, float32 and float16) with the
shipped elements a thread (8), 4 and 16, and 128 or 256 threads a block: a math-bound kernel may want more independent
elements a thread than a bandwidth-bound one.
`--vector-tiles`: the tiled path's 16-byte accesses over 64x64 tiles for 4-byte elements
(`kernels/vector_tiles.py`) off, on for two loop dimensions only, and on everywhere: transposed,
3-d permuted and NCHW-as-NHWC float32 and int32 cases, each with a copy of its bytes as its ceiling.
`--narrow`: the contiguous path's 1- and 2-byte rows with torch's jiterator's shape of work (8
elements a thread, as one 8- or 16-byte vector or as two 4- or 8-byte ones) against the shipped one.

Usage on the GPU machine: python3 bench/sweep_gpu.py [--contiguous] [--tiled] [--rows] [--blocks] [--per-thread]
       [--grid-order] [--narrow] [--batched] [--tile-shapes]
       [--batched-tiles] [--packed] [--packed-batched] [--quick]
"""
from __future__ import annotations

import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import jiter_magic  # noqa: E402
from jiter_magic.kernels import base, contiguous, describe, packed_tiles, rows, tiled, vector_tiles  # noqa: E402
from jiter_magic.kernels import render as kernel_source  # noqa: E402
from jiter_magic.planning.dtypes import DTYPES  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gpu import timed  # noqa: E402

AXPY = "template <typename T> T my_kernel(T x, T y, T alpha) { return -x + alpha * y; }"
MATH = ("template <typename T> T mathy(T x, T y) "
        "{ return ::sin(x) * ::exp(-y * y) + ::erf(x * y) / (T(1) + ::tanh(x)); }")
CODE8 = "template <typename T> T f(T a, T b, T c, T d, T e, T g, T h, T i) { return a + b + c + d + e + g + h + i; }"
ORIGINAL_UNROLL = contiguous.unroll_of
THREAD_ROWS = tiled.thread_rows
ORIGINAL_RENDER = kernel_source.render_source

STREAMING = r"""
template <typename V> __device__ __forceinline__ V jm_ld_cs(const V* p) {
  V v;
  if constexpr (sizeof(V) == 16) *reinterpret_cast<int4*>(&v) = __ldcs(reinterpret_cast<const int4*>(p));
  else if constexpr (sizeof(V) == 8) *reinterpret_cast<int2*>(&v) = __ldcs(reinterpret_cast<const int2*>(p));
  else if constexpr (sizeof(V) == 4) *reinterpret_cast<int*>(&v) = __ldcs(reinterpret_cast<const int*>(p));
  else v = *p;
  return v;
}
template <typename V> __device__ __forceinline__ void jm_st_cs(V* p, const V& v) {
  if constexpr (sizeof(V) == 16) __stcs(reinterpret_cast<int4*>(p), *reinterpret_cast<const int4*>(&v));
  else if constexpr (sizeof(V) == 8) __stcs(reinterpret_cast<int2*>(p), *reinterpret_cast<const int2*>(&v));
  else if constexpr (sizeof(V) == 4) __stcs(reinterpret_cast<int*>(p), *reinterpret_cast<const int*>(&v));
  else *p = v;
}
"""
_LOAD = re.compile(r"\*reinterpret_cast<const (jm_vec<[^<>]+>)\*>\(([^;]+)\);")
_STORE = re.compile(r"^(\s*)\*reinterpret_cast<(jm_vec<[^<>]+>)\*>\(([^;]+)\) = (jm_y\d+);", re.M)


def streaming_source(binding, spec, backend):
    """The contiguous kernel with streaming (evict-first) vector loads and stores."""
    text, start = ORIGINAL_RENDER(binding, spec, backend)
    if spec.path != "contiguous" or backend != "cuda":
        return text, start
    anchor = "namespace jm {"
    text = text.replace(anchor, STREAMING + anchor, 1)
    text = _LOAD.sub(r"jm_ld_cs(reinterpret_cast<const \1*>(\2));", text)
    text = _STORE.sub(r"\1jm_st_cs(reinterpret_cast<\2*>(\3), \4);", text)
    return text, start + STREAMING.count("\n")


def set_contiguous(widest: int, per_thread_elems: int | None, streaming: bool) -> None:
    """Vectors of at most `widest` elements; a thread moves `per_thread_elems` elements (None: the
    shipped policy); streaming cache hints on the vector accesses or not."""

    def widest_vector(dtypes: list[str]) -> int:
        return max(1, min(widest, 16 // max(DTYPES[d].itemsize for d in dtypes)))

    def unroll_of(spec) -> int:
        if per_thread_elems is None:
            return ORIGINAL_UNROLL(spec)
        return max(1, per_thread_elems // spec.params.vec)

    base.widest_vector = widest_vector
    contiguous.widest_vector = widest_vector
    contiguous.unroll_of = unroll_of
    kernel_source.render_source = streaming_source if streaming else ORIGINAL_RENDER


def set_tiled(tile: int, rows: int | None, prefetch: bool) -> None:
    """rows None: the shipped choice by spec (`tiled.thread_rows`)."""
    tiled.TILE, tiled.PREFETCH = tile, prefetch
    tiled.thread_rows = THREAD_ROWS if rows is None else (lambda spec: rows)


ORIGINAL_GRID = tiled.Tiled.grid


def swapped_source(binding, spec, backend):
    """The tiled kernel with its grid's x and y swapped: blocks in a row of the grid walk the second
    loop dimension's tiles (the tiled input's rows) instead of the first's (the output's)."""
    text, start = ORIGINAL_RENDER(binding, spec, backend)
    if spec.path != "tiled" or backend != "cuda":
        return text, start
    text = text.replace("jm_i0_base = (jm_index_t)jm_block_x()", "jm_i0_base = (jm_index_t)jm_block_SWAP()")
    text = text.replace("jm_i1_base = (jm_index_t)jm_block_y()", "jm_i1_base = (jm_index_t)jm_block_x()")
    return text.replace("jm_block_SWAP()", "jm_block_y()"), start


def set_tiled_order(rows: int | None, swap: bool) -> None:
    set_tiled(32, rows, True)
    if swap:
        tiled.Tiled.grid = lambda self, spec, layout: (lambda g: (g[1], g[0], g[2]))(ORIGINAL_GRID(self, spec, layout))
        kernel_source.render_source = swapped_source
    else:
        tiled.Tiled.grid = ORIGINAL_GRID
        kernel_source.render_source = ORIGINAL_RENDER


TILE_EDGES = tiled.tile_edges


def edges_by_bytes(spec) -> tuple[int, int]:
    """Tile edges of 128 bytes of the widest tiled element (32 to 128 elements)."""
    names = (*spec.outputs, *(spec.inputs[i] for i in spec.params.tiled_inputs))
    edge = max(32, min(128, 128 // max(DTYPES[name].itemsize for name in names)))
    return edge, edge


def set_tile_shape(edges: str, rows: int | None, batches: int) -> None:
    """edges: "shipped", "AxB" (fixed, elements) or "bytes" (edges_by_bytes); rows None: the shipped
    rows; batches: batches a block walks (grid.z divided by it)."""
    set_tiled(32, rows, True)
    if edges == "shipped":
        tiled.tile_edges = TILE_EDGES
    elif edges == "bytes":
        tiled.tile_edges = edges_by_bytes
    else:
        fixed = tuple(int(e) for e in edges.split("x"))
        tiled.tile_edges = lambda spec: fixed
    tiled.BATCHES_A_BLOCK = batches


PACKS, PACKED_ROWS, PACKED_BATCHED_ROWS = packed_tiles.PACKS, dict(packed_tiles.PACKED_ROWS), \
    dict(packed_tiles.PACKED_BATCHED_ROWS)


def set_packed(packs: str, rows2: int | None, rows4: int | None) -> None:
    """packs: 'shipped', 'off' (scalar tiles), or the packs allowed ('2', '2,4'), with their rows of
    threads (two loop dimensions and batched alike); None: the shipped rows."""
    allowed = PACKS if packs == "shipped" else () if packs == "off" else tuple(int(p) for p in packs.split(","))
    packed_tiles.PACKS = allowed
    packed_tiles.PACKED_ROWS, packed_tiles.PACKED_BATCHED_ROWS = dict(PACKED_ROWS), dict(PACKED_BATCHED_ROWS)
    for table in (packed_tiles.PACKED_ROWS, packed_tiles.PACKED_BATCHED_ROWS):
        table.update({p: r for p, r in ((2, rows2), (4, rows4)) if r is not None})


def packed_cases() -> list:
    """1- and 2-byte layouts: transposed, NCHW read as NHWC, a misaligned view, odd sizes; float32 for reference."""
    s = 16384
    t = torch.rand(s, s, device="cuda").T
    u = torch.rand(s, s, device="cuda")
    found = [("transposed 16384^2 f32", AXPY, [t, u], 12 * s * s)]
    th, uh = t.half(), u.half()
    found.append(("transposed 16384^2 f16", AXPY, [th, uh], 6 * s * s))
    found.append(("transposed 16384^2 bf16", AXPY, [t.bfloat16(), u.bfloat16()], 6 * s * s))
    del t, u
    t8 = (torch.rand(s, s, device="cuda") * 100).to(torch.int8).T
    found.append(("transposed 16384^2 int8", AXPY, [t8, (torch.rand(s, s, device="cuda") * 100).to(torch.int8)],
                  3 * s * s))
    m = s - 1  # a view starting one element in: the scalar branch of the packed kernel
    found.append(("transposed f16 view [1:,1:]", AXPY, [th[1:, 1:], uh[1:, 1:]], 6 * m * m))
    odd = 16383
    found.append(("transposed 16383^2 f16", AXPY, [torch.rand(odd, odd, device="cuda").half().T,
                                                    torch.rand(odd, odd, device="cuda").half()], 6 * odd * odd))
    found += [case for case in nchw_cases(channels=(256, 64, 32)) if "float16" in case[0]]
    return found


FENCE = 'asm volatile("" : "+r"(jm_tx), "+r"(jm_ty));'


SHIPPED_TILE_WIDTH = packed_tiles.packed_runs


def square_tile_width(pack: int, size1: int) -> int:
    """Square packed tiles only, as before half tiles: none where the dimension is shorter."""
    return pack if size1 >= 32 * pack else 0


def half_tile_width(pack: int, size1: int) -> int:
    """Half tiles wherever the dimension holds one."""
    return pack // 2 if size1 >= 16 * pack else 0


def set_packed_batched(rows4: int, min_blocks: int, fence: bool = True, batches: int = 2,
                       widths: str = "shipped") -> None:
    """Batched packed kernels: rows of threads of 1-byte ones, a minimum of blocks an SM asked of
    the compiler through `__launch_bounds__` (0: none), which caps its registers, the fence on the
    thread's indices at each batch (`packed_tiles.thread_indices`) kept or taken out, batches a
    block walks, and the tiles' widths: shipped, square only, or half wherever they fit."""
    set_packed("shipped", None, None)
    packed_tiles.PACKED_BATCHED_ROWS[4] = rows4
    tiled.PACKED_BATCHES_A_BLOCK = batches
    packed_tiles.packed_runs = {"shipped": SHIPPED_TILE_WIDTH, "square": square_tile_width,
                                "half": half_tile_width}[widths]

    def bounded_source(binding, spec, backend):
        text, start = ORIGINAL_RENDER(binding, spec, backend)
        pack = spec.params.pack if spec.path == "tiled" else 1  # only the tiled path's record has one
        if pack > 1 and spec.ndim > 2 and backend == "cuda":
            if min_blocks and pack == 4:
                text = re.sub(r"__launch_bounds__\((\d+)\)", rf"__launch_bounds__(\1, {min_blocks})", text)
            if not fence:
                assert FENCE in text
                text = text.replace(FENCE, "")
        return text, start

    kernel_source.render_source = bounded_source


def packed_batched_cases() -> list:
    """NCHW int8 read as NHWC at 256, 64 and 192 channels, and at 256 with twice the images (the
    float16 case's bytes); float16 at 256 and 32 channels."""
    found = []
    for c, n, dtype in ((256, 64, torch.int8), (64, 256, torch.int8), (256, 128, torch.int8),
                        (192, 85, torch.int8), (256, 64, torch.float16), (32, 512, torch.float16)):
        nchw = (torch.rand(n, c, 64, 64, device="cuda") * 100).to(dtype)
        dense = (torch.rand(nchw.shape[0], 64, 64, c, device="cuda") * 100).to(dtype)
        found.append((f"NCHW as NHWC {n}x{c} {str(dtype)[6:]}", AXPY, [nchw.permute(0, 2, 3, 1), dense],
                      3 * nchw.numel() * nchw.element_size()))
    return found


def set_block(threads: int) -> None:
    """Threads a block of the contiguous path (the shipped policy picks vectors and unrolling)."""
    contiguous.BLOCK = threads
    contiguous.Contiguous.block = (threads, 1, 1)


def set_rows(unroll: int) -> None:
    rows.unroll_of = lambda spec: unroll


def rows_cases() -> list:
    s = 16384
    found = [("outer product (16384,1)+(1,16384) f32, GB/s of output", AXPY,
              [torch.rand(s, 1, device="cuda"), torch.rand(1, s, device="cuda")], 4 * s * s)]
    found.append(("outer product f16, GB/s of output", AXPY,
                  [torch.rand(s, 1, device="cuda").half(), torch.rand(1, s, device="cuda").half()], 2 * s * s))
    m, n = 16384, 8192
    found.append(("bias (N,) over (M,N) f32", AXPY,
                  [torch.rand(m, n, device="cuda"), torch.rand(n, device="cuda")], 8 * m * n + 4 * n))
    found.append(("bias (N,) over (M,N) f16", AXPY,
                  [torch.rand(m, n, device="cuda").half(), torch.rand(n, device="cuda").half()], 4 * m * n + 2 * n))
    return found


def contiguous_cases() -> list:
    found = []
    n = 1 << 28
    x, y = torch.rand(n + 1, device="cuda"), torch.rand(n + 1, device="cuda")
    found.append(("f32 contiguous", AXPY, [x[:n], y[:n]], 12 * n))
    found.append(("f32 misaligned x[1:]", AXPY, [x[1:], y[1:]], 12 * n))
    for dtype in (torch.int8, torch.uint8, torch.float16, torch.bfloat16, torch.float64):
        m = (1 << 30) // torch.empty((), dtype=dtype).element_size()
        xs = [(torch.rand(m, device="cuda") * 10).to(dtype) for _ in range(2)]
        found.append((f"{str(dtype)[6:]} contiguous", AXPY, xs, 3 * m * xs[0].element_size()))
    k = 1 << 26
    found.append(("8 inputs f32", CODE8, [torch.rand(k, device="cuda") for _ in range(8)], 36 * k))
    return found


def math_cases() -> list:
    n = 1 << 28
    return [(f"math {str(dtype)[6:]}", MATH, [torch.rand(n, device="cuda").to(dtype) for _ in range(2)],
             3 * n * torch.empty((), dtype=dtype).element_size()) for dtype in (torch.float32, torch.float16)]


def set_math(per_thread_elems: int | None, threads: int) -> None:
    set_contiguous(16, per_thread_elems, False)
    set_block(threads)


VECTORING = vector_tiles.vectoring


def set_vector_tiles(where: str) -> None:
    """'off', '2-d' (two loop dimensions only) or 'all'."""
    def vectoring(call, staged):
        if where == "off" or (where == "2-d" and call.layout.ndim > 2):
            return 1
        return VECTORING(call, staged)

    vector_tiles.vectoring = vectoring


def vector_tile_cases() -> list:
    s = 16384
    found = [("transposed 16384^2 f32", AXPY, [torch.rand(s, s, device="cuda").T, torch.rand(s, s, device="cuda")],
              12 * s * s)]
    found.append(("transposed 16384^2 int32", AXPY,
                  [torch.randint(0, 100, (s, s), device="cuda", dtype=torch.int32).T,
                   torch.randint(0, 100, (s, s), device="cuda", dtype=torch.int32)], 12 * s * s))
    cube = torch.rand(1024, 512, 512, device="cuda")
    found.append(("3-d permute (2,0,1) f32", AXPY, [cube.permute(2, 0, 1), torch.rand(512, 1024, 512, device="cuda")],
                  12 * cube.numel()))
    for channels in (256, 32):
        nchw = torch.rand(64 * 256 // channels, channels, 64, 64, device="cuda")
        found.append((f"NCHW as NHWC f32, {channels} channels", AXPY,
                      [nchw.permute(0, 2, 3, 1), torch.rand(nchw.shape[0], 64, 64, channels, device="cuda")],
                      12 * nchw.numel()))
    return found


def tiled_cases() -> list:
    s = 16384
    t, u = torch.rand(s, s, device="cuda").T, torch.rand(s, s, device="cuda")
    found = [("transposed 16384^2 f32", AXPY, [t, u], 12 * s * s)]
    th, uh = t.half(), u.half()  # .half() keeps the transposed strides
    found.append(("transposed 16384^2 f16", AXPY, [th, uh], 6 * s * s))
    nchw = torch.rand(64, 256, 64, 64, device="cuda")
    found.append(("NCHW as NHWC + NHWC f32", AXPY,
                  [nchw.permute(0, 2, 3, 1), torch.rand(64, 64, 64, 256, device="cuda")], 12 * nchw.numel()))
    cube = torch.rand(1024, 512, 512, device="cuda")
    found.append(("3-d permute (2,0,1) + dense f32", AXPY,
                  [cube.permute(2, 0, 1), torch.rand(512, 1024, 512, device="cuda")], 12 * cube.numel()))
    return found


def shape_cases() -> list:
    """tiled_cases with 1- and 2-byte rows and NCHW with 32 channels added."""
    found = tiled_cases()
    s = 16384
    t8 = (torch.rand(s, s, device="cuda") * 100).to(torch.int8).T
    found.append(("transposed 16384^2 int8", AXPY, [t8, (torch.rand(s, s, device="cuda") * 100).to(torch.int8)],
                  3 * s * s))
    nchw = torch.rand(64, 256, 64, 64, device="cuda").half()
    found.append(("NCHW as NHWC + NHWC f16", AXPY,
                  [nchw.permute(0, 2, 3, 1), torch.rand(64, 64, 64, 256, device="cuda").half()], 6 * nchw.numel()))
    return found + nchw_cases(channels=(32,))


def nchw_cases(channels=(256, 32)) -> list:
    """NCHW read as NHWC at a few channel counts, float32 and float16."""
    found = []
    for c in channels:
        for dtype in (torch.float32, torch.float16):
            nchw = torch.rand(16384 // c, c, 64, 64, device="cuda").to(dtype)
            dense = torch.rand(nchw.shape[0], 64, 64, c, device="cuda").to(dtype)
            found.append((f"NCHW as NHWC C={c} {str(dtype)[6:]}", AXPY, [nchw.permute(0, 2, 3, 1), dense],
                          3 * nchw.numel() * nchw.element_size()))
    return found


def with_copies(found: list) -> list:
    """The cases, after timing a copy of each case's bytes: its own ceiling."""
    for name, _, _, moved in found:
        src = torch.empty(moved // 8, device="cuda").uniform_()
        dst = torch.empty_like(src)
        seconds = timed(lambda: dst.copy_(src), reps=30)  # noqa: B023 - timed before the next case
        print(f"copy of {name}'s bytes: {moved / seconds / 1e9:.0f} GB/s", flush=True)
    return found


def sweep(label: str, variants: list, apply, all_cases: list, rounds: int) -> None:
    refs = {name: torch.cuda.jiterator._create_jit_fn(code, **({"alpha": 2} if "alpha" in code else {}))
            for name, code, _, _ in all_cases}
    for round_ in range(rounds):
        for variant in variants:
            apply(*variant)
            for name, code, xs, moved in all_cases:
                kwargs = {"alpha": 2} if "alpha" in code else {}
                fn = jiter_magic.create_jit_fn(code + f"\n// {label} {variant}", **kwargs)
                got, expected = fn(*xs, **kwargs), refs[name](*xs, **kwargs)
                if not torch.allclose(got.double(), expected.double(), rtol=1e-3, atol=1e-3):
                    print(f"MISMATCH round {round_} {label} {variant} {name}", flush=True)
                ours = timed(lambda: fn(*xs, **kwargs), reps=20)
                ref = timed(lambda: refs[name](*xs, **kwargs), reps=20)
                native = timed(lambda: torch.add(xs[1], xs[0], alpha=2), reps=20) if len(xs) == 2 else None
                shape = describe(fn.specializations[-1].spec)
                line = (f"round {round_} {label} {variant!s:22s} {name:32s} {moved / ours / 1e9:6.0f} GB/s  "
                        f"torch jit {moved / ref / 1e9:6.0f}  ratio {ref / ours:5.3f}")
                if native is not None:
                    line += f"  native {moved / native / 1e9:6.0f}  ratio {native / ours:5.3f}"
                print(line + f"  [{shape}]", flush=True)


def batched(fn, calls: int = 50) -> float:
    """Seconds a call over `calls` calls queued back to back: host costs hide behind the kernels."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def sweep_batched(all_cases: list, rounds: int) -> None:
    for round_ in range(rounds):
        for name, code, xs, moved in all_cases:
            kwargs = {"alpha": 2} if "alpha" in code else {}
            fn = jiter_magic.create_jit_fn(code, **kwargs)
            ref = torch.cuda.jiterator._create_jit_fn(code, **kwargs)
            ours, theirs = (lambda: fn(*xs, **kwargs)), (lambda: ref(*xs, **kwargs))
            each = timed(ours, reps=20), timed(theirs, reps=20)
            queued = batched(ours), batched(theirs)
            print(f"round {round_} {name:32s} each call: ours {moved / each[0] / 1e9:6.0f} GB/s torch jit "
                  f"{moved / each[1] / 1e9:6.0f} ratio {each[1] / each[0]:5.3f} | queued: ours "
                  f"{moved / queued[0] / 1e9:6.0f} torch jit {moved / queued[1] / 1e9:6.0f} "
                  f"ratio {queued[1] / queued[0]:5.3f}", flush=True)


def copy_ceiling() -> str:
    src = torch.empty(1 << 28, device="cuda").uniform_()
    dst = torch.empty_like(src)
    copy = 2 * src.numel() * 4 / timed(lambda: dst.copy_(src), reps=30) / 1e9
    fill = src.numel() * 4 / timed(lambda: dst.fill_(1.5), reps=30) / 1e9
    return f"{copy:.0f} GB/s, write-only {fill:.0f}"


def main() -> None:
    quick = "--quick" in sys.argv
    both = not any(flag in sys.argv for flag in ("--contiguous", "--tiled", "--rows", "--blocks", "--per-thread",
                                                 "--grid-order", "--narrow", "--batched", "--tile-shapes",
                                                 "--batched-tiles", "--packed", "--packed-batched", "--math",
                                                 "--vector-tiles"))
    print(f"copy ceiling {copy_ceiling()}", flush=True)
    if both or "--contiguous" in sys.argv:
        variants = [(16, None, False), (16, None, True), (4, None, False), (16, 8, False), (16, 8, True)]
        sweep("contiguous", variants[:2] if quick else variants, set_contiguous, contiguous_cases(), 2)
        set_contiguous(16, None, False)
    if "--per-thread" in sys.argv:  # more elements a thread: 16 and 32 (2 and 4 vectors of 2-byte dtypes)
        sweep("contiguous", [(16, None, False), (16, 16, False), (16, 32, False)], set_contiguous,
              contiguous_cases(), 2)
        set_contiguous(16, None, False)
    if "--vector-tiles" in sys.argv:
        sweep("vector tiles", [("off",), ("2-d",), ("all",)], set_vector_tiles, with_copies(vector_tile_cases()), 2)
        set_vector_tiles("all")
    if "--math" in sys.argv:
        variants = [(None, 128), (4, 128), (16, 128), (None, 256), (4, 256)]
        sweep("math", variants, set_math, math_cases(), 2)
        set_math(None, base.BLOCK)
    if "--batched" in sys.argv:
        sweep_batched(contiguous_cases(), 3)
    if "--narrow" in sys.argv:  # torch's jiterator moves 8 elements a thread
        cases = [case for case in contiguous_cases() if "8 inputs" not in case[0] and "float64" not in case[0]]
        sweep("contiguous", [(16, None, False), (8, 8, False), (4, 8, False), (8, 16, False)], set_contiguous,
              cases, 3)
        set_contiguous(16, None, False)
    if "--grid-order" in sys.argv:  # the tiled grid's x and y swapped, with the shipped and fixed rows
        sweep("tiled order", [(None, False), (None, True), (4, True), (16, True)], set_tiled_order, tiled_cases(), 2)
        set_tiled_order(None, False)
    if "--tile-shapes" in sys.argv:  # tile edges, rows of threads, batches a block
        variants = [("shipped", None, 1), ("32x32", 4, 2), ("32x32", 4, 4), ("64x32", 4, 1), ("64x32", 8, 1),
                    ("32x64", 8, 1), ("64x64", 8, 1), ("64x64", 16, 1), ("bytes", 16, 1), ("bytes", None, 1)]
        sweep("tile shape", variants, set_tile_shape, with_copies(shape_cases()), 2)
        set_tile_shape("shipped", None, 1)
    if "--batched-tiles" in sys.argv:  # the shipped batched tiles against the 32x32 tiles, 32x4 threads before
        sweep("tile shape", [("shipped", None, 1), ("32x32", 4, 1)], set_tile_shape, with_copies(nchw_cases()), 3)
        set_tile_shape("shipped", None, 1)
    if "--packed" in sys.argv:  # packed accesses for 1- and 2-byte tiles, and rows of threads for each pack
        variants = [("shipped", None, None), ("2,4", 16, 16), ("2,4", 8, 8)]
        sweep("packed", variants, set_packed, with_copies(packed_cases()), 2)
        set_packed("shipped", None, None)
    if "--packed-batched" in sys.argv:  # batched 1-byte packed kernels: rows of threads, blocks an SM
        variants = [(8, 0), (8, 0, True, 2, "square"), (8, 0, True, 2, "half"), (8, 0, True, 1)]
        sweep("packed batched", variants, set_packed_batched, with_copies(packed_batched_cases()), 3)
        set_packed_batched(8, 0)
    if "--blocks" in sys.argv:
        sweep("block", [(128,), (256,), (512,)], set_block, contiguous_cases(), 2)
        set_block(base.BLOCK)
    if both or "--tiled" in sys.argv:
        variants = [(32, None, True), (32, 4, True), (32, 8, True), (32, 16, True)]
        if "--tiles-64" in sys.argv:  # 2-3x slower on the H200 (bench/results/2026-12-01-h200-speed)
            variants += [(64, 8, False), (64, 8, True), (64, 16, True)]
        sweep("tiled", variants[:2] if quick else variants, set_tiled, tiled_cases(), 2)
    if both or "--rows" in sys.argv:
        sweep("rows", [(1,), (2,), (4,), (8,)], set_rows, rows_cases(), 2)
    print(f"copy ceiling {copy_ceiling()}", flush=True)


if __name__ == "__main__":
    main()
