"""Results kept per object: a method's answers cached on its own instance.

``functools.lru_cache`` on a method keys one process-wide cache by ``self``, so every instance it has seen (a KB
with its store and indexes, a reader holding that KB) stays in memory until the process ends: a server that
reopens its KB after each rebuild kept every earlier one. :func:`per_instance` keeps the answers in the
instance, which frees them with it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def per_instance(most: int) -> Callable[[F], F]:
    """Cache a method's results on its instance, at most ``most`` of them (emptied when full).

    >>> class Squares:
    ...     calls = 0
    ...     @per_instance(2)
    ...     def of(self, n):
    ...         Squares.calls += 1
    ...         return n * n
    >>> s = Squares()
    >>> s.of(3), s.of(3), Squares.calls
    (9, 9, 1)
    >>> import gc, weakref; held = weakref.ref(s); del s; _ = gc.collect(); held() is None
    True
    """

    def wrap(method: F) -> F:
        slot = f"_kept_{method.__name__}"

        @functools.wraps(method)
        def kept(self, *args, **kwargs):
            answers = self.__dict__.get(slot)
            if answers is None:
                answers = self.__dict__[slot] = {}
            key = (args, tuple(sorted(kwargs.items()))) if kwargs else args
            try:
                return answers[key]
            except KeyError:
                pass
            if len(answers) >= most:
                answers.clear()
            answer = answers[key] = method(self, *args, **kwargs)
            return answer

        return kept  # type: ignore[return-value]

    return wrap


def forget(obj: object) -> None:
    """Empty every :func:`per_instance` cache of ``obj`` (a benchmark times each request as a new one).

    >>> class Squares:
    ...     @per_instance(2)
    ...     def of(self, n):
    ...         return n * n
    >>> s = Squares(); _ = s.of(3); forget(s); [k for k in vars(s) if k.startswith("_kept_")]
    []
    """
    for slot in [k for k in vars(obj) if k.startswith("_kept_")]:
        del obj.__dict__[slot]
