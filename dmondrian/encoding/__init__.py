"""The prepare step: a table checked and turned into the kernel's integer keys.

Validation of the arguments, the quasi-identifiers' keys and hierarchies, the
entity and the sensitive column's codes, and the packing of distinct rows.
See docs/design.md, section "Layout".
"""
