"""DQN on entity observations: each actor's Q-values are its discrete heads' scores, a row's
Q-value the sum over its actors (``algo=dqn``; see docs/algorithms.md)."""
