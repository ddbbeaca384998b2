"""From classes to a release: publish labels, row order, guards and the manifest.

The published labels, the written row order, the identifying-column rule and
its checks, the person keys, and the manifest that marks a release complete.
See docs/design.md, section "Layout".
"""
