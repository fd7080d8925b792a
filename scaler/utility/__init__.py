"""Compatibility package: keeps the import paths of existing user code working."""
