"""Unit tests of benches/perf.py's parsing (run by scripts/test.sh)."""
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import perf  # noqa: E402


class PromptTest(unittest.TestCase):
    def test_an_event_line_inside_the_prompt_is_taken_out(self):
        # Seen in a callgrind row: port 1's start event split the prompt.
        seg = ("Checking link statuses...\nDone\nt\nPort 1: link state change event\n"
               "estpmd> \n")
        self.assertTrue(perf.prompt_seen(seg))

    def test_a_prompt_not_yet_ended_is_not_seen(self):
        self.assertFalse(perf.prompt_seen("Done\ntestpmd> "))
        self.assertFalse(perf.prompt_seen("Port 0: link state change event\ntestpmd"))

    def test_a_plain_prompt_is_seen(self):
        self.assertTrue(perf.prompt_seen("Done\ntestpmd> \r\n"))


if __name__ == "__main__":
    unittest.main()
