"""The Dask engine's steps, one module each; :mod:`dmondrian.distributed` is its front.

See docs/design.md, section "The Dask engine".
"""
