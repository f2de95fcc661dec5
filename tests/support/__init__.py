"""What the test modules share (transcript builders, pytester projects, scored records, real-tool runs); a test
module imports its helpers from here, never from another test module (tests/test_docs.py holds that true)."""

import pytest

# Their assertions say what differed, as a test module's do (pytest rewrites only what it is told to).
pytest.register_assert_rewrite("support")
