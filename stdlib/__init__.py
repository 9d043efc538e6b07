"""Library policies (``.dl``) importable with ``.import NAME``, and their functor implementations."""
