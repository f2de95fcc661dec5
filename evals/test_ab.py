"""The A/B evaluation: every corpus entry × arm × run is one item (``express-with-1``).

    pytest evals/ --agent-eval-runs 2 --arms with,without -k express                      # from the checkout
    pytest --pyargs pytest_agent_eval.evals --agent-eval-runs 2 --arms with,without -k express  # installed

Infrastructure failures are ERRORs; a contaminated without-arm or a broken agent-eval.yaml threshold FAILS.
"""


def test_ab(agent_result, agent_gate):
    agent_gate(agent_result)
