"""The package version, kept apart so that setuptools can read it without importing the package."""

__version__ = "0.1.0"
