"""Adapters that run environments written for other libraries on entityrl, unchanged.

:mod:`entityrl.compat.entity_gym` wraps entity-gym 0.1.x environments. No adapter imports the
library it adapts: each reads that library's objects by their attribute names.
"""
