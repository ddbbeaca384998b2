"""The privacy rules beyond k: l-diversity and t-closeness, suppression and noise.

See docs/design.md, section "Layout".
"""
