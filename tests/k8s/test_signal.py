"""The workers' wake-up signal never swallows the cancellation that stops them (a graceful shutdown ends)."""

from __future__ import annotations

import asyncio

from connectors.k8s.journal import Signal


def test_cancelled_as_the_signal_is_set_the_waiter_stops() -> None:
    async def main() -> bool:
        signal = Signal()

        async def worker_loop() -> None:
            while True:
                await signal.wait(10)

        task = asyncio.create_task(worker_loop())
        await asyncio.sleep(0.01)
        signal.set()
        task.cancel()  # in the same loop iteration as the wake-up
        await asyncio.sleep(0.1)
        return task.done() and task.cancelled()

    assert asyncio.run(main())


def test_wait_times_out_and_reports_whether_it_was_set() -> None:
    async def main() -> tuple[bool, bool]:
        signal = Signal()
        timed_out = await signal.wait(0.01)
        signal.set()
        return timed_out, await signal.wait(0.01)

    assert asyncio.run(main()) == (False, True)
