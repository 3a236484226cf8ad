"""The package version, in a module of its own: what needs it (metrics provenance) imports this,
not the package, whose `load` reaches the whole toolkit."""

__version__ = "0.1.0"
