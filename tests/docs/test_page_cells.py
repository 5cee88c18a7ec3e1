"""What a reader types into a notebook from README.md and docs/notebook.md runs as typed.

Each page's notebook cells (see page_cells.py for how a block is sorted) become one notebook, run top
to bottom in a fresh IPython kernel of this environment by nbclient, as Jupyter runs it: a cell that
raises fails the test with the cell's traceback. Cells marked `<!-- notebook: gpu -->` run only on a
machine with a CUDA GPU, in a test of their own (marked `gpu`, so it shows as skipped elsewhere) that
runs every cell of the page there, where the pages' `device` is "cuda".
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from page_cells import Block, UnsortedBlock, blocks, page_blocks

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
nbval_kernel = pytest.importorskip("nbval.kernel")
jupyter_manager = pytest.importorskip("jupyter_client.manager")

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "docs" / "notebook.md"]
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours of IPython's tracebacks
CELL_SECONDS = 300  # a cell's compiles on a slow, shared 2-core machine, with room to spare


def _run(cells: list[Block], workdir: Path) -> None:
    """The cells as one notebook in a fresh kernel of this interpreter (nbval's `--nbval-current-env`
    kernel spec); nbclient raises CellExecutionError, with the traceback, at the first cell that fails."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell.code) for cell in cells])
    manager = jupyter_manager.KernelManager(kernel_name=nbval_kernel.CURRENT_ENV_KERNEL_NAME,
                                            kernel_spec_manager=nbval_kernel.NbvalKernelspecManager())
    client = nbclient.NotebookClient(notebook, km=manager, timeout=CELL_SECONDS, allow_errors=False,
                                     resources={"metadata": {"path": str(workdir)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        where = next((f"{c.page}:{c.line}" for c, run in zip(cells, notebook.cells)
                      if any(o.get("output_type") == "error" for o in run.get("outputs", []))), "?")
        pytest.fail(f"the block at {where} fails when typed into a notebook:\n{ANSI.sub('', str(error))}", pytrace=False)
    errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert errors == []


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_page_runs_in_a_notebook(page: Path, fresh_cache, tmp_path):
    cells = [block for block in page_blocks(page) if block.kind == "cell"]
    assert cells, f"{page.name} has no notebook cell: did the fences change?"
    _run(cells, tmp_path)


@pytest.mark.gpu
@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_page_runs_in_a_notebook_on_a_gpu(page: Path, fresh_cache, tmp_path):
    _run([block for block in page_blocks(page) if block.kind in ("cell", "gpu cell")], tmp_path)


def test_readme_notebook_example_imports_torch():
    """The README's notebook example (from `%load_ext` on) is what a reader copies into a new notebook,
    apart from the Python example above it: its call names torch, so its own cells import torch."""
    cells = [block.code for block in page_blocks(ROOT / "README.md") if block.kind == "cell"]
    start = [i for i, code in enumerate(cells) if code.strip() == "%load_ext jiter_magic"]
    assert len(start) == 1, "the README's notebook example no longer starts with one %load_ext cell"
    call = [i for i, code in enumerate(cells) if "my_kernel(torch." in code and i > start[0]]
    assert call, "the README's notebook example no longer calls my_kernel on torch tensors"
    assert any("import torch" in code for code in cells[start[0]:call[0] + 1])


PAGE = """Intro.

```
%load_ext jiter_magic
```

```c++
%%jiterator f
template <typename T> T f(T x) { return x; }
```

<!-- notebook: gpu -->
```python
f(torch.rand(3, device="cuda"))
```

```bash
pip install jiter_magic
```

<!-- notebook: not a cell (a config file) -->
```python
c.A = 1
```

  ```python
  indented = True
  ```
"""


def test_blocks_are_sorted_by_their_fence_and_marker():
    found = blocks(PAGE, "page.md")
    assert [(b.line, b.lang, b.kind) for b in found] == [
        (3, "", "cell"), (7, "c++", "cell"), (13, "python", "gpu cell"), (17, "bash", "a shell command"),
        (22, "python", "not a cell (a config file)"), (26, "python", "cell")]
    assert found[1].code == "%%jiterator f\ntemplate <typename T> T f(T x) { return x; }"
    assert found[-1].code == "indented = True"


@pytest.mark.parametrize("text, complaint", [
    ("```\nplain text\n```\n", "page.md:1: a ``` block that is neither"),
    ("```toml\n[tool]\n```\n", "page.md:1: a ```toml block"),
    ("<!-- notebook: gpu -->\n```bash\nnvidia-smi\n```\n", "page.md:2: a block marked 'gpu' must be a notebook cell"),
    ("text\n```python\nx = 1\n", "page.md:2: a fence that is never closed"),
])
def test_an_unsorted_block_is_an_error_naming_its_line(text: str, complaint: str):
    with pytest.raises(UnsortedBlock, match="^" + re.escape(complaint)):
        blocks(text, "page.md")
