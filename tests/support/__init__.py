"""What the test modules share (transcript builders, pytester projects, scored records, real-tool runs); a test
module imports its helpers from here, never from another test module (tests/test_docs.py holds that true)."""

import pkgutil

import pytest

# Their assertions say what differed, as a test module's do (pytest rewrites only the modules it is told of, and
# this package itself is imported already).
pytest.register_assert_rewrite(*(f"{__name__}.{module.name}" for module in pkgutil.iter_modules(__path__)))
