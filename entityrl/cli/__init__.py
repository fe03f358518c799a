"""The ``entityrl`` command."""
