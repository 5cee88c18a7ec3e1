"""fn.inspect: the compiled code of a specialization as text (host assembly, PTX, SASS), with the
user's lines marked; no GPU needed."""
from __future__ import annotations

import re

import numpy as np
import pytest

import jiter_magic
from jiter_magic.runtime.compiled_code import find_nvdisasm, mark_user_lines

CODE = "template <typename T>\nT insp_axpy(T x, T y, T alpha) {\n  return -x + alpha * y;\n}"
FN = jiter_magic.create_jit_fn(CODE, alpha=1.0)


def test_ptx_of_a_specialization_marks_the_users_line():
    ptx = FN.inspect("float32", "float32")  # kind='ptx' is the default, for CUDA
    assert re.search(r"^\.target sm_\d+", ptx, re.M) and ".visible .entry jm_kernel" in ptx
    assert "\t// line 3: return -x + alpha * y;" in ptx
    marked = ptx.index("// line 3:")
    assert re.search(r"\bfma\.rn\.f32|\bmul\.f32|\bsub\.f32|\bneg\.f32", ptx[marked:])  # the arithmetic follows it
    assert "f64" in FN.inspect("float64", "float64", kind="ptx")


def test_ptx_for_example_inputs_follows_their_layout():
    transposed = FN.inspect(np.ones((4, 4), np.float32).T, np.ones((4, 4), np.float32))
    assert transposed != FN.inspect("float32", "float32")


def test_host_assembly_marks_the_users_line():
    asm = FN.inspect("float32", "float32", kind="asm")
    assert "jm_kernel:" in asm
    assert "\t# line 3: return -x + alpha * y;" in asm
    assert FN.inspect("float64", "float64", kind="asm", backend="cpu") != asm


def test_bad_kinds_and_backends_say_what_is_expected():
    with pytest.raises(jiter_magic.InvalidArgumentError, match=r"^kind must be one of 'asm', 'ptx', 'sass', got 'cubin'$"):
        FN.inspect(kind="cubin")
    with pytest.raises(jiter_magic.InvalidArgumentError, match=r"kind='asm' is the CPU backend's assembly"):
        FN.inspect(kind="asm", backend="cuda")
    with pytest.raises(jiter_magic.InvalidArgumentError, match=r"kind='ptx' is CUDA code"):
        FN.inspect(kind="ptx", backend="cpu")
    with pytest.raises(jiter_magic.BindError):
        FN.inspect("float32")  # two inputs


def test_sass_needs_nvdisasm_and_says_where_to_get_it():
    if find_nvdisasm() is None:
        with pytest.raises(jiter_magic.ToolchainError, match=r"pip install nvidia-cuda-nvdisasm"):
            FN.inspect(kind="sass")
        return
    sass = FN.inspect(kind="sass")
    assert "FFMA" in sass and ".debug_frame" not in sass  # instructions only, the functor's multiply-add
    assert "jm_kernel" in sass and "\t// line 3: return -x + alpha * y;" in sass
    assert "//## File" not in sass and "\t// generated code" in sass  # nvdisasm's comments, without made-up paths
    after = sass.split("// line 3: return -x + alpha * y;")[1].split("// generated code")[0]
    assert "FFMA" in after  # the functor's multiply-add comes after its line


def test_marking_reads_only_the_users_file():
    text = ('\t.file 1 "/made/up/jm_kernel.cu"\n\t.file 2 "/made/up/jiterator"\n\t.loc 1 7 3\n\tadd\n\t.loc 2 2 1\n'
            '\tmul\n\t.loc 2 2 9\n\tsub\n\t.loc 1 8 1\n\tret\n')
    marked = mark_user_lines(text, "first\nsecond line\n", comment="//")
    assert marked.splitlines() == ['\t.file 1 "jm_kernel.cu"', '\t.file 2 "jiterator"', "\t.loc 1 7 3", "\tadd",
                                   "\t// line 2: second line", "\t.loc 2 2 1", "\tmul", "\t.loc 2 2 9", "\tsub",
                                   "\t// generated code", "\t.loc 1 8 1", "\tret"]
    assert mark_user_lines("no line tables", "x", comment="#") == "no line tables"


def test_cubins_are_whole_elf_files():
    """CuPy's getCUBIN drops the last byte; the compiler puts it back so that ELF tools can read the file."""
    from jiter_magic.compilers.nvrtc import NvrtcCompiler, complete_elf

    source = FN.source("float32", "float32", backend="cuda")
    cubin = NvrtcCompiler("sm_90").compile(source, "jm_kernel").binary
    ph_offset = int.from_bytes(cubin[0x20:0x28], "little")
    ph_size, ph_count = int.from_bytes(cubin[0x36:0x38], "little"), int.from_bytes(cubin[0x38:0x3A], "little")
    assert cubin[:4] == b"\x7fELF" and ph_offset + ph_size * ph_count == len(cubin)
    assert complete_elf(cubin[:-1]) == cubin and complete_elf(cubin) == cubin  # only one byte short is completed
    assert complete_elf(cubin[:-2]) == cubin[:-2] and complete_elf(b"not an ELF") == b"not an ELF"
