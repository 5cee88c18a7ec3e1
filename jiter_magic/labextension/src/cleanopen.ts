/**
 * Opening a notebook does not mark it modified.
 *
 * jiter_magic turns on JupyterLab's "Save Widget State Automatically", so that saved
 * notebooks keep their panels. With it on, ipywidgets' manager marks the notebook dirty
 * whenever it registers a widget model, including the models it restores from the saved
 * state when the notebook opens, and when a new kernel clears that state. Nothing the user
 * sees has changed then, yet the tab shows a modified notebook and closing asks to save.
 * Until the notebook's content changes (an edit, a cell run) after it was loaded or saved,
 * a dirty mark set without a content change is taken back. An edit or a run marks it as
 * before.
 */
import { NotebookPanel } from '@jupyterlab/notebook';

/** Keep one notebook clean while its content is what was loaded or last saved. */
export function keepCleanUntilChanged(panel: NotebookPanel): void {
  const context = panel.context;
  void context.ready.then(() => {
    const model = context.model;
    let changed = false;
    model.contentChanged.connect(() => {
      changed = true;
    });
    // A save or a revert makes the file and the model agree again.
    context.fileChanged.connect(() => {
      changed = false;
    });
    model.stateChanged.connect((_, change) => {
      if (change.name === 'dirty' && change.newValue === true && !changed) {
        model.dirty = false;
      }
    });
    if (model.dirty && !changed) {
      model.dirty = false; // marked while the widget state was restored, before this ran
    }
  });
}
