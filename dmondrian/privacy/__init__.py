"""The privacy rules beyond k: l-diversity and t-closeness, entities, suppression, noise.

See docs/design.md, section "Layout".
"""
