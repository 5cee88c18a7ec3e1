/**
 * Highlight the body of `%%jiterator` notebook cells as C++.
 *
 * The `jiter_magic` cell magic compiles the cell body as C++, but JupyterLab
 * gives every code cell the notebook's kernel language (Python). A cell
 * editor follows `cell.model.mimeType`, so we set that per cell from its
 * first line, and put the notebook's own code MIME type back when the
 * magic line goes away.
 */
import {
  JupyterFrontEnd,
  JupyterFrontEndPlugin
} from '@jupyterlab/application';
import { ICellModel } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';

import { keepCleanUntilChanged } from './cleanopen';

const MAGIC = '%%jiterator';
const CPP_MIME = 'text/x-c++src'; // in JupyterLab 4's CodeMirror language registry

/** Give one code cell the MIME type its first line asks for. */
function sync(panel: NotebookPanel, cell: ICellModel): void {
  if (cell.isDisposed || cell.type !== 'code') {
    return;
  }
  if (cell.sharedModel.getSource().startsWith(MAGIC)) {
    cell.mimeType = CPP_MIME; // a no-op (no signal) when already C++
  } else if (cell.mimeType === CPP_MIME) {
    // Only undo our own change: leave any other MIME type alone.
    cell.mimeType = panel.content.codeMimetype;
  }
}

// Cell models already watched: a moved cell is announced again as a new value.
const watched = new WeakSet<ICellModel>();

/** Watch one cell model: its source, and anyone else resetting its MIME type. */
function watch(panel: NotebookPanel, cell: ICellModel): void {
  if (cell.type !== 'code' || watched.has(cell)) {
    return;
  }
  watched.add(cell);
  cell.sharedModel.changed.connect((_, change) => {
    if (change.sourceChange) {
      sync(panel, cell);
    }
  });
  // The notebook sets every code cell to the kernel's MIME type when a cell
  // widget is created and again whenever the kernel's language_info arrives
  // (kernel start/restart); re-apply C++ after it does.
  cell.mimeTypeChanged.connect(() => sync(panel, cell));
  sync(panel, cell);
}

/** Watch every cell of a notebook, now and as cells are added. */
function watchNotebook(panel: NotebookPanel): void {
  const cells = panel.context.model.cells;
  for (let i = 0; i < cells.length; i++) {
    watch(panel, cells.get(i));
  }
  // Added, pasted, moved, undone or type-changed cells arrive here as new values.
  cells.changed.connect((_, args) => {
    for (const cell of args.newValues) {
      watch(panel, cell);
    }
  });
}

/** A plugin that runs `each` on every notebook panel, those open at start-up and those opened later. */
function everyNotebook(
  id: string,
  description: string,
  each: (panel: NotebookPanel) => void
): JupyterFrontEndPlugin<void> {
  return {
    id,
    description,
    autoStart: true,
    requires: [INotebookTracker],
    activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
      // Panels restored at start-up and opened later all pass through widgetAdded.
      tracker.forEach(each);
      tracker.widgetAdded.connect((_, panel) => each(panel));
    }
  };
}

export default [
  everyNotebook('jiter-magic-highlight:plugin', 'Highlight %%jiterator cell bodies as C++.', watchNotebook),
  everyNotebook(
    'jiter-magic-highlight:clean-open',
    'Opening a notebook with saved widget state does not mark it modified.',
    keepCleanUntilChanged
  )
];
