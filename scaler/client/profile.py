"""ProfileResult: what `future.profiling_info()` returns."""

from __future__ import annotations

from dataclasses import dataclass

from scaler.protocol.messages import Profile


@dataclass(frozen=True)
class ProfileResult:
    duration_s: float  #: wall time of the function call, seconds
    memory_peak: int  #: peak growth of the processor's resident memory during the call, bytes
    cpu_time_s: float  #: CPU time of the processor during the call, seconds

    @property
    def duration_us(self) -> float:
        """Wall time in microseconds (the spelling of the profiling guide)."""
        return self.duration_s * 1_000_000

    @property
    def peak_memory(self) -> int:
        """Same as `memory_peak` (the spelling of the profiling guide)."""
        return self.memory_peak

    @classmethod
    def from_profile(cls, profile: Profile) -> ProfileResult:
        return cls(profile.duration_seconds, profile.peak_memory_bytes, profile.cpu_seconds)
