"""The optional C call path: two small extension modules, their build and their loading."""
