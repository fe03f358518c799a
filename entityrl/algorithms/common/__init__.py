"""What several algorithms share: rollouts and GAE, the replay buffer, the optimizer over flat
parameters, sums over processes, reward scaling, target networks, settings checks."""
