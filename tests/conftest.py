"""What every test shares: hypothesis without its per-example deadline.

The deadline (200 ms by default) is measured on the wall clock: a test process starved of the CPU
(a loaded machine, a paused container) fails an example's first run and passes its rerun, which
hypothesis reports as a flaky failure ("Unreliable test timings"). The properties assert results,
not time; what must be fast is measured by bench/."""

from hypothesis import settings

settings.register_profile("berth", deadline=None)
settings.load_profile("berth")
