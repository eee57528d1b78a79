"""The package version, in a module of its own so that code below the facade can read it
without importing the package root (which re-exports the facade)."""

__version__ = "0.1.0"
