"""Integrations with frameworks (each imports its framework lazily; install the matching extra)."""
