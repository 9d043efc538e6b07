"""The version of policyc (the facade re-exports it as ``policyc.__version__``).

It lives here, in the lowest layer that states it, so that every layer (the bundles the
runtime writes, the language server, the command) can name it without importing the facade.

>>> __version__.count(".")
2
"""

from __future__ import annotations

__version__ = "0.1.0"
