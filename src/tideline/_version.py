"""The package version, in a module of its own so that code below the facade can read it
without importing the package root (which re-exports the facade)."""

#: The version of the ``tideline-memory`` distribution.
__version__ = "0.1.0"
