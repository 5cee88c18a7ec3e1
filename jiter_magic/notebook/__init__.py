"""The notebook: the %%jiterator magics, panels, completion."""
