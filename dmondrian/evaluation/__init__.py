"""Judging a release: verification of k, l and t, the report, and the manifest that records them.

See docs/design.md, section "Layout".
"""
