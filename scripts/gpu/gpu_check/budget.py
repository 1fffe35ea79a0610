"""The time budget of the whole run (--budget), of which every step's bound is cut."""

import time

RESERVE_S = 5.0  # kept back from the budget for the final report
MIN_STEP_S = 5.0  # a step gets at least this much, or does not start


class Budget:
    def __init__(self, seconds):
        self.start = time.monotonic()
        self.seconds = seconds

    def elapsed(self):
        return time.monotonic() - self.start

    def left(self):
        return self.seconds - self.elapsed() - RESERVE_S
