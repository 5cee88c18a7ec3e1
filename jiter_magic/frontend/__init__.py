"""The code string: tokens, the entry function's declaration, and how its parameters bind to a call."""
