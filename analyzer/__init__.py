"""Semantic analyses with clingo and z3."""
