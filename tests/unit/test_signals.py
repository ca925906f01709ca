"""Signals around the start: once it is over, the handlers and wake-up fd from before are back.

What a signal does during the start (the process exits at once) is tested on real processes:
tests/component/test_cli.py and tests/integration/test_operating.py.
"""

import signal

from worker.signals import STOP_SIGNALS, exit_if_signalled_while_starting


def test_the_handlers_from_before_are_back_once_the_start_is_over_and_take_the_next_signal():
    seen = []
    before = {signum: signal.signal(signum, lambda signum, _frame: seen.append(signum)) for signum in STOP_SIGNALS}
    wakeup_fd_before = signal.set_wakeup_fd(-1)
    try:
        ours = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
        with exit_if_signalled_while_starting():
            assert all(signal.getsignal(signum) is not ours[signum] for signum in STOP_SIGNALS)
        assert {signum: signal.getsignal(signum) for signum in STOP_SIGNALS} == ours
        assert signal.set_wakeup_fd(-1) == -1  # none left behind
        signal.raise_signal(signal.SIGTERM)  # after the start: to the handler from before, not an exit
        assert seen == [signal.SIGTERM]
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(wakeup_fd_before)
