"""Which transitions between predicate states are possible at all.

A transition from state ``s`` to state ``t`` (both truth values of the predicates) is **valid**
when

* no monotone predicate turns false: ``s[i]`` implies ``t[i]`` for every predicate over a
  relation the policy derives monotonically (:mod:`.monotone`);
* every state invariant (a formula without primes) holds in ``t``;
* every transition invariant (a formula with primes) holds for ``(s, t)``.

Reaching the unsafe state and ending the session are valid from every state. Laplace smoothing
gives probability only to valid transitions; a recorded session that makes an invalid one
contradicts the policy's derivation or an invariant, and is reported as an error.

>>> from .patterns import parse_formula
>>> v = Validity(("Edited", "Pushed"), (True, False), (("Pushed -> Edited", parse_formula("Pushed -> Edited")),))
>>> v.problem((True, False), (False, False))
'`Edited` is monotone and cannot turn false'
>>> v.problem((False, False), (False, True))
'the invariant `Pushed -> Edited` does not hold after it'
>>> v.valid((True, False), (True, True))
True
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ForecastError
from .patterns import Formula, parse_formula


@dataclass(frozen=True)
class Validity:
    names: tuple[str, ...]
    monotone: tuple[bool, ...]
    invariants: tuple[tuple[str, Formula], ...] = ()

    @classmethod
    def build(cls, names: tuple[str, ...], monotone: tuple[bool, ...], invariants: list[str]) -> Validity:
        """Validity from the predicates and invariant texts (:class:`ForecastError` for an
        invariant that does not parse or names something that is not a predicate)."""
        parsed = []
        for text in invariants:
            formula = parse_formula(text)
            unknown = sorted(formula.names() - set(names))
            if unknown:
                known = ", ".join(f"`{n}`" for n in names)
                raise ForecastError(
                    f"invariant `{text}`: `{unknown[0]}` is not a predicate (the predicates: {known}); "
                    'name a predicate with a pattern like `name=Rel(_, "x")`'
                )
            parsed.append((text, formula))
        return cls(names, monotone, tuple(parsed))

    def _env(self, values: tuple[bool, ...]) -> dict[str, bool]:
        return dict(zip(self.names, values, strict=True))

    def state_problem(self, values: tuple[bool, ...]) -> str | None:
        """Why a state is not a valid state, or None."""
        env = self._env(values)
        for text, formula in self.invariants:
            if not formula.primed() and not formula.holds(env):
                return f"the invariant `{text}` does not hold"
        return None

    def problem(self, source: tuple[bool, ...], target: tuple[bool, ...]) -> str | None:
        """Why the transition is not valid, or None."""
        for name, monotone, before, after in zip(self.names, self.monotone, source, target, strict=True):
            if monotone and before and not after:
                return f"`{name}` is monotone and cannot turn false"
        now, then = self._env(source), self._env(target)
        for text, formula in self.invariants:
            if formula.primed():
                if not formula.holds(now, then):
                    return f"the transition invariant `{text}` does not hold"
            elif not formula.holds(then):
                return f"the invariant `{text}` does not hold after it"
        return None

    def valid(self, source: tuple[bool, ...], target: tuple[bool, ...]) -> bool:
        return self.problem(source, target) is None
