"""The optional C call path: two small extension modules, compiled at install (setup.py), and their loading."""
