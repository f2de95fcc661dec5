"""What the test modules share (transcript builders, pytester projects, scored records, real-tool runs); a test
module imports its helpers from here, never from another test module (tests/test_docs.py holds that true)."""
