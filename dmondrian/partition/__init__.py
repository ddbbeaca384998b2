"""The partition step's engine-neutral pieces: the cut tree, its sketches and routing.

A cut tree is planned by the Dask engine and fitted plans alike, and rows are routed down it on
either engine; nothing here imports dask. See docs/design.md, section "Layout".
"""
