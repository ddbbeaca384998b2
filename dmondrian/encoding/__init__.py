"""The prepare step: a table checked and turned into the kernel's integer keys.

Validation of the arguments, the quasi-identifiers' keys, the sensitive column's codes, and the
packing of distinct rows. The hierarchies live in :mod:`dmondrian.kinds` (the kinds are built on
them) and the entity's codes in :mod:`dmondrian.privacy` (its constraints count them), so that no
import runs back up between the folders. See docs/design.md, section "Layout".
"""
