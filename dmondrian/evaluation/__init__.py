"""Judging a release after the fact: verification of k, l and t, and the report.

See docs/design.md, section "Layout".
"""
