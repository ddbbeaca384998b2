"""From classes to a release: publish labels, row order and the guards.

The published labels, the written row order, the identifying-column rule and its checks, and the
person keys. The manifest, which records the release's report, is
:mod:`dmondrian.evaluation.manifest`. See docs/design.md, section "Layout".
"""
