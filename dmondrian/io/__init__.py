"""The write step and the reading of inputs: files, CSV tables, staging, the Parquet sink.

Import from the modules themselves (:mod:`dmondrian.io.files` for ``read_table``/``write_table``):
the package hands on no names, so that a test patching a function patches the one its callers use.
See docs/design.md, section "Layout".
"""
