"""preemption(): the launcher's preemption notice, read from TRAINYARD_PREEMPTION_FILE."""

from __future__ import annotations

import json
import os
import tempfile
import time
import unittest

import trainyard
from trainyard import _preempt
from tests.support import FakeServer, environment


class PreemptionTest(unittest.TestCase):
    def setUp(self) -> None:
        _preempt._seen = None
        self.addCleanup(setattr, _preempt, "_seen", None)
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "preemption.json")

    def test_none_outside_trainyard(self) -> None:
        with environment():
            self.assertIsNone(trainyard.preemption())
            self.assertIsNone(trainyard.preemption_info())

    def test_none_until_posted_then_the_deadline(self) -> None:
        with environment(TRAINYARD_PREEMPTION_FILE=self.path):
            self.assertIsNone(trainyard.preemption())
            deadline = time.time() + 25
            with open(self.path, "w", encoding="utf-8") as f:
                json.dump({"deadline": deadline, "reason": "SIGTERM"}, f)
            self.assertEqual(trainyard.preemption(), deadline)
            self.assertEqual(trainyard.preemption_info(), trainyard.Preemption(deadline, "SIGTERM"))
            os.remove(self.path)  # once seen, it stays: the gang is stopping
            self.assertEqual(trainyard.preemption(), deadline)

    def test_tells_the_launcher_it_listens_once(self) -> None:
        server = FakeServer()
        self.addCleanup(server.close)
        _preempt._listening_pid = None
        with environment(TRAINYARD_PREEMPTION_FILE=self.path, TRAINYARD_REPORT_SOCKET=server.path, RANK="3"):
            self.assertIsNone(trainyard.preemption())
            self.assertIsNone(trainyard.preemption())
        self.assertEqual(server.requests, [{"op": "listen", "rank": 3}])

    def test_half_written_notice_is_not_one(self) -> None:
        with environment(TRAINYARD_PREEMPTION_FILE=self.path):
            with open(self.path, "w", encoding="utf-8") as f:
                f.write('{"deadline": 12')
            self.assertIsNone(trainyard.preemption())


if __name__ == "__main__":
    unittest.main()
