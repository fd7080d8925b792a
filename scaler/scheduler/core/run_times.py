"""How long each function's tasks run, learned from the tasks that succeeded: what duration-aware scaling reads.

One exponentially weighted mean per (function name, capability set): the same function may run faster on a
GPU worker than on a CPU one. The capability set is the dispatcher's queue key, so under `even_load` (which
ignores capabilities) every function has one estimate.

Invariants:
- a mean is only ever built from observations (>= 0 seconds); a key without one has no estimate at all;
- at most `MAX_ESTIMATES` keys are kept; the one updated longest ago is forgotten first.
"""

from __future__ import annotations

from scaler.protocol.messages import Capabilities, RunTimeEstimate

#: Weight of a new run time in the mean: about the last five runs dominate, so a function whose inputs
#: change size is followed within a few tasks, and one slow outlier moves the mean by a third only.
SMOOTHING = 0.3
#: Keys kept at most (function names are the user's; a client generating names must not grow this forever).
MAX_ESTIMATES = 4096

RunTimeKey = tuple[str, Capabilities]


class RunTimeBook:
    def __init__(self, smoothing: float = SMOOTHING, max_estimates: int = MAX_ESTIMATES) -> None:
        self._smoothing = smoothing
        self._max_estimates = max_estimates
        #: key -> mean seconds; insertion order is update order (the oldest update first)
        self._means: dict[RunTimeKey, float] = {}
        #: the frozen form of `_means`, rebuilt on the first read after an update
        self._frozen: tuple[RunTimeEstimate, ...] | None = ()

    def observe(self, function_name: str, capabilities: Capabilities, seconds: float) -> None:
        """A task of `function_name` in the capability set `capabilities` succeeded after running `seconds`."""
        if seconds < 0.0:
            seconds = 0.0
        key, means = (function_name, capabilities), self._means
        known = means.pop(key, None)  # and put back last: the one updated longest ago stays first
        if known is not None:
            means[key] = known + self._smoothing * (seconds - known)
        else:
            means[key] = seconds
            if len(means) > self._max_estimates:
                del means[next(iter(means))]
        self._frozen = None

    def mean_seconds(self, function_name: str, capabilities: Capabilities) -> float | None:
        return self._means.get((function_name, capabilities))

    def estimates(self) -> tuple[RunTimeEstimate, ...]:
        """Every estimate, sorted by function name then capabilities."""
        if self._frozen is None:
            self._frozen = tuple(
                RunTimeEstimate(name, capabilities, mean) for (name, capabilities), mean in sorted(self._means.items())
            )
        return self._frozen

    def __len__(self) -> int:
        return len(self._means)
